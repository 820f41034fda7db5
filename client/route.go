package client

import (
	pathpkg "path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/rpc"
)

// Request routing (Options.Route; docs/ELASTIC.md, "Request routing").
//
// The routing key of a request is a directory's inode id, which the client
// does not know; it knows the directory's path: the path of a listing, the
// parent of any other path. So it learns, from the servers' wrong-owner
// answers, which deployment owns each directory path it met, and keeps the
// last routing map it received to find that deployment's instances. A
// request for a directory it has not learnt goes to the default server
// (Dial's address) marked routed; a server of another deployment refuses
// it with the owner and the map, and the client sends it again there, at
// most maxRouteHops times, then unrouted to the default server, which
// serves any request. A learnt owner can go stale (a directory renamed
// over, a membership change): the next wrong-owner answer corrects it.

// maxRouteHops bounds the wrong-owner answers one call follows.
const maxRouteHops = 3

// maxRouteDirs bounds the learnt directories; past it the table is
// emptied and learnt again (cheap: one wrong-owner answer per directory).
const maxRouteDirs = 1 << 16

// routes is the client's routing state. The pools it holds live until
// Close.
type routes struct {
	mu struct {
		sync.RWMutex
		m     *routing.Map     // the last map received; nil: none yet
		dirs  map[string]int   // directory path -> owning deployment
		pools map[string]*pool // by instance address (host:port)
	}
	// wrong counts wrong-owner answers, owned requests sent to a learnt
	// owner's instance.
	wrong, owned atomic.Int64
}

// route is where one call goes: the directory it is routed by and the
// pool it is sent on; hops counts the wrong-owner answers it followed.
type route struct {
	dir  string
	pool *pool
	hops int
}

// routeDir is the path of the directory a request is routed by, as the
// server routes it (rpc.MethodOf's path): the listed directory for a
// listing, else the path's parent.
func routeDir(m rpc.Method, p string) string {
	if p == "" {
		return ""
	}
	if !cleanAbs(p) {
		p = pathpkg.Clean(p)
	}
	if m == rpc.MethodList {
		return p
	}
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// routeOf returns where req goes: an instance of its directory's learnt
// owner, else the default server.
func (c *Client) routeOf(m rpc.Method, req *api.Request) route {
	_, p := rpc.MethodOf(req)
	rt := route{dir: routeDir(m, p), pool: c.def}
	r := &c.routes
	r.mu.RLock()
	d, ok := r.mu.dirs[rt.dir]
	var addr string
	if ok && r.mu.m != nil {
		addr = pickInstance(r.mu.m, d, c.tag)
	}
	r.mu.RUnlock()
	if addr != "" {
		rt.pool = c.poolFor(addr)
		r.owned.Add(1)
	}
	return rt
}

// misrouted takes a wrong-owner answer for rt: it keeps the map when it is
// newer than the one it has, learns rt's directory's owner, and returns
// the pool to send the request on next (the default one, unrouted, once
// the owner has no known instance or rt followed maxRouteHops answers).
func (c *Client) misrouted(rt *route, req *api.Request, enc []byte, owner uint32) *pool {
	rt.hops++
	m, ok := c.learnOwner(rt.dir, enc, owner)
	if !ok {
		req.Routed = false
		return c.def
	}
	addr := pickInstance(m, int(owner), c.tag)
	if addr == "" || rt.hops > maxRouteHops {
		req.Routed = false
		return c.def
	}
	return c.poolFor(addr)
}

// learnOwner takes a wrong-owner answer for directory dir: it keeps the
// map (enc) when it is newer than the one it has, and learns that owner
// owns dir. It returns the answer's map, or false when it does not decode.
func (c *Client) learnOwner(dir string, enc []byte, owner uint32) (*routing.Map, bool) {
	r := &c.routes
	r.wrong.Add(1)
	var m routing.Map
	if err := m.UnmarshalBinary(enc); err != nil {
		c.log.Debug("client: a wrong-owner answer with a bad map", "err", err)
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.m == nil || m.Version >= r.mu.m.Version {
		if r.mu.m != nil && r.mu.m.N() != m.N() {
			r.mu.dirs = nil // another number of deployments: other owners
		}
		r.mu.m = &m
	}
	if r.mu.dirs == nil || len(r.mu.dirs) >= maxRouteDirs {
		r.mu.dirs = make(map[string]int)
	}
	r.mu.dirs[dir] = int(owner)
	return &m, true
}

// learntOwner returns the deployment learnt to own directory dir.
func (c *Client) learntOwner(dir string) (int, bool) {
	r := &c.routes
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.mu.dirs[dir]
	return d, ok
}

// pickInstance returns the address (host:port) of one of deployment d's
// instances in m, the same one for a client (spread by its tag), or "".
func pickInstance(m *routing.Map, d int, tag uint64) string {
	ins := m.Instances(d)
	if len(ins) == 0 {
		return ""
	}
	hp, err := rpc.HostPort(ins[(tag>>40)%uint64(len(ins))].Addr)
	if err != nil {
		return ""
	}
	return hp
}

// poolFor returns the pool of the server at addr (host:port), made on
// first use; its connections are dialled as requests need them.
func (c *Client) poolFor(addr string) *pool {
	if addr == c.def.addr {
		return c.def
	}
	r := &c.routes
	r.mu.RLock()
	p := r.mu.pools[addr]
	r.mu.RUnlock()
	if p != nil {
		return p
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p = r.mu.pools[addr]; p == nil {
		if r.mu.pools == nil {
			r.mu.pools = make(map[string]*pool)
		}
		p = &pool{addr: addr, slots: make([]slot, len(c.def.slots))}
		r.mu.pools[addr] = p
	}
	return p
}

// routedPools returns the pools of routed instances (Close).
func (c *Client) routedPools() []*pool {
	r := &c.routes
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*pool, 0, len(r.mu.pools))
	for _, p := range r.mu.pools {
		out = append(out, p)
	}
	return out
}

// RouteStats returns, with Options.Route, how many wrong-owner answers the
// client followed and how many requests it sent to a learnt owner.
func (c *Client) RouteStats() (wrongOwner, toOwner int64) {
	return c.routes.wrong.Load(), c.routes.owned.Load()
}

// cleanAbs reports whether p is an absolute path that path.Clean would
// return unchanged: no empty, "." or ".." component and no trailing slash.
// One pass without path.Clean's buffer: routeDir runs on every request.
func cleanAbs(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 1 // of the current component
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch p[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}
