package sim

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// seeds returns the seeds to run: NIMBUS_SIM_SEED=N replays one,
// NIMBUS_SIM_SEEDS=K runs K from 1, else 1..def.
func seeds(t *testing.T, def int) []uint64 {
	if s := os.Getenv("NIMBUS_SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("NIMBUS_SIM_SEED=%q: %v", s, err)
		}
		return []uint64{n}
	}
	k := def
	if s := os.Getenv("NIMBUS_SIM_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("NIMBUS_SIM_SEEDS=%q: want a positive count", s)
		}
		k = n
	}
	out := make([]uint64, k)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// traced sets cfg.Trace to print to stderr when NIMBUS_SIM_TRACE is set
// (with one seed: the trace of a replay).
func traced(cfg *Config) {
	if os.Getenv("NIMBUS_SIM_TRACE") != "" {
		cfg.Trace = func(s string) { fmt.Fprintln(os.Stderr, s) }
	}
}

// runSeeds runs one config per seed on two workers (the CI machine has
// two cores) and returns the results in seed order.
func runSeeds(t *testing.T, ss []uint64, mk func(seed uint64) Config) []*Result {
	t.Helper()
	out := make([]*Result, len(ss))
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, len(ss))
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := Run(mk(ss[i]))
				if err != nil {
					errs <- fmt.Errorf("seed %d: %w", ss[i], err)
					continue
				}
				out[i] = res
			}
		}()
	}
	for i := range ss {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// TestSimulate runs the protocol under every fault from many seeds and
// checks every history. A failure prints its seed, the excerpt of the
// history around the bad read and the command that replays it.
func TestSimulate(t *testing.T) {
	ss := seeds(t, simSeeds)
	start := time.Now()
	res := runSeeds(t, ss, func(seed uint64) Config {
		cfg := DefaultConfig(seed)
		cfg.Ops = simOps
		// Even seeds write less (10%): entries live longer in the caches
		// and half the reads are answered from them.
		if seed%2 == 0 {
			cfg.WritesPerMille = 100
		}
		if len(ss) == 1 {
			traced(&cfg)
		}
		return cfg
	})
	var total Stats
	for _, r := range res {
		if v := Check(r); v != nil {
			t.Errorf("%s\nreplay: NIMBUS_SIM_SEED=%d go test -count=1 -run 'TestSimulate$' ./coherence/sim (NIMBUS_SIM_TRACE=1 prints every step)", v, r.Seed)
		}
		total = add(total, r.Stats)
	}
	el := time.Since(start)
	t.Logf("%d seeds, %d client operations (%d reads, %d from the cache; %d writes, %d failed; %d timed out), %d messages, %d partitions, %d crashes, %d sessions lost, %v simulated, in %v: %.0f operations/s",
		len(ss), total.Ops, total.Reads, total.CacheHits, total.Writes, total.WritesFailed, total.Timeouts,
		total.Messages, total.Partitions, total.Crashes, total.Lost, total.SimTime.Round(time.Second), el.Round(time.Millisecond), float64(total.Ops)/el.Seconds())
	if total.CacheHits == 0 || total.Partitions == 0 || total.Crashes == 0 || total.Lost == 0 {
		t.Errorf("the runs did not exercise the cache and every fault: %+v", total)
	}
}

func add(a, b Stats) Stats {
	a.Ops += b.Ops
	a.Reads += b.Reads
	a.Writes += b.Writes
	a.Subtrees += b.Subtrees
	a.CacheHits += b.CacheHits
	a.Fills += b.Fills
	a.Installs += b.Installs
	a.WritesFailed += b.WritesFailed
	a.Timeouts += b.Timeouts
	a.Messages += b.Messages
	a.Dropped += b.Dropped
	a.Partitions += b.Partitions
	a.Crashes += b.Crashes
	a.Lost += b.Lost
	a.Events += b.Events
	a.SimTime += b.SimTime
	return a
}

// TestSimulateIsDeterministic: one seed, run twice, gives one history.
func TestSimulateIsDeterministic(t *testing.T) {
	digest := func() (uint64, Stats) {
		cfg := DefaultConfig(7)
		cfg.Ops = 3000
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := fnv.New64a()
		for i := range res.Ops {
			fmt.Fprintf(h, "%d\n", i)
			h.Write([]byte(res.describe(i)))
		}
		return h.Sum64(), res.Stats
	}
	h1, s1 := digest()
	h2, s2 := digest()
	if h1 != h2 || s1 != s2 {
		t.Fatalf("seed 7 ran two ways:\n%+v\n%+v", s1, s2)
	}
}

// The checker must be able to fail: each part of the protocol switched off
// in turn, the simulator finds a stale read within a few seeds.
func TestSimulateFailsWithoutInvalidation(t *testing.T) {
	mustFail(t, func(c *Config) { c.DisableInvalidation = true })
}

// An instance without a cache whose writes invalidate nobody (a server
// that takes no part in coherence) leaves the others' caches stale.
func TestSimulateFailsWithoutUncachedInvalidation(t *testing.T) {
	mustFail(t, func(c *Config) { c.DisableUncachedInvalidation = true })
}

func TestSimulateFailsWithoutFillCheck(t *testing.T) {
	mustFail(t, func(c *Config) { c.DisableFillCheck = true })
}

// Without fencing a holder releases a writer's holds when the writer
// leaves the membership, and a commit the writer had sent before its
// partition lands later. Such a stale entry lives until the next write to
// its row, so the run has fewer writes (10%, the mix of TestSimulate's
// even seeds), which leaves it time to be read.
func TestSimulateFailsWithoutFencing(t *testing.T) {
	mustFail(t, func(c *Config) { c.DisableFencing = true; c.WritesPerMille = 100 })
}

// mustFail runs up to 12 seeds of 20,000 operations with knob applied and
// fails unless one of them has a violation.
func mustFail(t *testing.T, knob func(*Config)) {
	t.Helper()
	const maxSeeds = 12
	for seed := uint64(1); seed <= maxSeeds; seed++ {
		cfg := DefaultConfig(seed)
		knob(&cfg)
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if v := Check(res); v != nil {
			t.Logf("found at seed %d:\n%s", seed, v)
			return
		}
	}
	t.Fatalf("no violation in %d seeds: the checker cannot see this part of the protocol", maxSeeds)
}

// TestSimulateThousandInstances: the protocol with a thousand simulated
// instances in a hundred deployments (without -race), every fault on, one
// seed: the history checks. NIMBUS_SIM_SEED replays another seed.
func TestSimulateThousandInstances(t *testing.T) {
	seed := uint64(1)
	if ss := seeds(t, 1); len(ss) == 1 {
		seed = ss[0]
	}
	cfg := DefaultConfig(seed)
	cfg.Instances, cfg.Deployments, cfg.Ops, cfg.Clients = largeInstances, largeDeployments, largeOps, 16
	cfg.Dirs, cfg.Files = 20, 10
	start := time.Now()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v := Check(res); v != nil {
		t.Fatalf("%s\nreplay: NIMBUS_SIM_SEED=%d go test -count=1 -run 'TestSimulateThousandInstances$' ./coherence/sim", v, seed)
	}
	st := res.Stats
	t.Logf("%d instances in %d deployments: %d operations (%d writes, %d reads, %d from the cache), %d messages (%.0f per write), %d partitions, %d crashes, in %v",
		cfg.Instances, cfg.Deployments, st.Ops, st.Writes, st.Reads, st.CacheHits, st.Messages, float64(st.Messages)/float64(max(st.Writes, 1)),
		st.Partitions, st.Crashes, time.Since(start).Round(time.Millisecond))
	if st.Ops != cfg.Ops || st.Writes == 0 || st.Fills == 0 {
		t.Errorf("the run did not do what it was asked: %+v", st)
	}
}
