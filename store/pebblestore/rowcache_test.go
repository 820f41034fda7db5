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
