package namespace

import (
	"hash/maphash"
	"sync"

	"github.com/nimbus-fs/nimbus/internal/hashtab"
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
//
// Since a wrong hint costs a retry and nothing else, the cache keeps no keys:
// a shard maps the 64-bit hash of (parent, name), which also picked the
// shard, to the id. Two keys with one hash share a slot, and the later one's
// id is what the other is told; the lock phase catches that as it catches any
// stale hint (validate: every key after the first is built from an id that
// the row before it was checked to carry). In exchange an entry is 16 bytes
// without a pointer: a lookup does not chase a pointer to the name, which on
// a cache of a million entries is a CPU cache miss on every path component,
// and the collector does not scan the cache.
//
// A shard is a fixed-size set-associative table (internal/hashtab): a full
// bucket gives up one of its hints to a new one, and a day of drops and puts
// does not lengthen lookups, as it does in a Go map.
type hints struct {
	seed   maphash.Seed
	shards [64]hintShard
}

type hintShard struct {
	mu sync.RWMutex
	t  hashtab.Table[uint64]
}

func newHints(maxEntries int) *hints {
	h := &hints{seed: maphash.MakeSeed()}
	for i := range h.shards {
		h.shards[i].t.Init(maxEntries/len(h.shards) + 1)
	}
	return h
}

func (h *hints) hash(parent uint64, name string) uint64 {
	x := maphash.String(h.seed, name) ^ parent*0x9e3779b97f4a7c15
	x ^= x >> 31 // the shard comes from the low bits: mix the parent's into them
	return x
}

func (h *hints) shard(x uint64) *hintShard { return &h.shards[x%uint64(len(h.shards))] }

func (h *hints) get(parent uint64, name string) (uint64, bool) {
	x := h.hash(parent, name)
	s := h.shard(x)
	s.mu.RLock()
	id, ok := s.t.Get(x)
	s.mu.RUnlock()
	return id, ok
}

func (h *hints) put(parent uint64, name string, id uint64) {
	x := h.hash(parent, name)
	s := h.shard(x)
	s.mu.RLock()
	cur, ok := s.t.Get(x)
	s.mu.RUnlock()
	if ok && cur == id {
		return // the common case: every read of a directory confirms its hint
	}
	s.mu.Lock()
	s.t.Put(x, id) // may evict another hint of the bucket: hints are cheap to rebuild
	s.mu.Unlock()
}

// drop forgets the hint of (parent, name), or whichever key shares its slot.
func (h *hints) drop(parent uint64, name string) {
	x := h.hash(parent, name)
	s := h.shard(x)
	s.mu.Lock()
	s.t.Delete(x)
	s.mu.Unlock()
}
