package main

import (
	"math"
	"runtime"
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

// TestSpareProcessor: a server whose default is one P runs with two, unless
// GOMAXPROCS was set; a default of two or more is left alone.
func TestSpareProcessor(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(def)
	for _, c := range []struct {
		start   int
		userSet bool
		want    int
	}{{1, false, 2}, {1, true, 1}, {2, false, 2}, {3, false, 3}, {2, true, 2}} {
		runtime.GOMAXPROCS(c.start)
		if got := spareProcessor(c.userSet); got != c.want || runtime.GOMAXPROCS(0) != c.want {
			t.Fatalf("from %d (set by the user: %v): returned %d, in force %d, want %d",
				c.start, c.userSet, got, runtime.GOMAXPROCS(0), c.want)
		}
	}
}
