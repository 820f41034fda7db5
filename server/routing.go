package server

import (
	"context"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/routing"
)

// router is the server's rpc.Router (docs/ELASTIC.md, "Request routing"):
// with several deployments, a routed request whose routing key another
// deployment owns is refused with that owner and the current routing map.
// The key costs a hint-cache lookup (a store read on a miss:
// namespace.Engine.RoutingKey).
type router struct {
	s *Server
	// mapTTL bounds how old the map a wrong-owner answer carries may be:
	// the map is read from the coordinator at most once per mapTTL, and
	// only when a request is refused, so a well-routed client costs no
	// coordinator reads.
	mapTTL time.Duration
	mu     struct {
		sync.Mutex
		at  time.Time
		enc []byte
	}
}

func (r *router) Misrouted(ctx context.Context, listing bool, path string) (int, []byte, bool) {
	n := r.s.cfg.Deployments
	if n <= 1 || !r.s.ready.Load() { // ready: s.coord is set
		return 0, nil, false
	}
	key, ok, err := r.s.ns.RoutingKey(ctx, listing, path)
	if err != nil || !ok {
		return 0, nil, false
	}
	owner := routing.Owner(key, n)
	if owner == r.s.cfg.Deployment {
		return 0, nil, false
	}
	enc, err := r.currentMap(ctx)
	if err != nil {
		r.s.log.Debug("routing: no map to send with a wrong-owner answer; serving here", "err", err)
		return 0, nil, false
	}
	return owner, enc, true
}

// currentMap returns the binary routing map, read again from the
// coordinator when older than mapTTL.
func (r *router) currentMap(ctx context.Context) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.enc != nil && time.Since(r.mu.at) < r.mapTTL {
		return r.mu.enc, nil
	}
	v, err := r.s.coord.Members(ctx, coordinator.All)
	if err != nil {
		return nil, err
	}
	enc, err := routing.FromMembers(v.Rev, r.s.cfg.Deployments, v.Members).MarshalBinary()
	if err != nil {
		return nil, err
	}
	r.mu.at, r.mu.enc = time.Now(), enc
	return enc, nil
}
