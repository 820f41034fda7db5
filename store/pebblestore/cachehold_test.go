package pebblestore

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/store"
)

func gaugeValue(g interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}

// TestHoldCachesKeepsBlockCache: while a hold is taken, reading a table
// that the block cache does not hold grows the cache by at most the
// margin; once every hold (two, nested) is released, the same reads fill
// it. The rows are read through Pebble (no row or scan cache).
func TestHoldCachesKeepsBlockCache(t *testing.T) {
	opts := DefaultOptions()
	opts.RowCacheEntries, opts.ScanCacheBytes = 0, 0
	opts.CacheSize, opts.CacheHoldMargin = 64<<20, 1<<20
	opts.MemTableSize = 4 << 20 // reserved in the cache by Pebble
	st := openTest(t, t.TempDir(), opts)
	// A block (4 KB) may be admitted before an eviction makes room for it,
	// in each shard of the cache (4 per CPU).
	slack := int64(4*runtime.NumCPU()) * 32 << 10
	// Rows of ~120 bytes, three times what the hold lets in.
	rows := max(60000, int(3*(opts.CacheHoldMargin+slack)/120))
	puts := map[string]string{}
	val := strings.Repeat("v", 100)
	for i := range rows {
		puts[string(store.InodeKey(7, fmt.Sprintf("f%07d", i)))] = val
	}
	commitRows(t, st, puts, nil)
	if err := st.db.Flush(); err != nil {
		t.Fatal(err)
	}
	start, end := store.ChildrenRange(7, "")
	before := st.cache.Size()
	r1 := st.HoldCaches()
	r2 := st.HoldCaches()
	if held := gaugeValue(st.metrics.cacheHeld); held <= 0 {
		t.Fatalf("block_cache_held_bytes = %v under a hold, want > 0", held)
	}
	keys, _ := scanAll(t, st, start, end, 0)
	if len(keys) != len(puts) {
		t.Fatalf("scanned %d rows, want %d", len(keys), len(puts))
	}
	r1()
	r1() // a second call of one release does nothing
	scanAll(t, st, start, end, 0)
	if got := st.cache.Size(); got > before+opts.CacheHoldMargin+slack {
		t.Fatalf("block cache grew from %d to %d bytes under a hold (margin %d)", before, got, opts.CacheHoldMargin)
	}
	r2()
	if held := gaugeValue(st.metrics.cacheHeld); held != 0 {
		t.Fatalf("block_cache_held_bytes = %v after the last release, want 0", held)
	}
	scanAll(t, st, start, end, 0)
	if got := st.cache.Size(); got <= before+opts.CacheHoldMargin+slack {
		t.Fatalf("block cache at %d bytes after the holds were released, want the table's blocks in it (over %d)",
			got, before+opts.CacheHoldMargin+slack)
	}
}

// TestHoldCachesConcurrent: holds taken and released by goroutines that
// read meanwhile leave no hold behind; a hold on a closed store does
// nothing.
func TestHoldCachesConcurrent(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	commitRows(t, st, map[string]string{string(store.InodeKey(7, "a")): "v"}, nil)
	start, end := store.ChildrenRange(7, "")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				release := st.HoldCaches()
				scanAll(t, st, start, end, 0)
				release()
			}
		}()
	}
	wg.Wait()
	st.hold.mu.Lock()
	n, reserved := st.hold.n, st.hold.release != nil
	st.hold.mu.Unlock()
	if n != 0 || reserved {
		t.Fatalf("after every release: %d holds, reservation kept %v", n, reserved)
	}
	release := st.HoldCaches()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	release() // after Close: nothing to give back
	st.HoldCaches()()
}
