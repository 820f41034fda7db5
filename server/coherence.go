package server

import (
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence/loop"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/namespace"
)

// Cache coherence between the servers of one shared store. With a cache,
// a PostgreSQL store and an etcd coordinator, the engine's writes
// invalidate through the coherence loop (package coherence/loop): INV to
// every live server, the write commits once each has acknowledged or left
// the membership, and only after the store's fence and floor check; and
// the cache answers only while the loop says it is Serving. On the
// embedded store the server is alone, and the engine's local invalidator
// is enough. On PostgreSQL with the in-process coordinator there are no
// peers to find: the cache is coherent only while the server is alone on
// the database, and the server says so.

// setupCoherence chooses the engine's invalidator for cache c (New).
func (s *Server) setupCoherence(nc *namespace.Config, c *cache.Cache) error {
	if s.pebble != nil {
		return nil // the local invalidator (namespace.New's default)
	}
	if !s.cfg.sharedCoordinator() {
		s.log.Warn("the metadata cache is coherent only while this server is the only one on the store: " +
			"servers invalidate each other's caches only with a shared coordinator (--coordinator etcd://...)")
		return nil
	}
	lc := loop.DefaultConfig()
	lc.Cache, lc.Store = c, s.store
	lc.DisableInvalidation = s.cfg.CoherenceDisableInvalidation
	lc.Deployment, lc.Deployments = s.cfg.Deployment, s.cfg.Deployments
	lc.Logger, lc.Registerer = s.log, s.reg
	l, err := loop.New(lc)
	if err != nil {
		return fmt.Errorf("server: coherence: %w", err)
	}
	s.coherence = l
	nc.Invalidator = l.Invalidator()
	nc.CacheServing = l.Serving
	return nil
}

// startCoherence starts the loop once the server is a member (Start).
func (s *Server) startCoherence() {
	if s.coherence == nil {
		return
	}
	s.coherence.Start(s.coord, memberSessions{s.member})
	// Writes wait for the loop's first view; give it a moment so that the
	// first requests do not all retry (not needed for correctness).
	// Polled every millisecond: the view usually comes within a few, and
	// every one waited here is a millisecond of a platform instance's cold
	// start.
	deadline := time.Now().Add(2 * time.Second)
	for !s.coherence.Serving() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// memberSessions gives the loop this server's sessions.
type memberSessions struct{ m *membership }

func (ms memberSessions) Current() (coordinator.Session, <-chan struct{}) { return ms.m.current() }
