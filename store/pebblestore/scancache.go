package pebblestore

import (
	"bytes"
	"hash/maphash"
	"sort"
	"sync"

	"github.com/nimbus-fs/nimbus/store"
)

// scanCache keeps whole partitions (store.PartitionOf: a directory's
// entries, a file's content chunks or blocks) that scans read from Pebble,
// so that listing a directory again costs a map lookup and a binary search
// instead of an iterator merged over every memtable and level. A scan is
// answered from the cache when its whole range lies inside one cached
// partition, at any start (the later pages of a listing) and any limit.
//
// It follows rowCache's rule, per shard: a partition read from Pebble is
// installed only if no commit touched the shard since the scan began and
// none is under way; a commit drops the partitions of its keys and bumps
// their shards' generations before its batch becomes visible and again
// after. So once Commit returns no scan sees the old rows from the cache.
// Nothing is written through: the next scan of a changed partition reads
// Pebble and installs it again.
//
// A cached partition is immutable: scans use it without the shard's lock,
// and a commit replaces it (drops it) instead of changing it.
//
// Every commit marks the partitions of the rows it writes, so that lookup is
// on the write path of every operation: a shard maps the 64-bit hash of a
// partition id (which also picked the shard) to the partition, one hash per
// lookup and a uint64 map key, as rowCache does. Two ids with one hash share
// a slot: the later evicts the earlier, and a lookup whose id differs from
// the slot's is a miss.
type scanCache struct {
	seed       maphash.Seed
	maxRows    int   // a partition with more rows is not cached
	shardBytes int64 // memory budget of one shard
	shards     [64]scanShard
}

type scanShard struct {
	mu      sync.RWMutex
	gen     uint64
	pending int // commits between their two marks
	bytes   int64
	m       map[uint64]*partition
}

// partition is every row of one partition at one moment, in key order.
// keys[i] and vals[i] are carved from one slab.
type partition struct {
	id         store.PartitionID
	keys, vals [][]byte
	size       int64
}

// rowOverhead is what a cached row costs besides its bytes: two slice
// headers. partitionOverhead is what a partition costs besides its rows (the
// struct, its map slot, the slab's and the slices' headers): an empty
// partition, such as the blocks of a small file, is not free, or a budget
// in bytes would not bound how many of them the cache keeps.
const (
	rowOverhead       = 48
	partitionOverhead = 160
)

// scanCacheMaxRows bounds the rows of a cached partition: a directory of a
// million entries is listed page by page from Pebble and never copied here.
const scanCacheMaxRows = 4096

func newScanCache(bytes int64) *scanCache {
	if bytes <= 0 {
		return nil
	}
	c := &scanCache{seed: maphash.MakeSeed(), maxRows: scanCacheMaxRows}
	c.shardBytes = bytes / int64(len(c.shards))
	for i := range c.shards {
		c.shards[i].m = make(map[uint64]*partition)
	}
	return c
}

func (c *scanCache) shard(p *store.PartitionID) (*scanShard, uint64) {
	x := maphash.Bytes(c.seed, p[:])
	return &c.shards[x%uint64(len(c.shards))], x
}

// get returns the cached rows of p, and the shard's generation to pass to
// fill on a miss.
func (c *scanCache) get(p store.PartitionID) (part *partition, gen uint64) {
	s, x := c.shard(&p)
	s.mu.RLock()
	part, gen = s.m[x], s.gen
	s.mu.RUnlock()
	if part != nil && part.id != p {
		part = nil // another partition holds the slot
	}
	return part, gen
}

// fill installs part as partition p, read at generation gen.
func (c *scanCache) fill(p store.PartitionID, part *partition, gen uint64) {
	if part.size > c.shardBytes {
		return
	}
	part.id = p
	s, x := c.shard(&p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.pending > 0 {
		return // a commit touched the shard since the scan began, or is under way
	}
	if old := s.m[x]; old != nil {
		delete(s.m, x)
		s.bytes -= old.size
	}
	for q, old := range s.m { // evict arbitrary partitions until it fits
		if s.bytes+part.size <= c.shardBytes {
			break
		}
		delete(s.m, q)
		s.bytes -= old.size
	}
	s.m[x] = part
	s.bytes += part.size
}

// beginCommit drops the partitions of keys and keeps fills out of their
// shards until endCommit.
func (c *scanCache) beginCommit(keys []written) {
	c.mark(keys, func(s *scanShard, x uint64) {
		s.pending++
		if old := s.m[x]; old != nil { // whichever partition holds the slot: dropping is always safe
			delete(s.m, x)
			s.bytes -= old.size
		}
	})
}

// endCommit ends what beginCommit started, once the batch is visible (or
// failed).
func (c *scanCache) endCommit(keys []written) {
	c.mark(keys, func(s *scanShard, _ uint64) { s.pending-- })
}

// mark bumps the generation of the shard of each partitioned key and runs f
// on it under the shard's lock.
func (c *scanCache) mark(keys []written, f func(s *scanShard, x uint64)) {
	for _, w := range keys {
		p, ok := store.PartitionOf(w.key)
		if !ok {
			continue
		}
		s, x := c.shard(&p)
		s.mu.Lock()
		s.gen++
		f(s, x)
		s.mu.Unlock()
	}
}

// scan calls fn for the rows with start <= key < end, at most limit of them
// (limit <= 0: no limit), as Txn.Scan does.
func (p *partition) scan(start, end []byte, limit int, fn func(k, v []byte) bool) {
	i := sort.Search(len(p.keys), func(i int) bool { return bytes.Compare(p.keys[i], start) >= 0 })
	for n := 0; i < len(p.keys) && bytes.Compare(p.keys[i], end) < 0; i++ {
		n++
		if !fn(p.keys[i], p.vals[i]) || (limit > 0 && n >= limit) {
			return
		}
	}
}

// partitionBuilder copies the rows of a scan that reads a whole partition,
// until the partition turns out too big to cache.
type partitionBuilder struct {
	maxRows int
	buf     []byte
	ends    []int // per row, where its key and its value end in buf
	dropped bool
}

// add copies one row; it returns false (and drops what it had) once the
// partition is not worth caching.
func (b *partitionBuilder) add(k, v []byte) bool {
	if b.dropped {
		return false
	}
	if len(b.ends)/2 >= b.maxRows || len(v) > maxCachedValue {
		b.dropped, b.buf, b.ends = true, nil, nil
		return false
	}
	b.buf = append(b.buf, k...)
	b.ends = append(b.ends, len(b.buf))
	b.buf = append(b.buf, v...)
	b.ends = append(b.ends, len(b.buf))
	return true
}

// finish returns the partition built, in one slab of its exact size; nil if
// it was dropped.
func (b *partitionBuilder) finish() *partition {
	if b.dropped {
		return nil
	}
	rows := len(b.ends) / 2
	slab := make([]byte, len(b.buf))
	copy(slab, b.buf)
	p := &partition{keys: make([][]byte, rows), vals: make([][]byte, rows)}
	at := 0
	for i := 0; i < rows; i++ {
		ke, ve := b.ends[2*i], b.ends[2*i+1]
		p.keys[i] = slab[at:ke:ke]
		p.vals[i] = slab[ke:ve:ve]
		at = ve
	}
	p.size = partitionOverhead + int64(len(slab)) + int64(rows)*rowOverhead
	return p
}
