//go:build race

package sim

// Under -race (CI's `go test -race ./...`) TestSimulate scales itself down
// about 25 times; a CI step of its own runs the full million without -race
// (scripts/test.sh, stage go).
const simSeeds, simOps = 4, 10000

// crossOps is the length of each history TestCheckerAgreesWithPorcupine
// checks both ways.
const crossOps = 500

// TestSimulateThousandInstances's size under -race: a tenth.
const largeInstances, largeDeployments, largeOps = 100, 10, 200
