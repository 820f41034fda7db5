package cache

import "sync/atomic"

// Eviction is CLOCK (second chance), the usual approximation of LRU: a
// lookup sets its entry's reference bit under the read lock, and the hand,
// moving over the slab under the write lock, clears set bits and evicts the
// first entry it finds clear. Only leaves are evicted: a directory whose
// children are cached waits until they have gone (a child is cached only
// while its parent is, and evicting "/" would empty the cache). Exact LRU would move an entry to the front of
// a list on every hit, which needs the write lock on the read path: with
// CLOCK, parallel lookups share the read lock (BenchmarkGetParallel).
//
// Entries and listing pages have one hand each; eviction steps both in turn
// and takes the first victim either finds, so each kind gives up what has not
// been used since its hand last passed.

// evictLocked evicts until the cache is within its budget. Write lock held.
func (c *Cache) evictLocked() {
	for c.mu.bytes > c.cfg.MaxBytes && (c.mu.nEnt > 0 || c.mu.nPages > 0) {
		if c.mu.nPages > 0 && c.stepPagesLocked() {
			continue
		}
		if c.mu.nEnt > 0 {
			c.stepEntriesLocked()
		}
	}
}

// stepEntriesLocked moves the entry hand one occupied slot on, evicting it
// if its bit is clear.
func (c *Cache) stepEntriesLocked() bool {
	for range c.mu.entries {
		i := c.mu.hand
		if c.mu.hand++; c.mu.hand >= len(c.mu.entries) {
			c.mu.hand = 0
		}
		e := &c.mu.entries[i]
		if e.typ == 0 || e.child >= 0 {
			continue // a free slot, or a directory whose children are cached: leaves go first
		}
		if atomic.LoadUint32(&e.ref) != 0 {
			atomic.StoreUint32(&e.ref, 0)
			return false
		}
		n := c.dropLocked(int32(i))
		c.m.evictEntry.Add(float64(n))
		return true
	}
	return false
}

func (c *Cache) stepPagesLocked() bool {
	for range c.mu.pages {
		p := c.mu.pgHand
		if c.mu.pgHand++; c.mu.pgHand >= len(c.mu.pages) {
			c.mu.pgHand = 0
		}
		pg := &c.mu.pages[p]
		if pg.dir < 0 {
			continue
		}
		if atomic.LoadUint32(&pg.ref) != 0 {
			atomic.StoreUint32(&pg.ref, 0)
			return false
		}
		c.unlinkPageLocked(int32(p))
		c.m.evictListing.Inc()
		return true
	}
	return false
}
