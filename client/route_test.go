package client

import (
	"log/slog"
	pathpkg "path"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/rpc"
)

func routeTestClient() *Client {
	return &Client{def: &pool{addr: "127.0.0.1:1", slots: make([]slot, 2)}, log: slog.New(slog.DiscardHandler)}
}

func statReq(p string) *api.Request {
	return &api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: p}}}
}

func listReq(p string) *api.Request {
	return &api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: p}}}
}

func twoDeployments(version int64) []byte {
	m := &routing.Map{Version: version, Deployments: [][]routing.Instance{
		{{ID: "a", Addr: "http://127.0.0.1:1"}},
		{{ID: "b", Addr: "http://127.0.0.1:2"}},
	}}
	b, _ := m.MarshalBinary()
	return b
}

// TestRouteLearnsOwner: a wrong-owner answer teaches the client the owner
// of the request's directory (a stat's parent, a listing's own), later
// requests for that directory go to the owner's instance at once, and
// what it has not learnt goes to the default server.
func TestRouteLearnsOwner(t *testing.T) {
	c := routeTestClient()
	req := statReq("/d/f")
	rt := c.routeOf(rpc.MethodStat, req)
	if rt.pool != c.def || rt.dir != "/d" {
		t.Fatalf("first route: pool %s dir %q, want the default and /d", rt.pool.addr, rt.dir)
	}
	req.Routed = true
	p := c.misrouted(&rt, req, twoDeployments(3), 1)
	if p.addr != "127.0.0.1:2" || !req.Routed {
		t.Fatalf("after a wrong-owner answer: pool %s routed %v, want 127.0.0.1:2, routed", p.addr, req.Routed)
	}
	for _, r := range []struct {
		m    rpc.Method
		req  *api.Request
		want string
	}{
		{rpc.MethodStat, statReq("/d/g"), "127.0.0.1:2"},
		{rpc.MethodList, listReq("/d"), "127.0.0.1:2"},
		{rpc.MethodList, listReq("/d/"), "127.0.0.1:2"},
		{rpc.MethodStat, statReq("/d"), "127.0.0.1:1"},   // routed by "/", not learnt
		{rpc.MethodStat, statReq("/e/f"), "127.0.0.1:1"}, // not learnt
	} {
		if got := c.routeOf(r.m, r.req).pool.addr; got != r.want {
			t.Errorf("%v %v: sent to %s, want %s", r.m, r.req.GetBody(), got, r.want)
		}
	}
	if c.poolFor("127.0.0.1:2") != p || c.poolFor("127.0.0.1:1") != c.def {
		t.Error("poolFor does not keep one pool per address")
	}
	if wrong, owned := c.RouteStats(); wrong != 1 || owned != 3 {
		t.Errorf("RouteStats = %d, %d; want 1, 3", wrong, owned)
	}
}

// TestRouteMapVersions: an older map does not replace a newer one; a map
// with another number of deployments forgets the learnt owners.
func TestRouteMapVersions(t *testing.T) {
	c := routeTestClient()
	req := statReq("/d/f")
	rt := c.routeOf(rpc.MethodStat, req)
	c.misrouted(&rt, req, twoDeployments(5), 1)
	rt = route{dir: "/x", pool: c.def}
	c.misrouted(&rt, req, twoDeployments(4), 0)
	if v := c.routes.mu.m.Version; v != 5 {
		t.Errorf("map version %d after an older map, want 5", v)
	}
	three := &routing.Map{Version: 6, Deployments: make([][]routing.Instance, 3)}
	b, _ := three.MarshalBinary()
	rt = route{dir: "/y", pool: c.def}
	c.misrouted(&rt, req, b, 2)
	if _, ok := c.routes.mu.dirs["/d"]; ok || c.routes.mu.m.N() != 3 {
		t.Errorf("a map of 3 deployments kept the owners learnt under 2 (dirs %v)", c.routes.mu.dirs)
	}
}

// TestRouteGivesUp: a bad map, an owner without instances, or more than
// maxRouteHops answers send the request unrouted to the default server,
// which serves anything.
func TestRouteGivesUp(t *testing.T) {
	c := routeTestClient()
	for _, tc := range []struct {
		name  string
		enc   []byte
		owner uint32
		hops  int
	}{
		{"bad map", []byte{9, 9}, 1, 0},
		{"owner without instances", twoDeployments(1), 7, 0},
		{"too many hops", twoDeployments(1), 1, maxRouteHops},
	} {
		req := statReq("/d/f")
		req.Routed = true
		rt := route{dir: "/d", pool: c.def, hops: tc.hops}
		if p := c.misrouted(&rt, req, tc.enc, tc.owner); p != c.def || req.Routed {
			t.Errorf("%s: pool %s routed %v, want the default, unrouted", tc.name, p.addr, req.Routed)
		}
	}
}

// FuzzWrongOwner: whatever map and owner a wrong-owner answer carries, the
// client neither panics nor sends an unrouted request anywhere but to the
// default server.
func FuzzWrongOwner(f *testing.F) {
	f.Add(twoDeployments(1), uint32(1))
	f.Add([]byte{}, uint32(0))
	f.Add([]byte{1, 0, 2, 1, 1, 'a', 0, 0}, uint32(0))
	f.Fuzz(func(t *testing.T, enc []byte, owner uint32) {
		c := routeTestClient()
		req := statReq("/d/f")
		req.Routed = true
		rt := c.routeOf(rpc.MethodStat, req)
		p := c.misrouted(&rt, req, enc, owner)
		if p == nil || !req.Routed && p != c.def {
			t.Fatalf("pool %v routed %v: an unrouted request goes to the default server", p, req.Routed)
		}
		_ = c.routeOf(rpc.MethodList, listReq("/d"))
	})
}

// cleanAbs agrees with path.Clean on which paths it leaves unchanged.
func FuzzCleanAbs(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/b", "//a", "/a/", "/./a", "/a/..", "/a/.b", "/..a", "a/b", "", "/a//b", "/...", "/a/."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		want := strings.HasPrefix(p, "/") && pathpkg.Clean(p) == p
		if got := cleanAbs(p); got != want {
			t.Fatalf("cleanAbs(%q) = %v; path.Clean gives %q", p, got, pathpkg.Clean(p))
		}
	})
}
