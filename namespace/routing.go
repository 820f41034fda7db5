package namespace

import (
	"context"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// RoutingKey returns the routing key of an operation on path
// (docs/ELASTIC.md, "Request routing"): the id of the directory a listing
// names, else the id of path's parent, the keys ownership.go caches under.
// It resolves the directory through the hint cache and reads from the
// store, committed and without locks, only the components it has no hint
// for (and then remembers them), so a server can tell where a request
// belongs before it serves it.
//
// ok is false when there is no key to route by: the root's parent, a
// /.reserved path, a component that is missing or not a directory, or an
// invalid path. The caller then serves the request where it is and the
// engine answers it as it would. A stale hint may name a wrong key; that
// costs a request sent to the wrong deployment, never a wrong answer,
// since any server answers any path correctly.
func (e *Engine) RoutingKey(ctx context.Context, listing bool, path string) (key uint64, ok bool, err error) {
	p, err := meta.CleanPath("route", path)
	if err != nil || strings.HasPrefix(p, reservedDir) {
		return 0, false, nil
	}
	// The directory whose id routes: the path itself for a listing, else
	// its parent. Its components are walked in place (no []string: this
	// runs before every routed request).
	dir := p
	if !listing {
		if p == meta.RootPath {
			return 0, false, nil
		}
		dir, _ = meta.ParentPath(p)
	}
	id := uint64(store.RootID)
	var txn store.Txn
	hits := 0 // counted once: a shared counter per component costs as much as the lookup
	defer func() {
		if hits > 0 {
			e.metrics.hintHits.Add(float64(hits))
		}
		if txn != nil {
			txn.Rollback()
		}
	}()
	for rest := dir[1:]; rest != ""; {
		name := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			name, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if next, hit := e.hints.get(id, name); hit {
			hits++
			id = next
			continue
		}
		e.metrics.hintMisses.Inc()
		if txn == nil {
			if txn, err = e.st.Begin(ctx); err != nil {
				return 0, false, err
			}
		}
		k := store.AppendInodeKey(nil, id, name)
		vals, err := txn.Read(ctx, []store.ReadReq{{Key: k, Mode: store.ReadCommitted}})
		if err != nil {
			return 0, false, err
		}
		if vals[0] == nil {
			return 0, false, nil
		}
		var n store.Inode
		if err := store.DecodeInode(k, vals[0], &n); err != nil {
			return 0, false, err
		}
		if n.Type != meta.TypeDir {
			return 0, false, nil
		}
		e.hints.put(id, name, n.ID)
		id = n.ID
	}
	return id, true, nil
}
