// Package hashtab is a fixed-size, set-associative table keyed by 64-bit
// hashes: the slot store under Nimbus's in-memory caches (the row and scan
// caches in front of Pebble, the inode hint cache).
//
// A cache that drops and refills keys all day is what Go's map does worst.
// A map's deletions leave tombstones, and a lookup of a key that is absent
// (most of a cache's drops, and every miss) probes until it finds an empty
// slot; after hours of churn a full map has few empty slots left, and a
// lookup walks many groups, each a CPU cache miss once the map outgrows the
// CPU's caches. In a server that had made and deleted a few million files,
// that probing (the map's group match and hash) took 18% of the CPU a delete
// cost.
//
// A Table instead has a fixed number of buckets of Ways slots, chosen once
// from the capacity. A hash lives in one bucket or nowhere: a lookup reads
// one line of tags and at most one value, whatever the table went through,
// and a deletion leaves an empty slot, not a tombstone. When a bucket is full
// a new hash takes the place of one of its occupants (a conflict miss, as in
// a CPU cache); nothing ever grows or rehashes.
//
// Tables are not safe for concurrent use: callers shard them and lock.
package hashtab

// Ways is the number of slots in a bucket: its tags fill one 64-byte line.
const Ways = 8

// Table maps 64-bit hashes to values. The zero hash shares its slot with
// hash 1 (tags use 0 for empty): callers that keep keys check them, as they
// must for any two keys of one hash.
type Table[V any] struct {
	tags    []uint64 // per bucket, Ways tags; 0 marks an empty slot
	vals    []V
	buckets uint64
	n       int
	victim  uint32 // rotates the way a full bucket gives up
	hand    int    // where EvictOther's sweep goes on
}

// New returns a table of at least capacity slots (and at least one bucket).
func New[V any](capacity int) *Table[V] {
	t := new(Table[V])
	t.Init(capacity)
	return t
}

// Init makes t an empty table of at least capacity slots, in place.
func (t *Table[V]) Init(capacity int) {
	b := (capacity + Ways - 1) / Ways
	if b < 1 {
		b = 1
	}
	*t = Table[V]{tags: make([]uint64, b*Ways), vals: make([]V, b*Ways), buckets: uint64(b)}
}

func tag(x uint64) uint64 {
	if x == 0 {
		return 1
	}
	return x
}

// bucket returns the first slot of x's bucket. The bucket comes from the
// hash's high 32 bits, by multiplication instead of a modulo: callers pick
// their shard from the low bits, so the two choices stay independent.
func (t *Table[V]) bucket(x uint64) int {
	return int((x>>32)*t.buckets>>32) * Ways
}

// find returns the slot holding x, or -1.
func (t *Table[V]) find(x uint64) int {
	x = tag(x)
	b := t.bucket(x)
	tags := t.tags[b : b+Ways : b+Ways]
	for i, g := range tags {
		if g == x {
			return b + i
		}
	}
	return -1
}

// Get returns the value of x.
func (t *Table[V]) Get(x uint64) (v V, ok bool) {
	if i := t.find(x); i >= 0 {
		return t.vals[i], true
	}
	return v, false
}

// Delete empties the slot of x and returns what it held.
func (t *Table[V]) Delete(x uint64) (old V, ok bool) {
	i := t.find(x)
	if i < 0 {
		return old, false
	}
	return t.clear(i), true
}

func (t *Table[V]) clear(i int) V {
	var zero V
	old := t.vals[i]
	t.tags[i], t.vals[i] = 0, zero // drop the reference for the collector
	t.n--
	return old
}

// slot returns x's tag and its bucket's first slot, and the slot holding x
// (found) or else the bucket's first empty slot (-1 if it is full).
func (t *Table[V]) slot(x uint64) (tx uint64, b, i int, found bool) {
	tx = tag(x)
	b = t.bucket(tx)
	i = -1
	for j := b; j < b+Ways; j++ {
		switch t.tags[j] {
		case tx:
			return tx, b, j, true
		case 0:
			if i < 0 {
				i = j
			}
		}
	}
	return tx, b, i, false
}

// Put sets x to v. If x's bucket is full, v takes the place of one of its
// occupants, which is returned (evicted true) so that the caller can account
// for it. A value x already had is replaced and returned the same way.
func (t *Table[V]) Put(x uint64, v V) (old V, evicted bool) {
	tx, b, i, found := t.slot(x)
	if found {
		old, t.vals[i] = t.vals[i], v
		return old, true
	}
	if i < 0 {
		t.victim++
		i = b + int(t.victim%Ways)
		old, evicted = t.clear(i), true
	}
	t.tags[i], t.vals[i] = tx, v
	t.n++
	return old, evicted
}

// PutIfRoom sets x to v only if that takes nothing out: x's bucket has an
// empty slot, or x is in it already (its old value is then returned, evicted
// true). It reports whether v went in.
func (t *Table[V]) PutIfRoom(x uint64, v V) (old V, evicted, put bool) {
	tx, _, i, found := t.slot(x)
	switch {
	case found:
		old, t.vals[i] = t.vals[i], v
		return old, true, true
	case i < 0:
		return old, false, false
	}
	t.tags[i], t.vals[i] = tx, v
	t.n++
	return old, false, true
}

// EvictOther takes out one value other than x's and returns it, sweeping the
// slots in turn from where the last sweep stopped (so that a caller keeping a
// byte budget evicts in amortized constant time). It returns false if x's
// value is the only one.
func (t *Table[V]) EvictOther(x uint64) (old V, ok bool) {
	x = tag(x)
	for range t.tags {
		i := t.hand
		if t.hand++; t.hand == len(t.tags) {
			t.hand = 0
		}
		if g := t.tags[i]; g != 0 && g != x {
			return t.clear(i), true
		}
	}
	return old, false
}

// Len returns the number of values held.
func (t *Table[V]) Len() int { return t.n }

// Cap returns the number of slots.
func (t *Table[V]) Cap() int { return len(t.tags) }
