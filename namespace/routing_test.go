package namespace

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// TestRoutingKey: a path's routing key is its parent's id (a listing's,
// the directory's own), resolved with a cold hint cache through the store
// and the same after; paths without a key say so.
func TestRoutingKey(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	u := root
	if err := e.Mkdirs(ctx, u, "/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, u, "/a/b/f", meta.CreateOptions{Client: "c", Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	idOf := func(p string) uint64 {
		st, err := e.Stat(ctx, u, p)
		if err != nil {
			t.Fatal(err)
		}
		return st.FileID
	}
	a, b := idOf("/a"), idOf("/a/b")
	for pass, cold := range []bool{true, false} {
		if cold {
			e.hints = newHints(1024)
		}
		for _, c := range []struct {
			listing bool
			path    string
			key     uint64
			ok      bool
		}{
			{false, "/a/b/f", b, true},
			{false, "/a//b/f/", b, true}, // cleaned first
			{false, "/a/b/missing", b, true},
			{true, "/a/b", b, true},
			{false, "/a/b", a, true},
			{false, "/a", store.RootID, true},
			{true, "/", store.RootID, true},
			{false, "/", 0, false},         // the root has no parent
			{false, "/a/b/f/x", 0, false},  // a file in the middle
			{false, "/a/nope/x", 0, false}, // a missing directory
			{false, "relative", 0, false},  // not a path
			{false, "/.reserved/raw/a", 0, false},
		} {
			key, ok, err := e.RoutingKey(ctx, c.listing, c.path)
			if err != nil || ok != c.ok || key != c.key {
				t.Errorf("pass %d: RoutingKey(%v, %q) = %d, %v, %v; want %d, %v", pass, c.listing, c.path, key, ok, err, c.key, c.ok)
			}
		}
	}
}

// BenchmarkRoutingKey is the lookup every routed request pays before it is
// served: a path four directories deep, its hints warm.
func BenchmarkRoutingKey(b *testing.B) {
	e, _ := newEngine(b)
	ctx := context.Background()
	if err := e.Mkdirs(ctx, root, "/w/x/y/z", 0o755); err != nil {
		b.Fatal(err)
	}
	if _, _, err := e.RoutingKey(ctx, false, "/w/x/y/z/f"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := e.RoutingKey(ctx, false, "/w/x/y/z/f"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
