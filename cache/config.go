package cache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Cache.
type Config struct {
	// MaxBytes bounds what the cache holds, counted as EntryOverhead per
	// resolution entry plus its name, symlink target and ACL, and
	// PageOverhead per listing page plus its cursor and bytes. The heap the
	// cache really takes stays within this count (TestMemoryPerEntry).
	MaxBytes int64

	// Registerer receives the metrics (namespace nimbus, subsystem cache);
	// nil keeps them unregistered.
	Registerer prometheus.Registerer

	// DisableFillCheck switches the fill-race rule off (fill.go): every fill
	// installs, however old its read. For tests only: it exists so that the
	// tests that must catch a stale fill can show that they do.
	DisableFillCheck bool

	// HashSeed, when non-zero, makes key hashes a fixed function of it
	// instead of a random per-cache seed, so that which keys share a slot of
	// the invalidation table (and so which fills are refused needlessly) is
	// the same in every run: a seeded simulation (coherence/sim) replays
	// exactly. Zero, the default, keeps the random seed, which denies an
	// adversary names chosen to collide.
	HashSeed uint64
}

// DefaultConfig returns a Config with a 256 MiB budget: about 1.4 million
// cached inodes with names of ordinary length.
func DefaultConfig() Config {
	return Config{MaxBytes: 256 << 20}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	if c.MaxBytes < EntryOverhead {
		return errors.New("cache: MaxBytes is below one entry's overhead")
	}
	return nil
}
