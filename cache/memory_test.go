//go:build !race

package cache

import (
	"fmt"
	"runtime"
	"testing"
)

// fillMillion caches "/" and 1,000 directories of 999 files: 1,000,000
// entries with names of 8 (dirs) and 11 (files) bytes, two owners.
func fillMillion(tb testing.TB, c *Cache) {
	tb.Helper()
	if !c.Put(c.Begin(), root()) {
		tb.Fatal("root")
	}
	id := uint64(2)
	name := make([]byte, 0, 16)
	for d := range 1000 {
		did := id
		id++
		name = fmt.Appendf(name[:0], "dir-%04d", d)
		if !c.Put(c.Begin(), dir(1, did, string(name))) {
			tb.Fatal("dir")
		}
		rows := make([]Inode, 0, 999)
		for f := range 999 {
			n := file(did, id, fmt.Sprintf("file-%06d", f))
			if f%2 == 0 {
				n.Owner = "bob"
			}
			rows = append(rows, n)
			id++
		}
		for _, r := range rows {
			if !c.Put(c.Begin(), r) {
				tb.Fatal("file")
			}
		}
	}
}

func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryPerEntry measures the heap a million cached inodes take: the
// target is 300 bytes per inode and its name. The names here are
// 8-11 bytes, so 300 bytes of budget per entry leave room for the name.
func TestMemoryPerEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a million entries")
	}
	cfg := DefaultConfig()
	cfg.MaxBytes = 1 << 40
	before := heap()
	c := newCache(t, cfg)
	fillMillion(t, c)
	after := heap()
	st := c.Stats()
	if st.Entries != 1_000_001 {
		t.Fatalf("%d entries", st.Entries)
	}
	per := float64(after-before) / float64(st.Entries)
	counted := float64(st.Bytes) / float64(st.Entries)
	t.Logf("%d entries: heap %.1f MB, %.1f bytes per entry (counted against the budget: %.1f)",
		st.Entries, float64(after-before)/1e6, per, counted)
	if per > 300 {
		t.Errorf("%.1f bytes per entry, over the issue's 300", per)
	}
	if per > counted {
		t.Errorf("the heap (%.1f per entry) exceeds what the budget counts (%.1f): EntryOverhead is too low", per, counted)
	}
	runtime.KeepAlive(c)
}
