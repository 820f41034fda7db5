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

type hintShard struct {
	mu sync.RWMutex
	m  map[hintKey]uint64
}

func newHints(maxEntries int) *hints {
	h := &hints{seed: maphash.MakeSeed(), max: maxEntries/64 + 1}
	for i := range h.shards {
		h.shards[i].m = make(map[hintKey]uint64)
	}
	return h
}

func (h *hints) shard(k hintKey) *hintShard {
	var mh maphash.Hash
	mh.SetSeed(h.seed)
	var b [8]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(k.parent >> (8 * i))
	}
	mh.Write(b[:])
	mh.WriteString(k.name)
	return &h.shards[mh.Sum64()%uint64(len(h.shards))]
}

func (h *hints) get(parent uint64, name string) (uint64, bool) {
	k := hintKey{parent, name}
	s := h.shard(k)
	s.mu.RLock()
	id, ok := s.m[k]
	s.mu.RUnlock()
	return id, ok
}

func (h *hints) put(parent uint64, name string, id uint64) {
	k := hintKey{parent, name}
	s := h.shard(k)
	s.mu.RLock()
	cur, ok := s.m[k]
	s.mu.RUnlock()
	if ok && cur == id {
		return // the common case: every read of a directory confirms its hint
	}
	s.mu.Lock()
	if _, ok := s.m[k]; !ok && len(s.m) >= h.max {
		for old := range s.m { // evict an arbitrary entry: hints are cheap to rebuild
			delete(s.m, old)
			break
		}
	}
	s.m[k] = id
	s.mu.Unlock()
}

func (h *hints) drop(parent uint64, name string) {
	k := hintKey{parent, name}
	s := h.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}
