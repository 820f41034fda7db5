package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestNamespaceRoundTrips counts the round trips of the namespace's
// operations over this store (the budget: 1 for a stat, 3 for a
// create), warm: the namespace's directory-id hints filled, every
// statement prepared on the connections used.
func TestNamespaceRoundTrips(t *testing.T) {
	st, e := newEngine(t)
	ctx := context.Background()
	root := meta.User{Name: "root"}
	const dir = "/user/alice/warehouse/sales/year=2026/month=11"
	if err := e.Mkdirs(ctx, root, dir, 0); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name   string
		budget float64
		fn     func(i int) error
	}{
		{"stat", 1, func(i int) error { _, err := e.Stat(ctx, root, dir); return err }},
		{"create", 3, func(i int) error {
			_, err := e.CreateFile(ctx, root, fmt.Sprintf("%s/f%d", dir, i), meta.CreateOptions{}, []byte("x"))
			return err
		}},
		{"stat file", 1, func(i int) error { _, err := e.Stat(ctx, root, fmt.Sprintf("%s/f%d", dir, i)); return err }},
		{"list", 3, func(i int) error { _, err := e.List(ctx, root, dir, "", 100); return err }},
		{"mkdir", 3, func(i int) error { return e.Mkdirs(ctx, root, fmt.Sprintf("%s/d%d", dir, i), 0) }},
		{"rename", 3, func(i int) error {
			return e.Rename(ctx, root, fmt.Sprintf("%s/f%d", dir, i), fmt.Sprintf("%s/g%d", dir, i), meta.RenameOptions{})
		}},
		{"delete", 3, func(i int) error { return e.Delete(ctx, root, fmt.Sprintf("%s/g%d", dir, i), false) }},
		// With a request id, as over the RPC: the record's lock joins the
		// first batch and its row the commit's (namespace/once.go), so
		// the budget is the same.
		{"create recorded", 3, func(i int) error {
			_, err := e.CreateFile(reqCtx(1, i), root, fmt.Sprintf("%s/r%d", dir, i), meta.CreateOptions{}, []byte("x"))
			return err
		}},
		{"mkdir recorded", 3, func(i int) error { return e.Mkdirs(reqCtx(2, i), root, fmt.Sprintf("%s/rd%d", dir, i), 0) }},
		{"rename recorded", 3, func(i int) error {
			return e.Rename(reqCtx(3, i), root, fmt.Sprintf("%s/r%d", dir, i), fmt.Sprintf("%s/rr%d", dir, i), meta.RenameOptions{})
		}},
		{"resubmitted rename", 2, func(i int) error { // lock and read the record, and the empty commit
			return e.Rename(meta.WithRequest(reqCtx(3, i), meta.Request{Client: "nimbus-pg", ID: 3<<32 | uint64(i), Resubmitted: true}),
				root, fmt.Sprintf("%s/r%d", dir, i), fmt.Sprintf("%s/rr%d", dir, i), meta.RenameOptions{})
		}},
	}
	for i := range 3 { // the first round warms hints and prepared statements
		took := map[string]float64{}
		for _, op := range ops {
			before := roundTrips(st)
			if err := op.fn(i); err != nil {
				t.Fatalf("%s: %v", op.name, err)
			}
			n := roundTrips(st) - before
			took[op.name] = n
			if i == 2 {
				t.Logf("%-9s %v round trips", op.name, n)
				if n > op.budget {
					t.Errorf("%s: %v round trips, budget %v", op.name, n, op.budget)
				}
				// The record's read rides on its lock: a missing record
				// is not read again after the batch's other locks
				// (store.ReadReq.OwnLock).
				if plain, ok := strings.CutSuffix(op.name, " recorded"); ok && n > took[plain] {
					t.Errorf("%s: %v round trips, %v without a request id", op.name, n, took[plain])
				}
			}
		}
	}
}

// TestNamespaceCachedRoundTrips: with the engine's metadata cache, a
// repeated stat (of a directory and of a file) and a repeated listing of a
// cached path take no round trip to the database; a create in the directory
// invalidates its listing and its attributes, which the next reads fill
// again, and no cached path through it.
func TestNamespaceCachedRoundTrips(t *testing.T) {
	c, err := cache.New(cache.Config{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	st, e := newEngineWith(t, func(cfg *namespace.Config) { cfg.Cache = c })
	ctx := context.Background()
	root := meta.User{Name: "root"}
	const dir = "/user/alice/warehouse/sales/year=2026/month=11"
	if _, err := e.CreateFile(ctx, root, dir+"/f", meta.CreateOptions{CreateParent: true}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		fn   func() error
	}{
		{"stat", func() error { _, err := e.Stat(ctx, root, dir); return err }},
		{"stat file", func() error { _, err := e.Stat(ctx, root, dir+"/f"); return err }},
		{"list", func() error { _, err := e.List(ctx, root, dir, "", 100); return err }},
		{"read file", func() error {
			b, err := e.Read(ctx, root, dir+"/f", 0, 100)
			if err == nil && string(b) != "x" {
				err = fmt.Errorf("read %q, want x", b)
			}
			return err
		}},
	}
	trips := func(fn func() error) float64 {
		before := roundTrips(st)
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		return roundTrips(st) - before
	}
	for round := range 3 {
		for _, r := range reads {
			n := trips(r.fn)
			if round > 0 && n != 0 {
				t.Errorf("round %d: %s of a cached path: %v round trips, want 0", round, r.name, n)
			}
			if round == 0 && n == 0 {
				t.Errorf("%s of a path not cached yet: no round trip", r.name)
			}
		}
	}
	// A create in the directory: the stat of the directory (its entry
	// count) and the listing go to the store once, the file's does not.
	if _, err := e.CreateFile(ctx, root, dir+"/g", meta.CreateOptions{}, []byte("y")); err != nil {
		t.Fatal(err)
	}
	for k, want := range []bool{true, false, true, false} {
		if n := trips(reads[k].fn); (n > 0) != want {
			t.Errorf("%s after a create in the directory: %v round trips, want them %v", reads[k].name, n, map[bool]string{true: "> 0", false: "0"}[want])
		}
	}
	l, err := e.List(ctx, root, dir, "", 100)
	if err != nil || len(l.Entries) != 2 {
		t.Fatalf("list after the create: %+v, %v", l, err)
	}
}

// TestNamespaceRecursiveDelete: a recursive delete over PostgreSQL removes
// each directory's entries with one range deletion (DeleteRange), leaves
// no row of the tree behind (every row of the table is reachable, fsck
// clean) and keeps what is beside it.
func TestNamespaceRecursiveDelete(t *testing.T) {
	st, e := newEngine(t)
	ctx := context.Background()
	root := meta.User{Name: "root"}
	const dirs, files = 6, 40
	for d := range dirs {
		for f := range files {
			p := fmt.Sprintf("/tree/d%d/sub/f%d", d, f)
			if _, err := e.CreateFile(ctx, root, p, meta.CreateOptions{CreateParent: true}, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.CreateFile(ctx, root, "/beside/keep", meta.CreateOptions{CreateParent: true}, []byte("y")); err != nil {
		t.Fatal(err)
	}
	rangesBefore := testutil.ToFloat64(st.metrics.statements[kindRange])
	if err := e.Delete(ctx, root, "/tree", true); err != nil {
		t.Fatal(err)
	}
	ranges := testutil.ToFloat64(st.metrics.statements[kindRange]) - rangesBefore
	// /tree, each d, each sub: one range each at most, at least one per
	// directory that had entries.
	if min := float64(1 + 2*dirs); ranges < min {
		t.Errorf("%v range deletions for %d directories with entries, want at least %v", ranges, 1+2*dirs, min)
	}
	if _, err := e.Stat(ctx, root, "/tree"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("stat /tree after delete: %v", err)
	}
	if _, err := e.Stat(ctx, root, "/beside/keep"); err != nil {
		t.Fatalf("stat /beside/keep: %v", err)
	}
	rep, err := e.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("fsck after delete: %v", rep.Problems)
	}
	if rep.Files != 1 {
		t.Errorf("fsck counts %d files, want 1", rep.Files)
	}
}

// TestNamespaceMkdirsThenCreate: writers make directories with mkdirs -p
// whose ancestors the others are making at the same time, and each creates
// a file in its directory as soon as mkdirs returns: the create must find
// the directory (a bench prepare once failed here with "does not exist"
// after its mkdirs had succeeded).
func TestNamespaceMkdirsThenCreate(t *testing.T) {
	_, e := newEngine(t)
	ctx := context.Background()
	root := meta.User{Name: "root"}
	const writers, dirs = 16, 600
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= dirs {
					return
				}
				d := fmt.Sprintf("/t/a%d/b%d/c%d/d%d", i%3, i%7, i%11, i)
				if err := e.Mkdirs(ctx, root, d, 0); err != nil {
					errs <- fmt.Errorf("mkdirs %s: %w", d, err)
					return
				}
				for f := range 3 {
					p := fmt.Sprintf("%s/f%d", d, f)
					if _, err := e.CreateFile(ctx, root, p, meta.CreateOptions{}, []byte("x")); err != nil {
						errs <- fmt.Errorf("create %s after mkdirs: %w", p, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rep, err := e.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Files != 3*dirs {
		t.Fatalf("fsck: %d files (want %d), problems %v", rep.Files, 3*dirs, rep.Problems)
	}
}

// reqCtx carries request id op<<32|i of client "nimbus-pg", first sent.
func reqCtx(op, i int) context.Context {
	return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-pg", ID: uint64(op)<<32 | uint64(i)})
}

// newEngine is a namespace engine, superuser root, over a fresh database
// of the test's cluster; both are closed with the test.
func newEngine(t *testing.T) (*Store, *namespace.Engine) {
	t.Helper()
	return newEngineWith(t, nil)
}

// newEngineWith is newEngine with edit applied to the engine's Config.
func newEngineWith(t *testing.T, edit func(*namespace.Config)) (*Store, *namespace.Engine) {
	t.Helper()
	st := open(t, pgtest.DB(t), prometheus.NewRegistry())
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	if edit != nil {
		edit(&cfg)
	}
	e, err := namespace.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return st, e
}
