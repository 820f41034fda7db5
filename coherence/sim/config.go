package sim

import (
	"fmt"
	"time"
)

// Config sets up one simulated run. Every choice the run makes comes from
// Seed: two runs of one Config are the same run.
type Config struct {
	Seed        uint64
	Instances   int // NameNode instances (slots: an instance restarts into its slot)
	Deployments int // instance i serves deployment i mod Deployments
	// Uncached is how many instances (the first ones) have no cache: they
	// read every row from the store and say so in the membership
	// (coherence.Member.NoCache), and write like the others.
	Uncached int
	Clients  int
	Ops      int // client operations to issue

	Dirs, Files int // the namespace: Dirs directories under "/", Files files in each

	// WritesPerMille is the share of writes among client operations (the
	// default mix: 400, of which 280 file writes, 100 chmods of a
	// directory, 20 chmod -R).
	WritesPerMille int

	// Faults switches message loss, duplication and long delays, partitions
	// and crashes on; off, the network only delays and reorders.
	Faults bool

	TTL   time.Duration // coordinator lease
	Drift float64       // bound on each instance's clock rate error (0.01: 1%)

	// The knobs of the negative tests (package coherence, cache).
	DisableInvalidation bool
	DisableFillCheck    bool
	DisableFencing      bool
	// DisableUncachedInvalidation: the Uncached instances' writes send no
	// INV (as if they took no part in coherence).
	DisableUncachedInvalidation bool

	// Trace, if set, receives a line per protocol step (for replaying a
	// failure; slow).
	Trace func(string)
}

// DefaultConfig returns the configuration TestSimulate runs per seed:
// 5 instances in 2 deployments, one of them without a cache, 8 clients,
// 15 rows, every fault on.
func DefaultConfig(seed uint64) Config {
	return Config{
		Seed: seed, Instances: 5, Deployments: 2, Uncached: 1, Clients: 8, Ops: 20000,
		Dirs: 3, Files: 4, WritesPerMille: 400, Faults: true,
		TTL: 500 * time.Millisecond, Drift: 0.01,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Instances < 1 || c.Deployments < 1 || c.Deployments > c.Instances:
		return fmt.Errorf("sim: %d instances in %d deployments", c.Instances, c.Deployments)
	case c.Uncached < 0 || c.Uncached > c.Instances:
		return fmt.Errorf("sim: %d uncached of %d instances", c.Uncached, c.Instances)
	case c.Clients < 1 || c.Ops < 0:
		return fmt.Errorf("sim: %d clients, %d ops", c.Clients, c.Ops)
	case c.WritesPerMille < 0 || c.WritesPerMille > 1000:
		return fmt.Errorf("sim: %d writes per mille", c.WritesPerMille)
	case c.Dirs < 1 || c.Files < 1:
		return fmt.Errorf("sim: %d dirs of %d files", c.Dirs, c.Files)
	case c.TTL < 100*time.Millisecond:
		return fmt.Errorf("sim: TTL %v under 100ms", c.TTL)
	case c.Drift < 0 || c.Drift >= 0.1:
		return fmt.Errorf("sim: drift %v not in [0, 0.1)", c.Drift)
	}
	return nil
}
