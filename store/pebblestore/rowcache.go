package pebblestore

import (
	"hash/maphash"
	"sync"
)

// rowCache keeps recently read rows in memory, so that the hot rows of a
// namespace (the directories every path goes through) are read without a
// seek through Pebble's memtable and levels. It caches absence too.
//
// Correctness rests on one rule: a value read from Pebble is installed only
// if no commit touched its shard since the read began and none is under way.
// A commit marks its keys' shards before its batch becomes visible (dropping
// the keys, bumping the shard's generation and counting itself as pending)
// and again after (bumping the generation, no longer pending). So
//   - a fill that read the old value before the commit finds the generation
//     changed and is dropped;
//   - no fill at all is installed while a commit is pending, so two readers
//     that read the old and the new value during the commit cannot leave the
//     old one behind (the race the test checks).
//
// Once Commit returns, no reader can see the old value from the cache, and a
// reader that saw the new value from Pebble cannot be followed by one that
// sees the old value from the cache. Values handed out are shared: callers
// must not modify them (the store.Txn contract says so).
type rowCache struct {
	seed     maphash.Seed
	perShard int
	shards   [64]rowShard
}

// A shard maps the 64-bit hash of a key (which also picked the shard) to
// the key and its row: one hash per lookup and a uint64 map key. Two keys
// with one hash share a slot: the later evicts the earlier, and a lookup
// whose key differs from the slot's is a miss.
type rowShard struct {
	mu      sync.RWMutex
	gen     uint64
	pending int // commits between their two marks
	m       map[uint64]slot
}

// A slot holds the key and the value in one allocation, key first: one
// pointer for the collector to follow instead of two, and the compare of
// the key brings the start of the value into the CPU cache with it.
type slot struct {
	kv      []byte // the key, then the value (nothing when absent)
	klen    uint32
	present bool
}

func (e *slot) key() []byte { return e.kv[:e.klen] }

func (e *slot) row() cachedRow {
	if !e.present {
		return cachedRow{}
	}
	// Non-nil even when empty (an empty value is a row), and capped, so that
	// an append by a careless caller cannot write into the slab.
	return cachedRow{v: e.kv[e.klen:len(e.kv):len(e.kv)], present: true}
}

// newSlot copies k and v (nil: absent) into one slab.
func newSlot(k, v []byte, present bool) slot {
	kv := make([]byte, len(k)+len(v))
	copy(kv, k)
	copy(kv[len(k):], v)
	return slot{kv: kv, klen: uint32(len(k)), present: present}
}

type cachedRow struct {
	v       []byte
	present bool
}

// maxCachedValue bounds the size of a cached value: inode rows are small,
// content chunks are not worth the memory.
const maxCachedValue = 1 << 10

func newRowCache(entries int) *rowCache {
	if entries <= 0 {
		return nil
	}
	c := &rowCache{seed: maphash.MakeSeed(), perShard: entries/64 + 1}
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]slot)
	}
	return c
}

func (c *rowCache) shard(k []byte) (*rowShard, uint64) {
	x := maphash.Bytes(c.seed, k)
	return &c.shards[x%uint64(len(c.shards))], x
}

// get returns the cached row of k, and the shard's generation to pass to
// fill on a miss.
func (c *rowCache) get(k []byte) (row cachedRow, hit bool, gen uint64) {
	s, x := c.shard(k)
	s.mu.RLock()
	e, ok := s.m[x]
	gen = s.gen
	s.mu.RUnlock()
	if !ok || string(e.key()) != string(k) {
		return cachedRow{}, false, gen
	}
	return e.row(), true, gen
}

// fill installs v (nil: absent) for k, read at generation gen.
func (c *rowCache) fill(k, v []byte, gen uint64) {
	if len(v) > maxCachedValue {
		return
	}
	s, x := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.pending > 0 {
		return // a commit touched the shard since the read began, or is under way
	}
	if len(s.m) >= c.perShard {
		for old := range s.m { // evict an arbitrary entry
			delete(s.m, old)
			break
		}
	}
	s.m[x] = newSlot(k, v, v != nil)
}

// written is a row a transaction wrote: its key, the slot endCommit may
// install in the cache (its new value, or absence), and whether it may.
// key is the slot's own key, so that a write costs one copy of its key and
// value, shared by the transaction and the cache.
type written struct {
	key  []byte
	slot slot
	keep bool
}

// newWritten records a write of k: present with value v, or a deletion;
// keep says whether endCommit may install it.
func newWritten(k, v []byte, present, keep bool) written {
	e := newSlot(k, v, present)
	return written{key: e.key(), slot: e, keep: keep}
}

// beginCommit marks keys as being committed: they are dropped and no fill
// is installed in their shards until endCommit.
func (c *rowCache) beginCommit(keys []written) {
	for _, w := range keys {
		s, x := c.shard(w.key)
		s.mu.Lock()
		s.gen++
		s.pending++
		delete(s.m, x) // whichever key holds the slot: dropping is always safe
		s.mu.Unlock()
	}
}

// endCommit ends what beginCommit started, once the batch is visible (or
// failed). A row marked keep is installed with its new value (write-through):
// the committer holds its lock, so no other commit of that key can be under
// way, and a reader that read the old value from Pebble before now finds the
// generation changed and drops its fill. The rows not kept are dropped.
func (c *rowCache) endCommit(keys []written) {
	for _, w := range keys {
		s, x := c.shard(w.key)
		s.mu.Lock()
		s.gen++
		s.pending--
		if w.keep && len(s.m) < c.perShard {
			s.m[x] = w.slot
		} else {
			delete(s.m, x)
		}
		s.mu.Unlock()
	}
}
