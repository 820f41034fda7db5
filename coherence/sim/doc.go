// Package sim is a seeded simulator of the coherence protocol: instances
// running coherence.Node with real caches (cache.Cache), clients, a store
// (rows with versions, row locks, read-committed reads, fencing and the
// write floor), a coordinator (leases in true time, views down ordered
// watches) and a network that delays, reorders, loses and duplicates
// messages, with partitions (an instance cut off from coordinator and
// peers, its store connection stalled) and crashes, and clocks that drift.
// Everything comes from Config.Seed, so a run replays exactly.
//
//	res, err := sim.Run(sim.DefaultConfig(seed))
//	if v := sim.Check(res); v != nil { fmt.Println(v) } // the seed and an excerpt
//
// Check is a linearizability check of the history specialised to
// registers whose writes the store orders (fast: a sweep), cross-checked
// with porcupine in the tests. TestSimulate runs it over many seeds;
// NIMBUS_SIM_SEED=N replays one, NIMBUS_SIM_SEEDS=K runs K,
// NIMBUS_SIM_TRACE=1 prints every step of a replay.
package sim
