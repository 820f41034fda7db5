package pebblestore

import (
	"sync"

	"github.com/nimbus-fs/nimbus/internal/hashtab"
)

// cacheShard is one shard of a cache in front of Pebble (the row cache and
// the scan cache), and the rule that keeps such a cache coherent with the
// commits that change what it holds:
//
//   - a value read from Pebble is installed only if no commit touched the
//     shard since the read began (the generation is unchanged) and none is
//     under way (nothing is pending);
//   - a commit marks the shard of each key it writes before its batch
//     becomes visible (dropping the key's slot, bumping the generation and
//     counting itself as pending) and again after (bumping the generation, no
//     longer pending, and installing the new value if the cache keeps
//     written values).
//
// So a fill that read the old value before the commit finds the generation
// changed and is dropped, and no fill is installed while a commit is
// pending, so two readers that read the old and the new value during the
// commit cannot leave the old one behind. Once Commit returns no reader sees
// the old value from the cache, and a reader that saw the new value from
// Pebble cannot be followed by one that sees the old value from the cache.
//
// Slots are keyed by a 64-bit hash, which also picked the shard: one hash per
// lookup, in a fixed-size set-associative table (internal/hashtab) that a day
// of drops and fills does not slow down, as it does a Go map. Two keys with
// one hash share a slot: the later evicts the earlier, and the cache checks
// the key of what it finds. Each value costs what its cost method says, and a
// shard holds at most budget: a fill takes a slot in its hash's bucket
// (evicting one of the bucket's values if all are taken), then evicts other
// values in turn until the shard is within budget; a commit's install only
// takes free room (end says why).
type cacheShard[V costed] struct {
	mu      sync.RWMutex
	gen     uint64
	pending int // commits between their two marks
	used    int64
	t       hashtab.Table[V]
}

// costed is what a cache shard holds: a value that knows what it costs
// against the shard's budget.
type costed interface{ cost() int64 }

// init makes the shard empty, with room for slots values.
func (s *cacheShard[V]) init(slots int) { s.t.Init(slots) }

// get returns the value in slot x, and the generation to pass to fill on a
// miss.
func (s *cacheShard[V]) get(x uint64) (v V, ok bool, gen uint64) {
	s.mu.RLock()
	v, ok = s.t.Get(x)
	gen = s.gen
	s.mu.RUnlock()
	return v, ok, gen
}

// fill installs the value made by mk in slot x, read at generation gen,
// unless a commit touched the shard since (mk is then not called).
func (s *cacheShard[V]) fill(x uint64, gen uint64, budget int64, mk func() V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.pending > 0 {
		return // a commit touched the shard since the read began, or is under way
	}
	s.put(x, mk(), budget)
}

// begin is a commit's first mark of slot x: dropped, and no fill installed
// in the shard until end.
func (s *cacheShard[V]) begin(x uint64) {
	s.mu.Lock()
	s.gen++
	s.pending++
	s.drop(x) // whichever key holds the slot: dropping is always safe
	s.mu.Unlock()
}

// end is the commit's second mark, once its batch is visible (or failed):
// slot x holds v if keep and v fits in what the shard has free, and is
// dropped otherwise. Installing v is safe for the committer alone, which
// holds the lock of its key: no other commit of that key can be under way,
// and a reader that read the old value from Pebble before now finds the
// generation changed and drops its fill. Nothing is evicted for v: end runs
// for every row of every commit, and an eviction's sweep would cost more
// than the miss it saves (a rewritten row fits in the room its old value
// leaves).
func (s *cacheShard[V]) end(x uint64, v V, keep bool, budget int64) {
	s.mu.Lock()
	s.gen++
	s.pending--
	s.drop(x)
	if keep {
		if c := v.cost(); s.used+c <= budget {
			if _, _, put := s.t.PutIfRoom(x, v); put { // x was dropped: nothing is replaced
				s.used += c
			}
		}
	}
	s.mu.Unlock()
}

// put installs v in slot x, evicting until it fits; a value bigger than the
// whole budget is not installed. The caller holds mu.
func (s *cacheShard[V]) put(x uint64, v V, budget int64) {
	c := v.cost()
	if c > budget {
		return
	}
	if old, evicted := s.t.Put(x, v); evicted {
		s.used -= old.cost()
	}
	s.used += c
	for s.used > budget {
		old, ok := s.t.EvictOther(x)
		if !ok {
			break // cannot happen: v alone fits the budget
		}
		s.used -= old.cost()
	}
}

// drop empties slot x. The caller holds mu.
func (s *cacheShard[V]) drop(x uint64) {
	if old, ok := s.t.Delete(x); ok {
		s.used -= old.cost()
	}
}
