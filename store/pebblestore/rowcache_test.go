package pebblestore

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

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
