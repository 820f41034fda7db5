package namespace

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
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
	return e.run(ctx, op, p, u, func(t *tx) error {
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
	})
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
				if err := t.checkFlag(c, meta.JoinPath(d.path, c.Name)); err != nil {
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
