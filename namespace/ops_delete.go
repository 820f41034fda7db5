package namespace

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// Delete implements meta.FileSystem.
// Locks: the parent exclusive (it loses an entry), the path exclusive, and for
// a directory every inode below it exclusive, taken top down with NoWait
// (outside the global key order, so a busy lock restarts the operation rather
// than risk a deadlock). Holding every row below means no operation inside the
// subtree can commit into a directory that is being deleted.
func (e *Engine) Delete(ctx context.Context, u meta.User, path string, recursive bool) error {
	const op = "delete"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	if p == meta.RootPath {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "the root directory cannot be deleted")
	}
	body := func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Exclusive, parent: store.Exclusive})
		if err != nil {
			return err
		}
		r := rs[0]
		n, err := t.existing(op, r)
		if err != nil {
			return err
		}
		parent := r.parent()
		if err := t.require(op, r.prefix(r.depth()-1), parent, permW|permX); err != nil {
			return err
		}
		if err := t.checkSticky(op, p, parent, n); err != nil {
			return err
		}
		if n.Type == meta.TypeDir && n.Children > 0 && !recursive {
			return meta.Errorf(op, p, meta.ErrNotEmpty, "%d entries; delete recursively to remove them", n.Children)
		}
		if n.Type == meta.TypeDir && n.Children > 0 {
			return errNeedSubtree // under the protocol, in batches (deleteSubtree)
		}
		nodes, use, err := t.lockSubtree(ctx, op, p, n, store.Exclusive, permR|permW|permX)
		if err != nil {
			return err
		}
		if err := t.charge(op, p, r.chain[:r.depth()], -use.inodes(), -use.space); err != nil {
			return err
		}
		for _, c := range nodes {
			if err := t.removeFile(ctx, c); err != nil { // directories too: their xattr rows
				return err
			}
		}
		parent.Children--
		parent.Mtime = t.now
		t.put(parent)
		return nil
	}
	plain := func() error { return e.run(ctx, op, p, u, body) }
	for {
		err := plain()
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
		work := func(f flagRef) error { return e.deleteSubtree(ctx, op, p, u, f, true) }
		err = e.subtreeOp(ctx, op, p, u, subtree.KindDelete, work, plain)
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
	}
}

// deleteBatch bounds the entries one transaction of a recursive delete
// removes.
const deleteBatch = 1024

// deleteSubtree is the work of a recursive delete of the non-empty
// directory root, flagged by f: depth first, each transaction removes up to
// deleteBatch entries that are files, symlinks or empty directories of the
// deepest directory not yet emptied (and the directory itself once empty).
// The root's row and the quotas above it change only in the last
// transaction (the operation row counts what went before), so that no
// listing or quota outside sees the delete half done. A crash between two
// leaves a smaller subtree, still connected, under the flag: the engine
// finishes it at start (recoverSubtreeOps). Memory: the path of the directories being emptied
// (one per level) and one batch. check makes it first check that the caller
// may delete every directory (HDFS's sub-access check).
func (e *Engine) deleteSubtree(ctx context.Context, op, root string, u meta.User, f flagRef, check bool) error {
	if check {
		if err := e.checkSubAccess(ctx, op, root, u, f); err != nil {
			return err
		}
	}
	// Once the first entry went, the delete goes on to the end even if the
	// caller goes away: a half-done delete is finished only at the next start.
	ctx = context.WithoutCancel(ctx)
	started := false
	rootDepth := len(meta.SplitPath(root))
	stack := []string{root}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		var descend string
		var gone bool
		err := e.run(ctx, op, d, u, func(t *tx) error {
			t.op.own = f.id
			descend, gone = "", false
			rs, err := t.resolve(ctx, want{path: d, last: store.Exclusive, parent: store.Exclusive})
			if err != nil {
				return err
			}
			r := rs[0]
			n := r.last()
			if n == nil || n.Type != meta.TypeDir || (d == root && n.ID != f.id) {
				return meta.Errorf(op, d, meta.ErrInternal, "a directory being deleted under the subtree flag of %s is gone", root)
			}
			parent := r.parent()
			if d == root {
				if err := t.require(op, r.prefix(r.depth()-1), parent, permW|permX); err != nil {
					return err
				}
				if err := t.checkSticky(op, d, parent, n); err != nil {
					return err
				}
			}
			var reqs []store.ReadReq
			err = t.children(ctx, n.ID, "", deleteBatch, func(c *store.Inode) bool {
				if c.Type == meta.TypeDir && c.Children > 0 {
					if descend == "" {
						descend = meta.JoinPath(d, c.Name)
					}
					return true
				}
				reqs = append(reqs, store.ReadReq{Key: c.Key(), Mode: store.Exclusive, NoWait: true})
				return true
			})
			if err != nil {
				return err
			}
			vals, err := t.st.Read(ctx, []store.ReadReq{{Key: store.SubtreeOpKey(f.id)}})
			if err != nil {
				return err
			}
			var row store.SubtreeOp
			if vals[0] == nil {
				return meta.Errorf(op, root, meta.ErrInternal, "the subtree operation row of the delete is gone")
			}
			if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[0], &row); err != nil {
				return err
			}
			var use usage
			if len(reqs) > 0 {
				// Out of the key order, so NoWait: under the flag nothing
				// else should hold them (a busy one restarts the batch).
				vals, err := t.st.Read(ctx, reqs)
				if err != nil {
					return err
				}
				for i, rq := range reqs {
					if vals[i] == nil {
						return errRetry
					}
					if err := t.cacheRow(rq.Key, vals[i]); err != nil {
						return err
					}
					cp, name, _ := store.DecodeInodeKey(rq.Key)
					hk := hintKey{cp, name}
					t.rows.setMode(hk, store.Exclusive)
					c := t.rows.get(hk)
					if c.Type == meta.TypeDir && c.Children > 0 {
						return errRetry // filled between the scan and the lock
					}
					use.add(c)
					if err := t.removeFile(ctx, c); err != nil {
						return err
					}
				}
			}
			// Nothing outside the subtree may see the delete half done: the
			// directories inside are charged as they go (none is visible),
			// the root's row and the quotas above it only in the last
			// transaction, from what the operation row keeps meanwhile.
			depth := r.depth()
			inside := r.chain[rootDepth+1 : depth+1] // below root, down to d
			removed := int64(len(reqs))
			entries := n.Children
			if d == root {
				entries -= row.PendingEntries
			}
			last := descend == "" && removed == entries
			if removed == 0 && descend == "" && !last {
				return meta.Errorf(op, d, meta.ErrInternal, "records %d entries but has none left to delete", entries)
			}
			if last {
				use.add(n)
				if d != root {
					inside = inside[:len(inside)-1] // d goes: its usage no longer matters
				}
			}
			if err := t.charge(op, d, inside, -use.inodes(), -use.space); err != nil {
				return err
			}
			row.PendingInodes += use.inodes()
			row.PendingSpace += use.space
			switch {
			case !last && d == root:
				row.PendingEntries += removed
			case !last:
				if removed > 0 {
					n.Children -= removed
					n.Mtime = t.now
					t.put(n)
				}
			case d == root:
				// The last transaction: the root goes, the quotas above
				// are charged with everything at once.
				if err := t.charge(op, d, r.chain[:rootDepth], -row.PendingInodes, -row.PendingSpace); err != nil {
					return err
				}
				if err := t.removeFile(ctx, n); err != nil { // its xattrs; the flag goes with the row
					return err
				}
				parent.Children--
				parent.Mtime = t.now
				t.put(parent)
				t.delRaw(store.SubtreeOpKey(f.id))
				t.after = append(t.after, func() { e.endSubtree(f.id) })
				gone = true
				return nil
			default:
				if err := t.removeFile(ctx, n); err != nil {
					return err
				}
				if depth-1 == rootDepth {
					row.PendingEntries++
				} else {
					parent.Children--
					parent.Mtime = t.now
					t.put(parent)
				}
				gone = true
			}
			t.putRaw(store.SubtreeOpKey(f.id), store.EncodeSubtreeOp(nil, &row))
			return nil
		})
		if err != nil {
			if started {
				return &keepFlag{err}
			}
			return err
		}
		started = true
		switch {
		case gone:
			stack = stack[:len(stack)-1]
		case descend != "":
			stack = append(stack, descend)
		}
	}
	return nil
}

// checkSubAccess checks, before a recursive delete removes anything, that
// every directory of the subtree at root (flagged by f, so unchanging)
// grants u read, write and search, as lockSubtree does for a small one.
func (e *Engine) checkSubAccess(ctx context.Context, op, root string, u meta.User, f flagRef) error {
	queue := []string{root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		var more []string
		super := false
		err := e.run(ctx, op, d, u, func(t *tx) error {
			t.op.own = f.id
			more, super = more[:0], t.super
			if t.super {
				return nil
			}
			rs, err := t.resolve(ctx, want{path: d})
			if err != nil {
				return err
			}
			n := rs[0].last()
			if n == nil || n.Type != meta.TypeDir {
				return nil
			}
			if err := t.require(op, d, n, permR|permW|permX); err != nil {
				return err
			}
			var denied error
			err = t.children(ctx, n.ID, "", 0, func(c *store.Inode) bool {
				if c.Type != meta.TypeDir {
					return true
				}
				p := meta.JoinPath(d, c.Name)
				if c.Children > 0 {
					more = append(more, p)
					return true
				}
				denied = t.require(op, p, c, permR|permW|permX)
				return denied == nil
			})
			if err != nil {
				return err
			}
			return denied
		})
		if err != nil {
			return err
		}
		if super {
			return nil
		}
		queue = append(queue, more...)
	}
	return nil
}

// lockSubtree locks every inode below n (n itself is already locked) in mode,
// with NoWait, directory by directory from the top, and returns them all, n
// first, with their usage. Every directory below n must grant bits to the
// caller (HDFS's sub-access check); bits 0 checks nothing.
func (t *tx) lockSubtree(ctx context.Context, op, path string, n *store.Inode, mode store.Mode, bits meta.Perm) ([]*store.Inode, usage, error) {
	nodes := []*store.Inode{n}
	var use usage
	use.add(n)
	if n.Type != meta.TypeDir || n.Children == 0 {
		return nodes, use, nil
	}
	type dir struct {
		n    *store.Inode
		path string
	}
	queue := []dir{{n, path}}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if bits != 0 {
			if err := t.require(op, d.path, d.n, bits); err != nil {
				return nil, use, err
			}
		}
		var reqs []store.ReadReq
		err := t.children(ctx, d.n.ID, "", 0, func(c *store.Inode) bool {
			reqs = append(reqs, store.ReadReq{Key: c.Key(), Mode: mode, NoWait: true})
			return true
		})
		if err != nil {
			return nil, use, err
		}
		if len(reqs) == 0 {
			continue
		}
		// Lock, then read again: what was scanned before the lock may have
		// changed, but nothing can change under the lock.
		vals, err := t.st.Read(ctx, reqs)
		if err != nil {
			return nil, use, err
		}
		for i, r := range reqs {
			if vals[i] == nil {
				return nil, use, errRetry // deleted between the scan and the lock
			}
			if err := t.cacheRow(r.Key, vals[i]); err != nil {
				return nil, use, err
			}
			parent, name, _ := store.DecodeInodeKey(r.Key)
			c := t.rows.get(hintKey{parent, name})
			t.rows.setMode(hintKey{parent, name}, mode)
			if c.SubtreeOwner != 0 && c.ID != t.op.own {
				// A subtree operation under way below (or a stale flag):
				// wait for it as resolution would.
				if err := t.checkFlag(ctx, c, meta.JoinPath(d.path, c.Name)); err != nil {
					return nil, use, err
				}
			}
			nodes = append(nodes, c)
			use.add(c)
			if c.Type == meta.TypeDir {
				queue = append(queue, dir{c, meta.JoinPath(d.path, c.Name)})
			}
		}
		if int64(len(reqs)) != d.n.Children {
			return nil, use, meta.Errorf(op, d.path, meta.ErrInternal,
				"directory records %d entries but has %d", d.n.Children, len(reqs))
		}
	}
	return nodes, use, nil
}
