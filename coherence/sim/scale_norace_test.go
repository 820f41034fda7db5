//go:build !race

package sim

// Without -race TestSimulate runs the full volume: 50 seeds of 20,000
// client operations, a million in all (docs/ELASTIC.md has its time).
const simSeeds, simOps = 50, 20000

// crossOps is the length of each history TestCheckerAgreesWithPorcupine
// checks both ways.
const crossOps = 1500

// TestSimulateThousandInstances's size without -race.
const largeInstances, largeDeployments, largeOps = 1000, 100, 300
