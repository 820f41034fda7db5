package pebblestore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// roundKey is row i of round r in directory 5; roundRange covers round r.
func roundKey(r int64, i int) []byte { return store.InodeKey(5, fmt.Sprintf("r%05d-%02d", r, i)) }

func roundRange(r int64) (start, end []byte) {
	return store.InodeKey(5, fmt.Sprintf("r%05d", r)), store.InodeKey(5, fmt.Sprintf("r%05d", r+1))
}

// TestDeleteRangeDropsCachedRows: rows read into the row cache and a
// directory listed into the scan cache are gone from both once a
// DeleteRange over them committed, whether or not the deleting transaction
// locked them; rows outside the range stay, and are still served.
func TestDeleteRangeDropsCachedRows(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	puts := map[string]string{}
	for i := range 40 {
		puts[string(store.InodeKey(3, fmt.Sprintf("f%02d", i)))] = "v"
		puts[string(store.InodeKey(4, fmt.Sprintf("f%02d", i)))] = "w"
	}
	commitRows(t, st, puts, nil)
	keys := func(dir uint64) []store.ReadReq {
		var reqs []store.ReadReq
		for i := range 40 {
			reqs = append(reqs, store.ReadReq{Key: store.InodeKey(dir, fmt.Sprintf("f%02d", i))})
		}
		return reqs
	}
	readAll := func(reqs []store.ReadReq) [][]byte {
		txn, _ := st.Begin(bg)
		defer txn.Rollback()
		vals, err := txn.Read(bg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}
	s3, e3 := store.ChildrenRange(3, "")
	s4, e4 := store.ChildrenRange(4, "")
	for range 2 { // the second round is served from the caches
		readAll(keys(3))
		scanAll(t, st, s3, e3, 0)
		scanAll(t, st, s4, e4, 0)
	}
	hits, scanHits := counterValue(st.metrics.rowCacheHits), counterValue(st.metrics.scanCacheHits)
	if hits < 40 || scanHits < 2 {
		t.Fatalf("the caches were not filled: %v row hits, %v scan hits", hits, scanHits)
	}

	// f00..f19 go, under an exclusive lock on some of them (those the
	// commit may install as absent) and not on the others.
	txn, _ := st.Begin(bg)
	if _, err := txn.Read(bg, []store.ReadReq{{Key: store.InodeKey(3, "f05"), Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	if err := txn.(store.RangeDeleter).DeleteRange(bg, s3, store.InodeKey(3, "f20")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	for i, v := range readAll(keys(3)) {
		if (i < 20) != (v == nil) {
			t.Fatalf("row f%02d after the range delete: %q", i, v)
		}
	}
	if k, _ := scanAll(t, st, s3, e3, 0); len(k) != 20 || k[0] != string(store.InodeKey(3, "f20")) {
		t.Fatalf("listing after the range delete: %d rows from %q", len(k), k)
	}
	scanHits = counterValue(st.metrics.scanCacheHits)
	if k, _ := scanAll(t, st, s4, e4, 0); len(k) != 40 {
		t.Fatalf("the other directory lost rows: %d", len(k))
	}
	if counterValue(st.metrics.scanCacheHits) != scanHits+1 {
		t.Fatal("the other directory's cached listing was dropped by a range outside it")
	}
	// A range over two partitions is listed from Pebble, not the scan
	// cache: f30.. of directory 3 and ..f09 of directory 4, both cached.
	readAll(keys(4))
	txn, _ = st.Begin(bg)
	if err := txn.(store.RangeDeleter).DeleteRange(bg, store.InodeKey(3, "f30"), store.InodeKey(4, "f10")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if k, _ := scanAll(t, st, s3, e3, 0); len(k) != 10 {
		t.Fatalf("directory 3 after the second range delete: %d rows", len(k))
	}
	if k, _ := scanAll(t, st, s4, e4, 0); len(k) != 30 || k[0] != string(store.InodeKey(4, "f10")) {
		t.Fatalf("directory 4 after the second range delete: %d rows from %q", len(k), k)
	}
	for i, v := range readAll(keys(4)) {
		if (i < 10) != (v == nil) {
			t.Fatalf("row f%02d of directory 4 after the range delete: %q", i, v)
		}
	}
	if counterValue(st.metrics.rangeDeletes) != 2 {
		t.Fatal("range_deletes_total not counted")
	}
}

// TestDeleteRangeNeverStale: a writer commits a round of rows in one
// directory, lets readers read and list them (filling the caches), then
// deletes the round with one DeleteRange, and again. A read or listing that
// starts after that Commit returned must see none of the round's rows,
// whatever the readers installed in the caches meanwhile (run with -race).
func TestDeleteRangeNeverStale(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	ctx := context.Background()
	var created, deleted atomic.Int64
	dirStart, dirEnd := store.ChildrenRange(5, "")
	const rounds, rows = 100, 32
	var wg sync.WaitGroup
	done := make(chan struct{})
	var reads atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				gone, live := deleted.Load(), created.Load()
				txn, _ := st.Begin(ctx)
				reqs := []store.ReadReq{{Key: roundKey(gone, n%rows)}, {Key: roundKey(live, n%rows)}}
				vals, err := txn.Read(ctx, reqs)
				if err == nil {
					err = txn.Scan(ctx, dirStart, dirEnd, 0, func(k, _ []byte) bool {
						var r int64
						var i int
						_, name, _ := store.DecodeInodeKey(k)
						fmt.Sscanf(name, "r%05d-%02d", &r, &i)
						if r <= gone {
							t.Errorf("listing after the delete of round %d holds %s", gone, name)
						}
						return true
					})
				}
				txn.Rollback()
				if err != nil {
					t.Error(err)
					return
				}
				if gone > 0 && vals[0] != nil {
					t.Errorf("row %d of round %d read after its range was deleted", n%rows, gone)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for r := int64(1); r <= rounds && !t.Failed(); r++ {
		puts := map[string]string{}
		for i := range rows {
			puts[string(roundKey(r, i))] = "v"
		}
		commitRows(t, st, puts, nil)
		created.Store(r)
		// Let the readers fill the caches with the round.
		for before := reads.Load(); reads.Load() < before+4 && !t.Failed(); {
			runtime.Gosched()
		}
		txn, _ := st.Begin(ctx)
		if _, err := txn.Read(ctx, []store.ReadReq{{Key: store.InodeKey(1, "dir5"), Mode: store.Exclusive}}); err != nil {
			t.Fatal(err)
		}
		start, end := roundRange(r)
		if err := txn.(store.RangeDeleter).DeleteRange(ctx, start, end); err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		deleted.Store(r)
	}
	close(done)
	wg.Wait()
	if counterValue(st.metrics.rowCacheHits) == 0 || counterValue(st.metrics.scanCacheHits) == 0 {
		t.Fatal("the caches were never hit: the test did not exercise them")
	}
}
