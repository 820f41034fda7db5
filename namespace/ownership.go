package namespace

import (
	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/store"
)

// Which deployment's cache may hold which entry (docs/ELASTIC.md,
// "Deployments own cache entries"). The namespace is shared by
// Config.Deployments deployments, and routing.Owner of an entry's routing
// key names the one that owns it:
//
//	entry                                    routing key        cached by
//	a directory's row, cache.Key(p, name)    (none)             any deployment (resolution)
//	any other row, cache.Key(p, name)        p, its parent id   the owner of p
//	hot attributes of inode n, AttrsOf(n)    n's parent id      the owner of n's parent
//	a listing of directory d, ListingOf(d)   d                  the owner of d
//
// A fill installs only what its instance's deployment may hold (fillPath,
// fillList), and a write's targets carry the same classification
// (tx.targets): an entry only the owner caches is invalidated only at the
// owner's instances (Target.Everywhere false, Target.Route its key), a
// directory's row at every instance. Whatever is not known to be owned
// (a Subtree, a row whose type the write did not read) goes everywhere.
// Both sides call rowRoute, attrsRoute and listingRoute below, so they
// cannot disagree: that agreement is what makes a Local target sound.

// Target is one cache target of a write with its reach: Everywhere, or
// only the instances of the deployment that owns Route (routing.Owner);
// coherence.Target, which Guarded invalidators are handed.
type Target = coherence.Target

// rowRoute is the routing key of row n's entry: shared (every deployment
// may cache it) for a directory, whose row every path through it resolves,
// else the parent id.
func rowRoute(n *store.Inode) (key uint64, shared bool) {
	if n.Type == meta.TypeDir {
		return 0, true
	}
	return n.Parent, false
}

// attrsRoute is the routing key of inode n's hot attributes: its parent
// id, the key of the operations (stat of its path) that read them.
func attrsRoute(n *store.Inode) uint64 { return n.Parent }

// listingRoute is the routing key of directory dir's listing: dir.
func listingRoute(dir uint64) uint64 { return dir }

// owns reports whether this instance's deployment owns routing key k.
func (e *Engine) owns(k uint64) bool {
	n := e.cfg.Deployments
	return n <= 1 || e.cfg.DisableFillOwnership || routing.Owner(k, n) == e.cfg.Deployment
}

// mayCacheRow reports whether this instance may fill row n.
func (e *Engine) mayCacheRow(n *store.Inode) bool {
	k, shared := rowRoute(n)
	return shared || e.owns(k)
}

// everywhere is t sent to every instance.
func everywhere(t cache.Target) Target { return Target{Target: t, Everywhere: true} }

// owned is t sent to the owner of routing key k.
func owned(t cache.Target, k uint64) Target { return Target{Target: t, Route: k} }

// rowTarget is the target of the row keyed (parent, name), whose versions
// the write saw are old and n (either may be nil): shared when either is a
// directory or neither is known.
func rowTarget(parent uint64, name string, old, n *store.Inode) Target {
	t := cache.Key(parent, name)
	for _, r := range []*store.Inode{old, n} {
		if r == nil {
			continue
		}
		if _, shared := rowRoute(r); shared {
			return everywhere(t)
		}
	}
	if old == nil && n == nil {
		return everywhere(t)
	}
	return owned(t, parent)
}

// cacheTargets strips the reach off targets.
func cacheTargets(ts []Target) []cache.Target {
	out := make([]cache.Target, len(ts))
	for i, t := range ts {
		out[i] = t.Target
	}
	return out
}
