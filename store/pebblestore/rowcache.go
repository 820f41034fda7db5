package pebblestore

import "hash/maphash"

// rowCache keeps recently read rows in memory, so that the hot rows of a
// namespace (the directories every path goes through) are read without a
// seek through Pebble's memtable and levels. It caches absence too. It keeps
// coherent with commits by cacheShard's rule, and is written through: a
// commit installs the rows it wrote. Values handed out are shared: callers
// must not modify them (the store.Txn contract says so).
type rowCache struct {
	seed     maphash.Seed
	perShard int64 // rows
	shards   [64]cacheShard[slot]
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

// cost counts rows: the budget of a shard is a number of rows.
func (e slot) cost() int64 { return 1 }

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
	c := &rowCache{seed: maphash.MakeSeed(), perShard: int64(entries/64 + 1)}
	for i := range c.shards {
		c.shards[i].init(int(c.perShard))
	}
	return c
}

func (c *rowCache) shard(k []byte) (*cacheShard[slot], uint64) {
	x := maphash.Bytes(c.seed, k)
	return &c.shards[x%uint64(len(c.shards))], x
}

// get returns the cached row of k, and the shard's generation to pass to
// fill on a miss.
func (c *rowCache) get(k []byte) (row cachedRow, hit bool, gen uint64) {
	s, x := c.shard(k)
	e, ok, gen := s.get(x)
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
	s.fill(x, gen, c.perShard, func() slot { return newSlot(k, v, v != nil) })
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
		s.begin(x)
	}
}

// endCommit ends what beginCommit started, once the batch is visible (or
// failed): a row marked keep is installed with its new value (write-through),
// the others are dropped.
func (c *rowCache) endCommit(keys []written) {
	for _, w := range keys {
		s, x := c.shard(w.key)
		s.end(x, w.slot, w.keep, c.perShard)
	}
}
