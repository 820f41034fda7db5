package loop

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// fixedSession is a Sessions whose session is never replaced.
type fixedSession struct{ s coordinator.Session }

func (f fixedSession) Current() (coordinator.Session, <-chan struct{}) { return f.s, nil }

type instance struct {
	l    *Loop
	c    *cache.Cache
	sess coordinator.Session
}

// startInstance runs a loop over its own cache on st, reachable over HTTP,
// member id of coord.
func startInstance(t *testing.T, coord coordinator.Coordinator, st store.Store, id string) *instance {
	t.Helper()
	c, err := cache.New(cache.Config{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Cache, cfg.Store, cfg.Retry, cfg.Auth = c, st, 20*time.Millisecond, testKey(t)
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Handler())
	t.Cleanup(srv.Close)
	sess, err := coord.Join(t.Context(), coordinator.Member{ID: id, Addr: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	l.Start(coord, fixedSession{sess})
	t.Cleanup(l.Stop)
	waitFor(t, "serving", l.Serving)
	return &instance{l: l, c: c, sess: sess}
}

// testKey is the key of the tests' cluster secret: every loop of a test
// is a member of one cluster.
func testKey(t testing.TB) *clusterauth.Key {
	t.Helper()
	k, err := clusterauth.New(bytes.Repeat([]byte{7}, clusterauth.SecretSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

var (
	rootRow  = cache.FromStore(&store.Inode{Parent: store.RootParentID, Name: "", ID: store.RootID, Type: meta.TypeDir, Perm: 0o755})
	childRow = cache.FromStore(&store.Inode{Parent: store.RootID, Name: "x", ID: 5, Type: meta.TypeFile, Perm: 0o644})
)

// TestTwoLoops: a write on A holds B's cache from its INV until its
// RELEASE, passes the store check and commits; when A leaves, B fences it
// and A's fence row refuses its writes' commits.
func TestTwoLoops(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mc := memcoord.DefaultConfig()
	coord, err := memcoord.New(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })
	a := startInstance(t, coord, st, "a")
	b := startInstance(t, coord, st, "b")
	ctx := context.Background()

	if n := b.c.PutPath(b.c.Begin(), rootRow, childRow); n != 2 {
		t.Fatalf("filled %d rows, want 2", n)
	}
	// A's write must reach B, whose view may not list A yet: retried.
	var check func(context.Context, store.Txn) error
	var release func(bool)
	waitFor(t, "B in A's view", func() bool {
		check, release, err = a.l.Invalidator().InvalidateGuarded(ctx, []namespace.Target{{Target: cache.Key(store.RootID, "x"), Everywhere: true}})
		if err == nil {
			return true
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatal(err)
		}
		return false
	})
	if _, ok := b.c.Get(store.RootID, "x"); ok {
		t.Fatal("B still caches the row A's write holds")
	}
	tk := b.c.Begin()
	if b.c.Put(tk, childRow) {
		t.Fatal("B installed a fill of a held row")
	}
	txn, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(ctx, txn); err != nil {
		t.Fatalf("store check of a live writer: %v", err)
	}
	txn.Put(store.MetaKey("loop-test"), []byte("1"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	release(true)
	waitFor(t, "B's release", func() bool { return b.c.Put(b.c.Begin(), childRow) })
	if b.c.Put(tk, childRow) {
		t.Fatal("B installed a fill begun before the release")
	}

	// A leaves: B fences it, and A's fence row refuses A's commits.
	if err := a.sess.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A not serving", func() bool { return !a.l.Serving() })
	waitFor(t, "A fenced", func() bool {
		txn, err := st.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer txn.Rollback()
		// The check is the commit's expectation (store.Expecter): the
		// fenced writer's commit writes nothing.
		if err := check(ctx, txn); err != nil {
			return errors.Is(err, ErrFenced)
		}
		txn.Put(store.MetaKey("loop-test"), []byte("2"))
		err = txn.Commit(ctx)
		return errors.Is(err, store.ErrExpectation)
	})
	txn, err = st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.MetaKey("loop-test")}})
	if err != nil || string(vals[0]) != "1" {
		t.Fatalf("after the fenced commits: %q, %v; want the live writer's 1", vals, err)
	}
}
