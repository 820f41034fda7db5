package namespace

import "github.com/nimbus-fs/nimbus/store"

// rowTable is a transaction's view of the inode rows it touched: each row
// read or written (nil: absent) and the lock mode it was read in. An
// operation touches a handful of rows (a rename of two depth-7 paths, about
// ten), which a short slice finds faster than a map hashes a (parent, name)
// key; past rowTableLinear rows (a recursive delete, a content summary) an
// index takes over.
type rowTable struct {
	list []rowEntry
	idx  map[hintKey]int // nil until the list outgrows rowTableLinear
	buf  [12]rowEntry    // the list's first entries, without an allocation of their own
}

type rowEntry struct {
	hk   hintKey
	n    *store.Inode // nil: absent, or only locked so far
	mode store.Mode   // ReadCommitted when never locked
	read bool         // beside mode: one word for both (the table's entries live in tx)
	// orig is the row as first read from the store (nil: absent), before
	// this transaction changed it, when read is set; kept only while the
	// engine computes invalidation targets (invalidate.go).
	orig *store.Inode
}

const rowTableLinear = 16

func (r *rowTable) find(hk hintKey) int {
	if r.idx != nil {
		if i, ok := r.idx[hk]; ok {
			return i
		}
		return -1
	}
	for i := range r.list {
		if r.list[i].hk == hk {
			return i
		}
	}
	return -1
}

func (r *rowTable) entry(hk hintKey) *rowEntry {
	if i := r.find(hk); i >= 0 {
		return &r.list[i]
	}
	if r.list == nil {
		r.list = r.buf[:0]
	}
	r.list = append(r.list, rowEntry{hk: hk})
	switch {
	case r.idx != nil:
		r.idx[hk] = len(r.list) - 1
	case len(r.list) > rowTableLinear:
		r.idx = make(map[hintKey]int, 2*len(r.list))
		for i := range r.list {
			r.idx[r.list[i].hk] = i
		}
	}
	return &r.list[len(r.list)-1]
}

// get returns the row of hk (nil if absent or never read).
func (r *rowTable) get(hk hintKey) *store.Inode {
	if i := r.find(hk); i >= 0 {
		return r.list[i].n
	}
	return nil
}

// set records n (nil: absent) as hk's row.
func (r *rowTable) set(hk hintKey, n *store.Inode) {
	r.entry(hk).n = n
}

// setRead records n (nil: absent) as hk's row, read from the store; the
// first read of hk is kept as its original (orig) when keep is set: a copy,
// since operations change the rows they read in place before they put them.
func (r *rowTable) setRead(hk hintKey, n *store.Inode, keep bool) {
	e := r.entry(hk)
	e.n = n
	if keep && !e.read {
		e.read = true
		if n != nil {
			c := *n
			e.orig = &c
		}
	}
}

// orig returns hk's row as first read from the store, and whether it was
// read at all.
func (r *rowTable) orig(hk hintKey) (*store.Inode, bool) {
	if i := r.find(hk); i >= 0 {
		return r.list[i].orig, r.list[i].read
	}
	return nil, false
}

// mode returns the mode hk was locked in (ReadCommitted if never).
func (r *rowTable) mode(hk hintKey) store.Mode {
	if i := r.find(hk); i >= 0 {
		return r.list[i].mode
	}
	return store.ReadCommitted
}

// setMode records that hk is locked in m.
func (r *rowTable) setMode(hk hintKey, m store.Mode) { r.entry(hk).mode = m }
