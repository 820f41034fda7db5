package gctune

import (
	"math"
	"runtime/debug"
	"sync"
	"testing"
)

// TestHoldHeap: a hold lowers the memory limit to about what the runtime
// holds plus the margin, nested holds keep it, the last release restores
// it; a lower limit already in force is left alone; concurrent holds leave
// the limit as it was.
func TestHoldHeap(t *testing.T) {
	orig := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(orig)

	r1 := HoldHeap(64 << 20)
	held := debug.SetMemoryLimit(-1)
	if held == math.MaxInt64 || held < 64<<20 {
		t.Fatalf("limit under a hold = %d, want the runtime's memory + 64 MiB", held)
	}
	r2 := HoldHeap(1 << 30) // nested: the first hold's limit stays
	if got := debug.SetMemoryLimit(-1); got != held {
		t.Fatalf("limit under a nested hold = %d, want %d", got, held)
	}
	r1()
	r1() // a second call does nothing
	if got := debug.SetMemoryLimit(-1); got != held {
		t.Fatalf("limit after one of two releases = %d, want %d", got, held)
	}
	r2()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after the last release = %d, want none", got)
	}

	debug.SetMemoryLimit(1 << 20) // lower than any hold would set
	r := HoldHeap(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != 1<<20 {
		t.Fatalf("a hold changed a lower limit to %d", got)
	}
	r()
	if got := debug.SetMemoryLimit(-1); got != 1<<20 {
		t.Fatalf("releasing a hold that lowered nothing set the limit to %d", got)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				HoldHeap(32 << 20)()
			}
		}()
	}
	wg.Wait()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit after concurrent holds = %d, want none", got)
	}
	HoldHeap(0)() // no margin: no hold
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("a hold of margin 0 set the limit to %d", got)
	}
}
