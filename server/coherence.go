package server

import (
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence/loop"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/namespace"
)

// Cache coherence between the servers of one shared store. On a
// PostgreSQL store with an etcd coordinator every server runs the
// coherence loop (package coherence/loop), with a cache or without: the
// engine's writes invalidate through it (INV to every live server that
// caches, the write commits once each has acknowledged or left the
// membership, and only after the store's fence and floor check), and a
// cache answers only while the loop says it is Serving. A server without
// a cache joins the coordinator saying so (coordinator.Member.NoCache):
// nobody sends it an INV, and its own writes invalidate the others like
// any member's. Were it outside the loop, its writes would leave the
// others' caches stale, and their INVs to it would never be answered.
// On the embedded store the server is alone, and the engine's local
// invalidator is enough. On PostgreSQL with the in-process coordinator
// there are no peers to find: a cache is coherent only while the server
// is alone on the database, and the server says so.

// setupCoherence chooses the engine's invalidator for cache c, nil when
// the server has none (New).
func (s *Server) setupCoherence(nc *namespace.Config, c *cache.Cache) error {
	if s.pebble != nil {
		return nil // the local invalidator (namespace.New's default), if any
	}
	if !s.cfg.sharedCoordinator() {
		if c != nil {
			s.log.Warn("the metadata cache is coherent only while this server is the only one on the store: " +
				"servers invalidate each other's caches only with a shared coordinator (--coordinator etcd://...)")
		}
		return nil
	}
	lc := loop.DefaultConfig()
	lc.Cache, lc.Store, lc.Auth = c, s.store, s.auth
	lc.DisableInvalidation = s.cfg.CoherenceDisableInvalidation
	lc.Deployment, lc.Deployments = s.cfg.Deployment, s.cfg.Deployments
	lc.Logger, lc.Registerer = s.log, s.reg
	l, err := loop.New(lc)
	if err != nil {
		return fmt.Errorf("server: coherence: %w", err)
	}
	s.coherence = l
	nc.Invalidator = l.Invalidator()
	if c != nil {
		nc.CacheServing = l.Serving
	}
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
