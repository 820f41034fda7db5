package main

import (
	"math"
	"testing"
)

// TestMemoryLimit: the flag wins, then GOMEMLIMIT (left to the runtime),
// then the default, which grows with the block cache and the memtables.
func TestMemoryLimit(t *testing.T) {
	const mb = 1 << 20
	cases := []struct {
		name     string
		flagMB   int64
		envSet   bool
		cache    int64
		memtable uint64
		want     int64
	}{
		{"default", -1, false, 256 * mb, 64 * mb, (2048 + 256 + 128) * mb},
		{"default grows with the caches", -1, false, 1024 * mb, 256 * mb, (2048 + 1024 + 512) * mb},
		{"GOMEMLIMIT set: left alone", -1, true, 256 * mb, 64 * mb, -1},
		{"flag over GOMEMLIMIT", 900, true, 256 * mb, 64 * mb, 900 * mb},
		{"flag", 900, false, 256 * mb, 64 * mb, 900 * mb},
		{"0: no limit", 0, false, 256 * mb, 64 * mb, math.MaxInt64},
	}
	for _, c := range cases {
		if got := memoryLimit(c.flagMB, c.envSet, c.cache, c.memtable); got != c.want {
			t.Errorf("%s: memoryLimit(%d, %v, %d, %d) = %d, want %d", c.name, c.flagMB, c.envSet, c.cache, c.memtable, got, c.want)
		}
	}
}
