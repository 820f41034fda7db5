package namespace

import (
	"hash/maphash"
	"sync"
)

// hintKey is the primary key of an inode row.
type hintKey struct {
	parent uint64
	name   string
}

// hints is the inode hint cache of HopsFS (section 5.1): it maps the primary
// key of an inode to the inode's id, so that the keys of every component of a
// path can be computed without reading the store. A hint may be stale; the
// lock phase detects that when the row it names is missing or carries another
// id, and the operation then drops the hint and resolves from the store.
// Safe for concurrent use.
type hints struct {
	seed   maphash.Seed
	max    int // entries per shard
	shards [64]hintShard
}

// A shard maps the 64-bit hash of a key to the key and its id: one hash
// per lookup (it also picks the shard), and a uint64 map key. Two keys with
// one hash share a slot; the second evicts the first, which is a miss.
type hintShard struct {
	mu sync.RWMutex
	m  map[uint64]hintEntry
}

type hintEntry struct {
	hintKey
	id uint64
}

func newHints(maxEntries int) *hints {
	h := &hints{seed: maphash.MakeSeed(), max: maxEntries/64 + 1}
	for i := range h.shards {
		h.shards[i].m = make(map[uint64]hintEntry)
	}
	return h
}

func (h *hints) hash(k hintKey) uint64 {
	x := maphash.String(h.seed, k.name) ^ k.parent*0x9e3779b97f4a7c15
	x ^= x >> 31 // the shard comes from the low bits: mix the parent's into them
	return x
}

func (h *hints) shard(x uint64) *hintShard { return &h.shards[x%uint64(len(h.shards))] }

func (h *hints) get(parent uint64, name string) (uint64, bool) {
	k := hintKey{parent, name}
	x := h.hash(k)
	s := h.shard(x)
	s.mu.RLock()
	e, ok := s.m[x]
	s.mu.RUnlock()
	if !ok || e.hintKey != k {
		return 0, false
	}
	return e.id, true
}

func (h *hints) put(parent uint64, name string, id uint64) {
	k := hintKey{parent, name}
	x := h.hash(k)
	s := h.shard(x)
	s.mu.RLock()
	cur, ok := s.m[x]
	s.mu.RUnlock()
	if ok && cur.hintKey == k && cur.id == id {
		return // the common case: every read of a directory confirms its hint
	}
	s.mu.Lock()
	if _, ok := s.m[x]; !ok && len(s.m) >= h.max {
		for old := range s.m { // evict an arbitrary entry: hints are cheap to rebuild
			delete(s.m, old)
			break
		}
	}
	s.m[x] = hintEntry{k, id}
	s.mu.Unlock()
}

func (h *hints) drop(parent uint64, name string) {
	k := hintKey{parent, name}
	x := h.hash(k)
	s := h.shard(x)
	s.mu.Lock()
	if e, ok := s.m[x]; ok && e.hintKey == k {
		delete(s.m, x)
	}
	s.mu.Unlock()
}
