package pebblestore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/nimbus-fs/nimbus/store"
)

// fatalf is what the helpers need of *testing.T and *rapid.T.
type fatalf interface {
	Helper()
	Fatal(args ...any)
}

// scanAll returns the keys and values of Scan(start, end, limit), copied.
func scanAll(t fatalf, st *Store, start, end []byte, limit int) (keys, vals []string) {
	t.Helper()
	txn, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback()
	err = txn.Scan(bg, start, end, limit, func(k, v []byte) bool {
		keys, vals = append(keys, string(k)), append(vals, string(v))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, vals
}

func commitRows(t fatalf, st *Store, puts map[string]string, dels []string) {
	t.Helper()
	txn, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range puts {
		txn.Put([]byte(k), []byte(v))
	}
	for _, k := range dels {
		txn.Delete([]byte(k))
	}
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
}

// TestScanCacheHitsAndInvalidation: a scan of a whole directory fills the
// cache, the next scans of any range inside it (a later page, a limit) are
// hits and return what Pebble returns, and a commit of a row of the
// directory is seen by the very next scan.
func TestScanCacheHitsAndInvalidation(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	rows := map[string]string{}
	for i := 0; i < 20; i++ {
		rows[string(store.InodeKey(7, fmt.Sprintf("f%02d", i)))] = fmt.Sprintf("v%d", i)
	}
	rows[string(store.InodeKey(6, "before"))] = "x" // neighbours outside the partition
	rows[string(store.InodeKey(8, "after"))] = "y"
	commitRows(t, st, rows, nil)

	hits := func() float64 { return counterValue(st.metrics.scanCacheHits) }
	whole := func() ([]string, []string) {
		start, end := store.ChildrenRange(7, "")
		return scanAll(t, st, start, end, 0)
	}
	k1, v1 := whole() // a miss that fills
	if len(k1) != 20 || v1[0] != "v0" {
		t.Fatalf("first scan: %d rows %v", len(k1), v1)
	}
	h := hits()
	k2, v2 := whole()
	if hits() != h+1 {
		t.Fatalf("second scan of the directory was not a cache hit")
	}
	if !slices.Equal(k1, k2) || !slices.Equal(v1, v2) {
		t.Fatalf("cached scan differs: %v / %v", k2, v2)
	}
	// A later page, with a limit, from the cache.
	start, end := store.ChildrenRange(7, "f09")
	k3, _ := scanAll(t, st, start, end, 3)
	want := []string{string(store.InodeKey(7, "f10")), string(store.InodeKey(7, "f11")), string(store.InodeKey(7, "f12"))}
	if !slices.Equal(k3, want) || hits() != h+2 {
		t.Fatalf("page after f09: %q (hits %v, want %v)", k3, hits(), h+2)
	}
	// A commit in the directory is seen at once; one outside it leaves the
	// cached partition alone.
	commitRows(t, st, map[string]string{string(store.InodeKey(7, "new")): "n"}, []string{string(store.InodeKey(7, "f00"))})
	k4, _ := whole()
	if len(k4) != 20 || k4[0] != string(store.InodeKey(7, "f01")) || k4[19] != string(store.InodeKey(7, "new")) {
		t.Fatalf("after the commit: %q", k4)
	}
	if hits() != h+2 {
		t.Fatal("the scan after a commit in the directory was answered from the cache")
	}
	whole() // cached again
	commitRows(t, st, map[string]string{string(store.InodeKey(9, "elsewhere")): "e"}, nil)
	h = hits()
	whole()
	if hits() != h+1 {
		t.Fatal("a commit in another directory dropped this one from the cache")
	}
	// A range that leaves the partition is never served from it.
	k5, _ := scanAll(t, st, store.InodeKey(7, ""), store.InodeKey(8, "b"), 0)
	if len(k5) != 21 || k5[20] != string(store.InodeKey(8, "after")) {
		t.Fatalf("scan across two directories: %q", k5)
	}
}

// TestScanCacheSkipsBigPartitions: a directory with more rows than the cache
// takes is always scanned from Pebble.
func TestScanCacheSkipsBigPartitions(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	st.scans.maxRows = 10
	rows := map[string]string{}
	for i := 0; i < 11; i++ {
		rows[string(store.InodeKey(7, fmt.Sprintf("f%02d", i)))] = "v"
	}
	commitRows(t, st, rows, nil)
	start, end := store.ChildrenRange(7, "")
	for i := 0; i < 3; i++ {
		if k, _ := scanAll(t, st, start, end, 0); len(k) != 11 {
			t.Fatalf("scan %d: %d rows", i, len(k))
		}
	}
	if h := counterValue(st.metrics.scanCacheHits); h != 0 {
		t.Fatalf("%v hits on a partition over the limit", h)
	}
}

// TestScanCacheBoundsEmptyPartitions: scans of empty partitions (the
// blocks of files that have none, directories without entries) are cached,
// but each costs its share of the budget, so that a stream of them cannot
// grow the cache past its bound.
func TestScanCacheBoundsEmptyPartitions(t *testing.T) {
	opts := DefaultOptions()
	opts.ScanCacheBytes = 64 * 100 * partitionOverhead // room for about 100 per shard
	st := openTest(t, t.TempDir(), opts)
	for id := uint64(1); id <= 20000; id++ {
		start, end := store.BlocksRange(id)
		if k, _ := scanAll(t, st, start, end, 0); len(k) != 0 {
			t.Fatalf("blocks of %d: %q", id, k)
		}
	}
	cached, bytes := 0, int64(0)
	for i := range st.scans.shards {
		s := &st.scans.shards[i]
		cached += s.t.Len()
		bytes += s.used
		if s.used > st.scans.shardBytes {
			t.Fatalf("shard %d holds %d bytes, over its budget of %d", i, s.used, st.scans.shardBytes)
		}
	}
	if cached == 0 || cached > 64*100 || bytes != int64(cached)*partitionOverhead {
		t.Fatalf("%d empty partitions cached in %d bytes, want 1..%d at %d bytes each", cached, bytes, 64*100, partitionOverhead)
	}
	// The latest is cached and answers the next scan.
	h := counterValue(st.metrics.scanCacheHits)
	start, end := store.BlocksRange(20000)
	scanAll(t, st, start, end, 0)
	if counterValue(st.metrics.scanCacheHits) != h+1 {
		t.Fatal("the last empty partition scanned was not cached")
	}
}

// TestScanCacheNeverStale: writers add rows to one directory while readers
// list it. A listing that starts after a Commit returned holds that row, and
// a reader's listings never shrink (rows are only added), whatever the cache
// does under the race.
func TestScanCacheNeverStale(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	ctx := context.Background()
	var committed atomic.Int64
	start, end := store.ChildrenRange(3, "")
	const writes = 300
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				floor := int(committed.Load())
				txn, _ := st.Begin(ctx)
				n := 0
				err := txn.Scan(ctx, start, end, 0, func(k, v []byte) bool { n++; return true })
				txn.Rollback()
				if err != nil {
					t.Error(err)
					return
				}
				if n < floor || n < last {
					t.Errorf("stale listing: %d rows after %d commits (previous listing %d)", n, floor, last)
					return
				}
				last = n
			}
		}()
	}
	for i := 1; i <= writes; i++ {
		commitRows(t, st, map[string]string{string(store.InodeKey(3, fmt.Sprintf("f%04d", i))): "v"}, nil)
		committed.Store(int64(i))
	}
	close(done)
	wg.Wait()
	if counterValue(st.metrics.scanCacheHits) == 0 {
		t.Fatal("the scan cache was never hit: the test did not exercise it")
	}
}

// TestScanCacheModel: random commits and scans over a few directories, on a
// store with the cache and one without, must return the same rows.
func TestScanCacheModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		noCache := DefaultOptions()
		noCache.ScanCacheBytes = 0
		small := DefaultOptions()
		small.ScanCacheBytes = 64 * 1024 // evictions happen
		dir := t.TempDir()
		a, err := Open(dir+"/a", small)
		if err != nil {
			rt.Fatal(err)
		}
		defer a.Close()
		b, err := Open(dir+"/b", noCache)
		if err != nil {
			rt.Fatal(err)
		}
		defer b.Close()
		key := func(rt *rapid.T) string {
			p := rapid.Uint64Range(1, 4).Draw(rt, "dir")
			return string(store.InodeKey(p, rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f"}).Draw(rt, "name")))
		}
		for step := rapid.IntRange(1, 40).Draw(rt, "steps"); step > 0; step-- {
			if rapid.Bool().Draw(rt, "write") {
				puts := map[string]string{}
				var dels []string
				for n := rapid.IntRange(1, 3).Draw(rt, "rows"); n > 0; n-- {
					k := key(rt)
					if rapid.Bool().Draw(rt, "del") {
						dels = append(dels, k)
						delete(puts, k)
					} else {
						puts[k] = rapid.StringMatching(`[a-z]{0,8}`).Draw(rt, "val")
					}
				}
				commitRows(rt, a, puts, dels)
				commitRows(rt, b, puts, dels)
				continue
			}
			d := rapid.Uint64Range(1, 4).Draw(rt, "scandir")
			after := rapid.SampledFrom([]string{"", "a", "c", "e"}).Draw(rt, "after")
			limit := rapid.IntRange(0, 4).Draw(rt, "limit")
			start, end := store.ChildrenRange(d, after)
			ka, va := scanAll(rt, a, start, end, limit)
			kb, vb := scanAll(rt, b, start, end, limit)
			if !slices.Equal(ka, kb) || !slices.Equal(va, vb) {
				rt.Fatalf("scan of %d after %q limit %d: cached %q=%q, Pebble %q=%q", d, after, limit, ka, va, kb, vb)
			}
		}
	})
}
