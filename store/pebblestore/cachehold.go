package pebblestore

import (
	"sync"

	"github.com/nimbus-fs/nimbus/store"
)

var _ store.CacheHolder = (*Store)(nil)

// cacheHold is the state of HoldCaches.
type cacheHold struct {
	mu      sync.Mutex
	n       int    // holds not yet released
	release func() // gives back the reservation of the first hold; nil when none was made
}

// HoldCaches implements store.CacheHolder for Pebble's block cache. The
// first hold reserves (Pebble's Cache.Reserve, which shrinks the cache's
// capacity without allocating, as Pebble does for its memtables) the
// cache's room above what it holds now plus Options.CacheHoldMargin, so that the blocks read under the hold replace
// blocks in the cache's memory instead of adding to it; the last release
// gives the capacity back. The block cache lives outside the Go heap and is
// empty after a start, so without the hold a recursive delete's walk over a
// tree just written fills it with the tree's blocks, all dead once the
// delete commits, in proportion to the tree up to the cache's size
// (measured by `nimbus bench subtree`: docs/BENCHMARKS.md, "Subtree
// operations").
// The row and scan caches need no hold: what a subtree operation puts in
// them it replaces or removes as it writes. On a closed or failed store the
// hold does nothing.
func (s *Store) HoldCaches() func() {
	if s.acquire() != nil {
		return func() {}
	}
	defer s.release()
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	if h.n == 1 && s.cache != nil {
		// Pebble reserves each memtable's size, and what flushes still
		// hold, in the same cache: the blocks have what is left.
		m := s.db.Metrics()
		memtables := int64(m.MemTable.Size + m.MemTable.ZombieSize)
		if room := s.cache.MaxSize() - memtables - s.cache.Size() - s.opts.CacheHoldMargin; room > 0 {
			h.release = s.cache.Reserve(int(room))
			s.metrics.cacheHeld.Set(float64(room))
		}
	}
	var once sync.Once
	return func() { once.Do(s.unhold) }
}

// unhold releases one hold.
func (s *Store) unhold() {
	if s.acquire() != nil {
		return // closed: the cache went with the database
	}
	defer s.release()
	h := &s.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n--
	if h.n == 0 && h.release != nil {
		h.release()
		h.release = nil
		s.metrics.cacheHeld.Set(0)
	}
}
