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

// TestSpareProcessor: unless GOMAXPROCS was set, the server runs with one P
// more than the runtime's default; when it was, nothing changes.
func TestSpareProcessor(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(def)
	if got := spareProcessor(false); got != def+1 || runtime.GOMAXPROCS(0) != def+1 {
		t.Fatalf("not set: returned %d, in force %d, want %d", got, runtime.GOMAXPROCS(0), def+1)
	}
	runtime.GOMAXPROCS(def)
	if got := spareProcessor(true); got != def || runtime.GOMAXPROCS(0) != def {
		t.Fatalf("set by the user: returned %d, in force %d, want %d", got, runtime.GOMAXPROCS(0), def)
	}
}
