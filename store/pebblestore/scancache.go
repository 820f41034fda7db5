package pebblestore

import (
	"bytes"
	"hash/maphash"
	"sort"

	"github.com/nimbus-fs/nimbus/store"
)

// scanCache keeps whole partitions (store.PartitionOf: a directory's
// entries, a file's content chunks or blocks) that scans read from Pebble,
// so that listing a directory again costs a map lookup and a binary search
// instead of an iterator merged over every memtable and level. A scan is
// answered from the cache when its whole range lies inside one cached
// partition, at any start (the later pages of a listing) and any limit.
//
// It keeps coherent with commits by cacheShard's rule: a commit drops the
// partitions of its keys, and a partition read from Pebble while a commit
// touched its shard is not installed. Nothing is written through: the next
// scan of a changed partition reads Pebble and installs it again. Every
// commit marks the partitions of the rows it writes, so the shard lookup is
// on the write path of every operation.
//
// A cached partition is immutable: scans use it without the shard's lock,
// and a commit replaces it (drops it) instead of changing it.
type scanCache struct {
	seed       maphash.Seed
	maxRows    int   // a partition with more rows is not cached
	shardBytes int64 // memory budget of one shard
	shards     [64]cacheShard[*partition]
}

// partition is every row of one partition at one moment, in key order.
// keys[i] and vals[i] are carved from one slab.
type partition struct {
	id         store.PartitionID
	keys, vals [][]byte
	size       int64
}

// cost is what the partition holds in memory, the budget being bytes.
func (p *partition) cost() int64 { return p.size }

// rowOverhead is what a cached row costs besides its bytes: two slice
// headers. partitionOverhead is what a partition costs besides its rows (the
// struct, its table slot, the slab's and the slices' headers): an empty
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
		// Room for a shard's budget of empty partitions, the cheapest kind.
		c.shards[i].init(int(c.shardBytes / partitionOverhead))
	}
	return c
}

func (c *scanCache) shard(p *store.PartitionID) (*cacheShard[*partition], uint64) {
	x := maphash.Bytes(c.seed, p[:])
	return &c.shards[x%uint64(len(c.shards))], x
}

// get returns the cached rows of p, and the shard's generation to pass to
// fill on a miss.
func (c *scanCache) get(p store.PartitionID) (part *partition, gen uint64) {
	s, x := c.shard(&p)
	part, _, gen = s.get(x)
	if part != nil && part.id != p {
		part = nil // another partition holds the slot
	}
	return part, gen
}

// fill installs part as partition p, read at generation gen.
func (c *scanCache) fill(p store.PartitionID, part *partition, gen uint64) {
	part.id = p
	s, x := c.shard(&p)
	s.fill(x, gen, c.shardBytes, func() *partition { return part })
}

// beginCommit drops the partitions of keys and keeps fills out of their
// shards until endCommit.
func (c *scanCache) beginCommit(keys []written) {
	for _, w := range keys {
		if p, ok := store.PartitionOf(w.key); ok {
			s, x := c.shard(&p)
			s.begin(x)
		}
	}
}

// endCommit ends what beginCommit started, once the batch is visible (or
// failed).
func (c *scanCache) endCommit(keys []written) {
	for _, w := range keys {
		if p, ok := store.PartitionOf(w.key); ok {
			s, x := c.shard(&p)
			s.end(x, nil, false, c.shardBytes)
		}
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
