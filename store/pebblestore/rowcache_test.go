package pebblestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/internal/cost"
	"github.com/nimbus-fs/nimbus/store"
)

// TestRowCacheNeverStale: a writer commits increasing values of one row while
// readers read it without locks. A read that starts after a Commit returned
// must see that value or a later one, and each reader's values never go
// backwards — whatever the row cache does.
func TestRowCacheNeverStale(t *testing.T) {
	st, err := Open(t.TempDir(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	key := store.InodeKey(1, "hot")
	var committed atomic.Uint64
	write := func(v uint64) {
		txn, err := st.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
			t.Error(err)
			return
		}
		txn.Put(key, binary.BigEndian.AppendUint64(nil, v))
		if err := txn.Commit(ctx); err != nil {
			t.Error(err)
		}
		committed.Store(v)
	}
	write(0)
	const writes = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				floor := committed.Load()
				txn, _ := st.Begin(ctx)
				vals, err := txn.Read(ctx, []store.ReadReq{{Key: key}, {Key: store.InodeKey(1, "other")}})
				txn.Rollback()
				if err != nil {
					t.Error(err)
					return
				}
				v := binary.BigEndian.Uint64(vals[0])
				if v < floor || v < last {
					t.Errorf("stale read: %d after a commit of %d (previous read %d)", v, floor, last)
					return
				}
				last = v
			}
		}()
	}
	for v := uint64(1); v <= writes; v++ {
		write(v)
	}
	close(done)
	wg.Wait()
	if st.metricsRowCacheHits() == 0 {
		t.Fatal("the row cache was never hit: the test did not exercise it")
	}
}

// TestRowCacheWriteThrough: a row written under an exclusive lock is in the
// cache after the commit (the next read does not go to Pebble) with its new
// value; a row written without one, or deleted blind, is only dropped.
func TestRowCacheWriteThrough(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	locked, blind := store.InodeKey(1, "locked"), store.InodeKey(1, "blind")
	commit := func(lock bool, key []byte, v []byte) {
		txn, _ := st.Begin(bg)
		if lock {
			if _, err := txn.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
				t.Fatal(err)
			}
		}
		if v == nil {
			txn.Delete(key)
		} else {
			txn.Put(key, v)
		}
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	read := func(key []byte) (val []byte, missed bool) {
		before := st.metricsRowCacheMisses()
		txn, _ := st.Begin(bg)
		defer txn.Rollback()
		vals, err := txn.Read(bg, []store.ReadReq{{Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		return vals[0], st.metricsRowCacheMisses() > before
	}
	for i, step := range []struct {
		lock     bool
		key, val []byte
		miss     bool
	}{
		{true, locked, []byte("v1"), false},
		{true, locked, []byte("v2"), false},
		{true, locked, nil, false}, // a locked delete caches the absence
		{false, blind, []byte("b1"), true},
		{false, blind, []byte("b2"), true},
	} {
		commit(step.lock, step.key, step.val)
		v, missed := read(step.key)
		if string(v) != string(step.val) || (v == nil) != (step.val == nil) {
			t.Fatalf("step %d: read %q after committing %q", i, v, step.val)
		}
		if missed != step.miss {
			t.Fatalf("step %d: the read after the commit missed the cache: %v, want %v", i, missed, step.miss)
		}
	}
}

// BenchmarkRowCacheGet1M reads random rows of a full cache of a million
// inode rows (a depth-7 namespace's worth), from GOMAXPROCS goroutines: the
// probe every path component of every operation pays, and on a cache this
// size a miss of the CPU's caches more often than not.
func BenchmarkRowCacheGet1M(b *testing.B) {
	const n = 1 << 20
	c := newRowCache(2 * n) // room to spare: shards fill unevenly
	keys := make([][]byte, n)
	val := make([]byte, 90) // about an encoded inode
	for i := range keys {
		keys[i] = store.InodeKey(uint64(i/16+2), fmt.Sprintf("part-%05d-3f2a9c1e-77b4-4d0e", i%16))
		_, _, gen := c.get(keys[i])
		c.fill(keys[i], val, gen)
	}
	// What a full collection costs with the cache full: the collector
	// follows every pointer the cache holds.
	gcMS := float64(cost.FullGC().Microseconds()) / 1000
	defer func() { b.ReportMetric(gcMS, "gc-ms") }() // after ResetTimer, which drops metrics
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 0))
		for pb.Next() {
			if row, hit, _ := c.get(keys[r.IntN(n)]); !hit || len(row.v) != len(val) {
				b.Fatal("miss in a full cache")
			}
		}
	})
}
