package client_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/rpc"
)

// fakeRouter is deployment self of 2, where deployment 1 owns the
// directories under /b and 0 the others; lying makes it claim the other
// deployment owns everything.
type fakeRouter struct {
	self    int
	lying   bool
	m       atomic.Pointer[[]byte]
	refused atomic.Int64
	asked   atomic.Int64 // calls of Misrouted
}

func (r *fakeRouter) Misrouted(_ context.Context, listing bool, p string) (int, []byte, bool) {
	r.asked.Add(1)
	dir := p
	if !listing {
		dir = p[:max(strings.LastIndexByte(p, '/'), 1)]
	}
	owner := 0
	if dir == "/b" || strings.HasPrefix(dir, "/b/") {
		owner = 1
	}
	if r.lying {
		owner = 1 - r.self
	}
	if owner == r.self {
		return 0, nil, false
	}
	r.refused.Add(1)
	return owner, *r.m.Load(), true
}

func serveRouted(t *testing.T, fs meta.FileSystem, r *fakeRouter) string {
	t.Helper()
	return serveWith(t, fs, rpc.ServerOptions{Router: r})
}

// twoRouted starts two servers of one file system as deployments 0 and 1.
func twoRouted(t *testing.T, lying bool) (meta.FileSystem, [2]*fakeRouter, [2]string) {
	return twoRoutedOf(t, metatest.NewMemFS(), lying)
}

// twoRoutedOf is twoRouted serving fs.
func twoRoutedOf(t *testing.T, fs meta.FileSystem, lying bool) (meta.FileSystem, [2]*fakeRouter, [2]string) {
	rs := [2]*fakeRouter{{self: 0, lying: lying}, {self: 1, lying: lying}}
	var addrs [2]string
	for i := range rs {
		addrs[i] = serveRouted(t, fs, rs[i])
	}
	m := &routing.Map{Version: 1, Deployments: [][]routing.Instance{{{ID: "a", Addr: addrs[0]}}, {{ID: "b", Addr: addrs[1]}}}}
	enc, _ := m.MarshalBinary()
	for _, r := range rs {
		r.m.Store(&enc)
	}
	return fs, rs, addrs
}

// TestRoutedClient: a routing client follows a wrong-owner answer to the
// owner (a listing, decoded in place, and a stat), then sends that
// directory's requests to the owner at once; unrouted clients are served
// anywhere.
func TestRoutedClient(t *testing.T) {
	fs, rs, addrs := twoRouted(t, false)
	ctx := context.Background()
	u := meta.User{Name: "root"}
	for _, d := range []string{"/a", "/b"} {
		if err := fs.Mkdirs(ctx, u, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := meta.CreateFile(ctx, fs, u, "/b/f", meta.CreateOptions{Client: "t", Perm: 0o644}, nil); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addrs[0], client.Options{Route: true})
	l, err := c.List(ctx, u, "/b", "", 0)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Path != "/b/f" {
		t.Fatalf("list /b: %v, %+v", err, l)
	}
	if w, _ := c.RouteStats(); w != 1 || rs[0].refused.Load() != 1 {
		t.Fatalf("after list /b: %d wrong-owner answers followed, %d refused; want 1, 1", w, rs[0].refused.Load())
	}
	for range 3 {
		if _, err := c.Stat(ctx, u, "/b/f"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stat(ctx, u, "/a"); err != nil {
			t.Fatal(err)
		}
	}
	if w, o := c.RouteStats(); w != 1 || o != 3 || rs[1].refused.Load() != 0 {
		t.Errorf("stats: %d wrong-owner answers, %d sent to the learnt owner, %d refused by the owner; want 1, 3, 0", w, o, rs[1].refused.Load())
	}
	plain := dial(t, addrs[0], client.Options{})
	if _, err := plain.Stat(ctx, u, "/b/f"); err != nil || rs[0].refused.Load() != 1 {
		t.Errorf("unrouted stat: %v, refused %d (want served)", err, rs[0].refused.Load())
	}
}

// TestRoutedClientBounded: servers that each say the other owns
// everything are followed maxRouteHops times, then the request goes
// unrouted to the default server, which serves it.
func TestRoutedClientBounded(t *testing.T) {
	fs, rs, addrs := twoRouted(t, true)
	ctx := context.Background()
	u := meta.User{Name: "root"}
	if err := fs.Mkdirs(ctx, u, "/a/x", 0o755); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addrs[0], client.Options{Route: true})
	st, err := c.Stat(ctx, u, "/a/x")
	if err != nil || !st.IsDir() {
		t.Fatalf("stat /a/x: %v, %+v", err, st)
	}
	if w, _ := c.RouteStats(); w != 4 || rs[0].refused.Load()+rs[1].refused.Load() != 4 {
		t.Errorf("%d wrong-owner answers followed, %d refused; want 4 (3 hops, then unrouted)", w, rs[0].refused.Load()+rs[1].refused.Load())
	}
}

// TestRoutedCachedReadsSkipTheRouter: over an engine with a metadata cache
// (meta.DefersOwnerCheck), a stat, read or listing the cache answers is not
// checked by the router (its deployment filled it, so it owns it); one that
// reads the store is, and a misrouted one is refused and followed as
// before.
func TestRoutedCachedReadsSkipTheRouter(t *testing.T) {
	c, err := cache.New(cache.Config{MaxBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e := engineWith(t, func(cfg *namespace.Config) { cfg.Cache = c })
	fs, rs, addrs := twoRoutedOf(t, e, false)
	ctx := context.Background()
	u := meta.User{Name: "root"}
	for _, f := range []string{"/a/f", "/b/f"} {
		if _, err := meta.CreateFile(ctx, fs, u, f, meta.CreateOptions{Client: "t", Perm: 0o644, CreateParent: true}, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	cl := dial(t, addrs[0], client.Options{Route: true})
	read := func(p string) {
		t.Helper()
		if _, err := cl.Stat(ctx, u, p); err != nil {
			t.Fatal(err)
		}
		if b, err := cl.Read(ctx, u, p, 0, 10); err != nil || string(b) != "x" {
			t.Fatalf("read %s: %q, %v", p, b, err)
		}
		dir, _ := meta.ParentPath(p)
		if l, err := cl.List(ctx, u, dir, "", 0); err != nil || len(l.Entries) != 1 {
			t.Fatalf("list: %+v, %v", l, err)
		}
	}
	read("/a/f") // fills the cache: each of the three asks the router
	asked := rs[0].asked.Load()
	if asked == 0 {
		t.Fatal("the store reads did not ask the router")
	}
	for range 5 {
		read("/a/f")
	}
	if got := rs[0].asked.Load(); got != asked {
		t.Errorf("cached reads asked the router %d more times, want none", got-asked)
	}
	read("/b/f") // uncached at deployment 0: refused, followed to 1
	if w, _ := cl.RouteStats(); w == 0 || rs[0].refused.Load() == 0 {
		t.Errorf("reads of /b: %d wrong-owner answers followed, %d refused by deployment 0; want both > 0", w, rs[0].refused.Load())
	}
}
