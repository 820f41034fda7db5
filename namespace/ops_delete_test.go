package namespace

import (
	"context"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// rangeStore wraps a store whose transactions have store.RangeDeleter:
// with ranges false its transactions hide it (a store deleting row by
// row), otherwise they count the ranges deleted.
type rangeStore struct {
	store.Store
	ranges bool
	count  atomic.Int64
}

func (s *rangeStore) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil || !s.ranges {
		return struct{ store.Txn }{txn}, err
	}
	return &rangeTxn{txn, s}, nil
}

type rangeTxn struct {
	store.Txn
	s *rangeStore
}

func (t *rangeTxn) DeleteRange(ctx context.Context, start, end []byte) error {
	t.s.count.Add(1)
	return t.Txn.(store.RangeDeleter).DeleteRange(ctx, start, end)
}

// openRangeEngine opens an engine over a rangeStore on a fresh Pebble store.
func openRangeEngine(t testing.TB, ranges bool) (*Engine, *rangeStore) {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	pst, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	st := &rangeStore{Store: pst, ranges: ranges}
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	e, err := New(st, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		pst.Close()
	})
	return e, st
}

// TestRecursiveDeleteStorePaths deletes the same tree (quotas, content,
// xattrs, a file being written, empty directories, several transactions
// ending inside directories) on a store with range deletion and on one
// without: both leave the same namespace, clean, with the quotas above
// charged back; the first deletes by range, one range per directory and
// transaction.
func TestRecursiveDeleteStorePaths(t *testing.T) {
	for _, ranges := range []bool{true, false} {
		t.Run(fmt.Sprintf("ranges=%v", ranges), func(t *testing.T) {
			e, st := openRangeEngine(t, ranges)
			e.cfg.SubtreeDeleteBatch = 300
			ctx := context.Background()
			must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
			must(t, e.Mkdirs(ctx, root, "/q/keep", 0o755))
			writeFile(t, e, root, "/q/keep/f", []byte("kept"))
			must(t, e.SetQuota(ctx, root, "/q", 100000, 1<<30))
			buildTree(t, e, "/q/top", 10, 90)
			must(t, e.SetQuota(ctx, root, "/q/top/d3", 100000, 1<<30))
			cs, err := e.ContentSummary(ctx, root, "/q/top")
			must(t, err)
			fsckClean(t, e)
			must(t, e.Delete(ctx, root, "/q/top", true))
			if _, err := e.Stat(ctx, root, "/q/top"); meta.KindOf(err) != meta.KindNotFound {
				t.Fatalf("stat /q/top after its delete: %v", err)
			}
			after, err := e.Stat(ctx, root, "/q")
			must(t, err)
			if after.ChildrenNum != 1 {
				t.Errorf("/q has %d entries, want 1", after.ChildrenNum)
			}
			rep, err := e.Fsck(ctx)
			must(t, err)
			if !rep.Clean() {
				t.Fatalf("fsck: %v", rep.Problems)
			}
			q, err := e.ContentSummary(ctx, root, "/q")
			must(t, err)
			if q.FileCount != 1 || q.DirectoryCount != 2 {
				t.Errorf("/q holds %d files and %d directories after the delete, want 1 and 2", q.FileCount, q.DirectoryCount)
			}
			_ = cs
			n := st.count.Load()
			switch {
			case !ranges && n != 0:
				t.Fatalf("%d ranges deleted through a store without RangeDeleter", n)
			case ranges && (n == 0 || n > 4*int64(cs.DirectoryCount)):
				t.Fatalf("%d ranges deleted for %d directories", n, cs.DirectoryCount)
			}
			data, err := e.Read(ctx, root, "/q/keep/f", 0, 100)
			must(t, err)
			if string(data) != "kept" {
				t.Fatalf("/q/keep/f reads %q", data)
			}
		})
	}
}

// buildWide makes dirs directories of files empty files each under top,
// in two levels (the shape of bench prepare's trees: ~16 files a
// directory), with 16 writers.
func buildWide(t testing.TB, e *Engine, u meta.User, top string, dirs, files int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d := int(next.Add(1)) - 1
				if d >= dirs {
					return
				}
				dir := fmt.Sprintf("%s/g%d/d%d", top, d%32, d)
				if err := e.Mkdirs(ctx, u, dir, 0o755); err != nil {
					errs <- err
					return
				}
				for f := range files {
					p := fmt.Sprintf("%s/f%d", dir, f)
					if _, err := e.Create(ctx, u, p, meta.CreateOptions{Client: "b"}); err != nil {
						errs <- err
						return
					}
					if _, err := e.Complete(ctx, u, p, "b"); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkRecursiveDelete times the recursive delete of a tree of empty
// files, 16 a directory (one delete per iteration; the tree is built
// outside the timer). Its memory variant measures what the delete holds:
// the peak of the live heap, sampled by a forced GC every 2 ms (which slows
// it: its time is not the delete's), over the live heap before, per inode
// of the tree. Run it with -benchtime=3x -cpuprofile to see where a
// delete's time goes.
//
// The user variant deletes as an ordinary user, which adds the sub-access
// check (a walk of every directory before the first entry goes).
func BenchmarkRecursiveDelete(b *testing.B) {
	type variant struct {
		dirs   int
		memory bool
		u      meta.User
	}
	var variants []variant
	for _, dirs := range []int{1024, 4096} {
		variants = append(variants, variant{dirs, false, root}, variant{dirs, true, root})
	}
	variants = append(variants, variant{1024, false, alice})
	for _, v := range variants {
		dirs, memory := v.dirs, v.memory
		name := fmt.Sprintf("files=%d", dirs*16)
		if memory {
			name += "/memory"
		}
		if v.u != root {
			name += "/user"
		}
		b.Run(name, func(b *testing.B) {
			e, _ := newEngine(b)
			ctx := context.Background()
			must(b, e.SetPermission(ctx, root, "/", 0o777))
			inodes := dirs*17 + 32
			var held int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				top := fmt.Sprintf("/t%d", i)
				buildWide(b, e, v.u, top, dirs, 16)
				runtime.GC()
				base := liveHeap()
				stop, peak := make(chan struct{}), make(chan int64)
				if memory {
					go func() {
						m := base
						for {
							select {
							case <-stop:
								peak <- m
								return
							case <-time.After(2 * time.Millisecond):
								runtime.GC()
								m = max(m, liveHeap())
							}
						}
					}()
				}
				b.StartTimer()
				must(b, e.Delete(ctx, v.u, top, true))
				b.StopTimer()
				if memory {
					close(stop)
					held = max(held, <-peak-base)
				}
				b.StartTimer()
			}
			if memory {
				b.ReportMetric(float64(held)/float64(inodes), "held-B/inode")
				b.ReportMetric(float64(held)/(1<<20), "held-MB")
			} else {
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*inodes), "µs/inode")
			}
		})
	}
}

// liveHeap returns the live heap as of the last GC.
func liveHeap() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}
