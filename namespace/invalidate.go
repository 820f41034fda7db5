package namespace

import (
	"context"
	"fmt"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/store"
)

// Invalidator and Guarded are the seam between the engine and what keeps
// caches coherent, defined in package coherence, below both: the engine's
// own localInvalidator serves one instance, coherence/loop many.
type (
	Invalidator = coherence.Invalidator
	Guarded     = coherence.Guarded
)

// localInvalidator holds the targets in one cache: the engine's own.
type localInvalidator struct{ c *cache.Cache }

func (l localInvalidator) Invalidate(_ context.Context, targets []cache.Target) (func(bool), error) {
	h := l.c.Hold(targets...)
	return func(bool) { h.Release() }, nil
}

func noRelease(bool) {}

// invalidate computes the targets of the attempt's writes and hands them
// to the invalidator, if any, then runs a Guarded invalidator's check on
// the attempt's transaction. Its error is retryable (nothing is committed)
// unless the check's is not.
func (t *tx) invalidate(ctx context.Context) (func(bool), error) {
	e := t.e
	if e.inv == nil {
		return noRelease, nil
	}
	ts := t.targets()
	e.metrics.invTargets.Observe(float64(len(ts)))
	for _, x := range ts {
		e.metrics.invTargetKinds.WithLabelValues(kindLabel(x.Kind)).Inc()
	}
	if e.cfg.DisableInvalidation {
		return noRelease, nil
	}
	if g, ok := e.inv.(Guarded); ok {
		check, release, err := g.InvalidateGuarded(ctx, ts)
		if err != nil {
			return nil, fmt.Errorf("%w: cache invalidation: %v", errRetry, err)
		}
		if err := check(ctx, t.st); err != nil {
			release(false)
			return nil, err
		}
		return release, nil
	}
	if len(ts) == 0 {
		return noRelease, nil
	}
	release, err := e.inv.Invalidate(ctx, cacheTargets(ts))
	if err != nil {
		return nil, fmt.Errorf("%w: cache invalidation: %v", errRetry, err)
	}
	return release, nil
}

// commitRaw commits txn, a write outside a tx (the engine's background
// and recovery work: subtree flags cleared, taken over or marked, half-done
// recursive operations finished, the batches of a recursive chmod or
// chown), as a tx commits: a Guarded invalidator's check (the fence and the
// write floor: an instance that lost its session commits nothing more)
// runs on txn just before its commit, and targets, what the write changes
// in caches, are held at every instance that may cache them across the
// commit. Without targets it runs the check alone. A target is sent
// Everywhere: the writes here do not read the type of the rows they change
// (ownership.go).
func (e *Engine) commitRaw(ctx context.Context, txn store.Txn, targets ...cache.Target) error {
	if e.inv == nil || e.cfg.DisableInvalidation {
		return txn.Commit(ctx)
	}
	if len(targets) > 0 {
		e.metrics.invTargets.Observe(float64(len(targets)))
		for _, x := range targets {
			e.metrics.invTargetKinds.WithLabelValues(kindLabel(x.Kind)).Inc()
		}
	}
	release := noRelease
	var err error
	if g, ok := e.inv.(Guarded); ok {
		var check func(context.Context, store.Txn) error
		var ts []Target
		if len(targets) > 0 {
			ts = make([]Target, len(targets))
			for i, x := range targets {
				ts[i] = everywhere(x)
			}
		}
		check, release, err = g.InvalidateGuarded(ctx, ts)
		if err == nil {
			if err = check(ctx, txn); err != nil {
				release(false)
				return err
			}
		}
	} else if len(targets) > 0 {
		release, err = e.inv.Invalidate(ctx, targets)
	}
	if err != nil {
		return fmt.Errorf("%w: cache invalidation: %v", store.ErrUnavailable, err)
	}
	err = txn.Commit(ctx)
	release(err == nil)
	return err
}

func kindLabel(k cache.Kind) string {
	switch k {
	case cache.KindKey:
		return "key"
	case cache.KindInode:
		return "inode"
	case cache.KindListing:
		return "listing"
	case cache.KindAttrs:
		return "attrs"
	case cache.KindSubtree:
		return "subtree"
	}
	return "unknown"
}

// targets returns what the attempt's inode writes change in a cache, in one
// place, from each dirty row and the row as the transaction first read it:
//
//   - a created row (none was read, or another inode's: a rename over it):
//     its key and its parent's listing;
//   - a deleted row (through dirty, or delRaw: a recursive delete's): its
//     key (which drops the entry with its hot
//     attributes, its listing pages and its cached subtree: the cache keeps
//     a child only under its cached parent) and its parent's listing;
//   - a changed row: its key when its resolution part changed
//     (cache.ResolutionChanged), its hot attributes when they changed
//     (cache.AttrsChanged), its parent's listing when either did (a
//     listing shows both); a subtree flag being set is Subtree(id), the
//     one target of a whole subtree operation, sent before it changes
//     anything below;
//   - a row below the flagged directory of a subtree operation this
//     attempt owns: nothing. Its Subtree target dropped everything cached
//     below when the flag was set, and nothing below a flagged directory is
//     filled again until the flag goes (the engine does not install a
//     flagged row, and a child needs its parent cached), with the
//     operation's last commit, which invalidates the directory's key.
//
// Rows other than inodes (content chunks, xattrs, blocks, records) are not
// cached, so they have no targets: a read of them always goes to the store.
func (t *tx) targets() []Target {
	var ts []Target
	add := func(x Target) {
		for i := range ts {
			if ts[i].Target == x.Target {
				if ts[i].Route != x.Route || x.Everywhere {
					ts[i].Everywhere = true // not expected; safe
				}
				return
			}
		}
		ts = append(ts, x)
	}
	var inside map[uint64]bool // the subtree of t.op.own, as far as this attempt read it
	if t.op.own != 0 {
		inside = t.flaggedSubtree()
	}
	for _, key := range t.rawDeleted {
		// Rows a recursive delete removed past dirty: every one below its
		// flagged directory is inside, and the directory itself is its
		// parent's entry (its type is not at hand: everywhere).
		if parent, name, ok := store.DecodeInodeKey([]byte(key)); ok && !inside[parent] {
			add(rowTarget(parent, name, nil, nil))
			add(owned(cache.ListingOf(parent), listingRoute(parent)))
		}
	}
	for key, n := range t.dirty {
		parent, name, ok := store.DecodeInodeKey([]byte(key))
		if !ok {
			continue
		}
		if inside[parent] {
			continue
		}
		old, read := t.rows.orig(hintKey{parent, name})
		listing := owned(cache.ListingOf(parent), listingRoute(parent))
		switch {
		case n == nil || !read || old == nil || old.ID != n.ID:
			// Deleted, created, replaced, or written without a read (a
			// directory mkdir -p created in this transaction): the key
			// and the listing cover every case.
			if !read {
				old = nil
			}
			// A row created where the attempt read none: no cache can
			// hold its key (caches keep rows, never their absence; a
			// listing that shows the name missing is the listing's
			// target), so only the listing and the attributes are
			// invalidated. A new directory then reaches the owner of its
			// parent, as a new file does, not every instance.
			if !(read && old == nil && n != nil) {
				add(rowTarget(parent, name, old, n))
			}
			add(listing)
			if n != nil && !read {
				add(owned(cache.AttrsOf(n.ID), attrsRoute(n)))
			}
		default:
			res, attrs := cache.ResolutionChanged(old, n), cache.AttrsChanged(old, n)
			if old.SubtreeOwner == 0 && n.SubtreeOwner != 0 {
				add(everywhere(cache.Subtree(n.ID)))
			}
			if res {
				add(rowTarget(parent, name, old, n))
			}
			if attrs {
				add(owned(cache.AttrsOf(n.ID), attrsRoute(n)))
			}
			if res || attrs {
				add(listing)
			}
		}
	}
	return ts
}

// flaggedSubtree returns the ids of the directories below t.op.own (own
// included) among the rows this attempt read: a row whose parent is one of
// them is inside the flagged subtree.
func (t *tx) flaggedSubtree() map[uint64]bool {
	in := map[uint64]bool{t.op.own: true}
	for grew := true; grew; {
		grew = false
		for i := range t.rows.list {
			r := &t.rows.list[i]
			n := r.orig
			if n == nil {
				n = r.n
			}
			if n != nil && !in[n.ID] && in[n.Parent] {
				in[n.ID], grew = true, true
			}
		}
	}
	return in
}
