package namespace

import (
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Reads through the metadata cache (Config.Cache).
//
// A stat or a listing first looks the whole path up in the cache, with the
// hot attributes of its last row and the listing page asked for, under one
// read lock (cache.Look). When everything it needs is there, it is answered
// without a store transaction, with the same permission checks and error
// messages as the store path, since it runs the same checks (existing,
// require) over rows rebuilt from the cache. Otherwise it runs as without a
// cache (one batched read of the path, hints giving the keys), and fills the
// cache with what it read, under a token taken before the read
// (cache.Begin), once its transaction committed.
//
// A cached answer is the committed state at the instant of the lookup: a
// write holds its targets in the cache from before its commit to after it
// (invalidate.go), so a lookup meanwhile misses and goes to the store, whose
// locks order it after the write.
//
// What is never answered from the cache: a path through a directory with a
// subtree flag (the store path waits for the operation, or clears a stale
// flag; such a row is never filled, nor anything below it); a path that is
// not wholly cached, a missing name included (no negative entries); a read
// of a file's content (the chunks are not cached).

// cachedPage is a listing page as the cache keeps it: immutable once
// installed, copied on every hit.
type cachedPage struct {
	dir       string // the path the entries' paths start with
	entries   []meta.FileStatus
	remaining int64
}

// listing returns the page for the directory at path: a caller's copy, or
// with shared (a caller that changes nothing: ListShared) the page's own
// entries, capped so that an append cannot write into them.
func (pg *cachedPage) listing(path string, shared bool) *meta.Listing {
	if shared && path == pg.dir {
		return &meta.Listing{Entries: pg.entries[:len(pg.entries):len(pg.entries)], Remaining: pg.remaining}
	}
	l := &meta.Listing{Entries: slices.Clone(pg.entries), Remaining: pg.remaining}
	if path != pg.dir { // cannot happen (an id has one path at a time), but cheap to handle
		prefix := meta.JoinPath(path, "")
		for i := range l.Entries {
			l.Entries[i].Path = prefix + l.Entries[i].Name()
		}
	}
	return l
}

// size is what the page counts against the cache's budget.
func (pg *cachedPage) size() int64 {
	n := int64(unsafe.Sizeof(*pg)) + int64(len(pg.dir)) + int64(cap(pg.entries))*int64(unsafe.Sizeof(meta.FileStatus{}))
	for i := range pg.entries {
		s := &pg.entries[i]
		n += int64(len(s.Path) + len(s.Owner) + len(s.Group) + len(s.Symlink))
	}
	return n
}

// pageCursor is the cache's cursor of a page: its limit and its start, as
// two requests with different limits are different pages. Names contain no
// '/', so the two parts cannot be confused.
func pageCursor(limit int, startAfter string) string {
	return strconv.Itoa(limit) + "/" + startAfter
}

// readCached answers a read of path p from the cache, if it can: fn gets a
// transaction without a store (for the permission checks), the path
// resolved from cached rows (resolution parts only: hot attributes are in
// the view) and the view, and reports whether it could answer. ok is false
// when the path is not wholly cached, crosses a subtree flag, or fn could
// not answer: the caller then reads the store, and fills the cache from
// the row cached (how many rows of the path the lookup found) on.
func (e *Engine) readCached(opName, p string, u meta.User, page bool, cursor string,
	fn func(t *tx, r *resolved, v *cache.View) (bool, error)) (ok bool, cached int, err error) {
	start := time.Now()
	if checkUser(opName, p, u) != nil {
		return false, 0, nil // the store path reports it
	}
	// Serving before and after the lookup: it held throughout (it only
	// ends, until the next incarnation), so the lookup is where the read
	// linearizes.
	if !e.serving() {
		return false, 0, nil
	}
	cr := cachedReads.Get().(*cachedRead)
	defer cr.release()
	names := meta.SplitPath(p)
	v := &cr.v
	e.cache.Look(names, page, cursor, v)
	if !v.Full(len(names)) || !e.serving() {
		return false, len(v.Rows), nil
	}
	cr.rows = slices.Grow(cr.rows[:0], len(v.Rows))[:len(v.Rows)]
	cr.chain = slices.Grow(cr.chain[:0], len(v.Rows))[:len(v.Rows)]
	r := &cr.r
	*r = resolved{path: p, comps: names, chain: cr.chain, end: len(names)}
	for k := range v.Rows {
		if v.Rows[k].SubtreeOwner != 0 {
			return false, 0, nil // never filled; but a flag is the store path's to judge
		}
		cr.rows[k] = cache.ToStore(&v.Rows[k], &cache.Attrs{})
		r.chain[k] = &cr.rows[k]
	}
	groups, super := e.identity(u.Name)
	t := &cr.t
	*t = tx{e: e, user: u.Name, groups: groups, super: super}
	ok, err = fn(t, r, v)
	if !ok {
		return false, len(v.Rows), nil
	}
	err = e.finish(opName, p, err)
	e.metrics.observe(opName, err, time.Since(start))
	return true, len(v.Rows), err
}

// cachedRead is the memory of one read answered from the cache, reused
// through cachedReads: a cached stat is a few hundred nanoseconds of work,
// and allocating its view, its rows and its transaction each time cost
// more than the work (they were most of its allocated bytes). Nothing fn
// returns may point into it: the answers (status, listOfOne, a cached
// page's listing) copy what they keep.
type cachedRead struct {
	v     cache.View
	rows  []store.Inode
	chain []*store.Inode
	r     resolved
	t     tx
}

var cachedReads = sync.Pool{New: func() any { return new(cachedRead) }}

// release returns cr to the pool, dropping what would keep rows alive.
func (cr *cachedRead) release() {
	clear(cr.rows)
	clear(cr.chain)
	cr.v.Page, cr.v.HasPage = nil, false
	cr.r, cr.t = resolved{}, tx{}
	cachedReads.Put(cr)
}

// serving reports whether the cache may answer reads and install fills now
// (Config.CacheServing). Checked at the lookup, and at both ends of a fill:
// before its Begin and before its Put.
func (e *Engine) serving() bool {
	return e.cfg.CacheServing == nil || e.cfg.CacheServing()
}

// fillPath installs, under token tk, the rows of a path read from the
// store (r.chain, every entry present), from the first that the lookup did
// not find cached (from) on, up to the first flagged directory (not
// included) or the first row this instance's deployment does not own
// (ownership.go: a file's row, the last); and the hot attributes of the
// last row when attrs is set, the whole path went in and the deployment
// owns them. It reports whether the whole path went in.
func (e *Engine) fillPath(tk cache.Token, r *resolved, from int, attrs bool) bool {
	rows := make([]cache.Inode, 0, len(r.chain))
	whole := true
	for k, n := range r.chain {
		if n == nil || n.SubtreeOwner != 0 {
			return false
		}
		if !e.mayCacheRow(n) {
			whole = false // the rows above it are directories: they go in
			break
		}
		if k >= from {
			rows = append(rows, cache.FromStore(n))
		}
	}
	if len(rows) > 0 && e.cache.PutPath(tk, rows...) < len(rows) || !whole {
		return false
	}
	if last := r.chain[len(r.chain)-1]; attrs && e.owns(attrsRoute(last)) {
		return e.cache.PutAttrs(tk, last.ID, cache.AttrsFromStore(last))
	}
	return true
}
