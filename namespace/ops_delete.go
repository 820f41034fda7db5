package namespace

import (
	"bytes"
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
	plain := func() error { _, err := e.runOnce(ctx, op, p, u, body); return err }
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

// deletePage bounds the entries of one directory a recursive delete reads
// at a time. (Config.SubtreeDeleteBatch bounds a transaction's inodes: big
// enough that the WAL syncs, one a transaction, are few, small enough that
// its locks, rows and batch stay a few megabytes.)
const deletePage = 1024

// deleteSubtree is the work of a recursive delete of the non-empty
// directory root, flagged by f. Each transaction walks the tree from root,
// depth first in key order, and removes up to Config.SubtreeDeleteBatch
// inodes bottom up: in each directory it visits, the entries it removes are
// a prefix of the directory's entries in key order (files, symlinks, empty
// directories, and directories it emptied), so they go with one range
// deletion where the store has store.RangeDeleter (a point deletion each
// otherwise), and the rows they own elsewhere (content, blocks, attributes,
// lease) with them.
// A directory left partly emptied keeps its row with its entry count
// lowered; one emptied goes with its parent's range. So a crash between
// two transactions leaves a smaller subtree, still connected, under the
// flag, which the engine finishes at start (recoverSubtreeOps).
//
// The root's row and the quotas above it change only in the last
// transaction (the operation row counts what went before), so that no
// listing or quota outside sees the delete half done; directories inside
// are charged as they go (none is visible). Memory: one transaction's
// rows (SubtreeDeleteBatch) and a page of entries per level of the tree
// walked (docs/NAMESPACE.md measures it). check makes it first check that the caller may delete every directory
// (HDFS's sub-access check).
func (e *Engine) deleteSubtree(ctx context.Context, op, root string, u meta.User, f flagRef, check bool) error {
	if check {
		if err := e.checkSubAccess(ctx, op, root, u, f); err != nil {
			return err
		}
		// Checked: from here a NameNode that finds the delete left half
		// done may finish it (resumeDelete); before, it cancels it.
		if err := e.markChecked(ctx, f); err != nil {
			return e.finish(op, root, err)
		}
	} else {
		var phase subtree.Do // a delete resumed at start is in its work phase
		e.metrics.subtreeIn(&phase, subtree.DoWork)
		defer e.metrics.subtreeIn(&phase, 0)
	}
	// Once the first entry went, the delete goes on to the end even if the
	// caller goes away: a half-done delete is finished only at the next start.
	ctx = context.WithoutCancel(ctx)
	started := false
	for gone := false; !gone; {
		var removed int64
		// Each batch reads the request's record; the last one, which
		// removes the root, writes it (once.go).
		dup, err := e.runOnce(ctx, op, root, u, func(t *tx) error {
			t.op.own = f.id
			d := &deleter{t: t, op: op, budget: e.cfg.SubtreeDeleteBatch}
			d.rd, _ = t.st.(store.RangeDeleter)
			var err error
			gone, err = d.batch(ctx, root, f)
			removed = d.removed
			if !gone {
				t.unfinished()
			}
			return err
		})
		if dup != nil {
			return errPlain // another submission did it: see oneTxn
		}
		if err != nil {
			if started {
				return &keepFlag{err}
			}
			return err
		}
		started = true
		e.metrics.subtreeDone.WithLabelValues(op).Add(float64(removed))
	}
	return nil
}

// deleter is one transaction of a recursive delete.
type deleter struct {
	t       *tx
	op      string
	rd      store.RangeDeleter // nil: the store deletes row by row
	budget  int                // inodes this transaction may still remove
	removed int64              // inodes it removed
}

// delDir is a directory being emptied by one transaction, locked
// exclusive: what was removed below it, and its entries removed, a prefix
// of its entries in key order up to last.
type delDir struct {
	n      *store.Inode
	path   string
	direct int64  // its entries removed
	last   []byte // the key of the last of them
	below  usage  // the inodes removed below it, at every depth
}

// batch is one transaction: it resolves root, empties it as far as the
// budget goes, and reports whether root itself went.
func (d *deleter) batch(ctx context.Context, root string, f flagRef) (bool, error) {
	t := d.t
	rs, err := t.resolve(ctx, want{path: root, last: store.Exclusive, parent: store.Exclusive})
	if err != nil {
		return false, err
	}
	r := rs[0]
	n := r.last()
	if n == nil || n.Type != meta.TypeDir || n.ID != f.id {
		return false, meta.Errorf(d.op, root, meta.ErrInternal, "the directory being deleted under its subtree flag is gone")
	}
	parent := r.parent()
	if err := t.require(d.op, r.prefix(r.depth()-1), parent, permW|permX); err != nil {
		return false, err
	}
	if err := t.checkSticky(d.op, root, parent, n); err != nil {
		return false, err
	}
	vals, err := t.st.Read(ctx, []store.ReadReq{{Key: store.SubtreeOpKey(f.id)}})
	if err != nil {
		return false, err
	}
	var row store.SubtreeOp
	if vals[0] == nil {
		return false, meta.Errorf(d.op, root, meta.ErrInternal, "the subtree operation row of the delete is gone")
	}
	if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[0], &row); err != nil {
		return false, err
	}
	top := &delDir{n: n, path: root}
	done, err := d.empty(ctx, top, n.Children-row.PendingEntries)
	if err != nil {
		return false, err
	}
	if err := d.dropPrefix(ctx, top, done); err != nil {
		return false, err
	}
	row.PendingInodes += top.below.inodes()
	row.PendingSpace += top.below.space
	if !done {
		if top.direct == 0 && top.below.inodes() == 0 {
			return false, meta.Errorf(d.op, root, meta.ErrInternal, "a transaction of the delete removed nothing")
		}
		row.PendingEntries += top.direct
		t.putRaw(store.SubtreeOpKey(f.id), store.EncodeSubtreeOp(nil, &row))
		return false, nil
	}
	// The last transaction: the root goes, the quotas above are charged
	// with everything at once.
	row.PendingInodes++
	if err := t.charge(d.op, root, r.chain[:r.depth()], -row.PendingInodes, -row.PendingSpace); err != nil {
		return false, err
	}
	if err := t.dropOwnRows(ctx, n); err != nil { // its xattrs; the flag goes with the row
		return false, err
	}
	// Not through del, for the reason remove says (it is locked exclusive).
	t.delRaw(n.Key())
	t.e.hints.drop(n.Parent, n.Name)
	d.removed++
	parent.Children--
	parent.Mtime = t.now
	t.put(parent)
	t.delRaw(store.SubtreeOpKey(f.id))
	t.after = append(t.after, func() { t.e.endSubtree(f.id) })
	return true, nil
}

// empty removes the entries of directory dir (locked exclusive), which
// holds entries of them, in key order, until all are gone (true), or the
// budget is spent or a directory below is left partly emptied (false). The
// caller then removes the prefix removed (dropPrefix): the entries' own
// rows go here, their inode rows there.
//
// Files and symlinks are taken as the scan read them, without a lock: the
// quiesce is past, so nothing else can reach them (every operation, lease
// recovery and block writes included, resolves its path through the
// flagged root and waits there). Directories are locked exclusive, as
// their rows are written (entry counts, quotas) or hold the entries that
// go (checkWriteLocks).
func (d *deleter) empty(ctx context.Context, dir *delDir, entries int64) (bool, error) {
	t := d.t
	type entry struct {
		key      []byte
		n        store.Inode // as scanned, its name a view of key
		nonEmpty bool        // a directory with entries
	}
	var page []entry
	after := ""
	for {
		if d.budget <= 0 {
			return false, nil
		}
		limit := min(d.budget, deletePage)
		page = page[:0]
		start, end := store.ChildrenRange(dir.n.ID, after)
		var decErr error
		err := t.st.Scan(ctx, start, end, limit, func(k, v []byte) bool {
			page = append(page, entry{key: bytes.Clone(k)})
			e := &page[len(page)-1]
			if decErr = store.DecodeInodeView(e.key, v, &e.n); decErr != nil {
				return false
			}
			e.nonEmpty = e.n.Type == meta.TypeDir && e.n.Children > 0
			return true
		})
		if err == nil {
			err = decErr
		}
		if err != nil {
			return false, err
		}
		for i := 0; i < len(page); i++ {
			e := &page[i]
			if !e.nonEmpty {
				// Not kept in the transaction's rows: nothing reads it
				// again, and the rows' map would cost more than the rest.
				if err := d.remove(ctx, dir, &e.n); err != nil {
					return false, err
				}
				dir.last = e.key
				continue
			}
			cs, err := d.lock(ctx, []store.ReadReq{{Key: e.key, Mode: store.Exclusive, NoWait: true}})
			if err != nil {
				return false, err
			}
			sub := &delDir{n: cs[0], path: meta.JoinPath(dir.path, cs[0].Name)}
			if sub.n.Type != meta.TypeDir {
				return false, errRetry
			}
			done, err := d.empty(ctx, sub, sub.n.Children)
			if err != nil {
				return false, err
			}
			if err := d.dropPrefix(ctx, sub, done); err != nil {
				return false, err
			}
			dir.below.plus(sub.below)
			if !done {
				return false, nil
			}
			if err := d.remove(ctx, dir, sub.n); err != nil {
				return false, err
			}
			dir.last = e.key
		}
		if len(page) < limit {
			if dir.direct != entries {
				return false, meta.Errorf(d.op, dir.path, meta.ErrInternal,
					"directory records %d entries but %d were found", entries, dir.direct)
			}
			return true, nil
		}
		_, after, _ = store.DecodeInodeKey(page[len(page)-1].key)
	}
}

// lock locks the inode rows of reqs exclusive (NoWait: out of the key order,
// and under the flag nothing else should hold them; a busy one restarts the
// transaction) and returns them as read under the lock.
func (d *deleter) lock(ctx context.Context, reqs []store.ReadReq) ([]*store.Inode, error) {
	t := d.t
	vals, err := t.st.Read(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Inode, len(reqs))
	t.reserveInodes(len(reqs))
	for i, rq := range reqs {
		if vals[i] == nil {
			return nil, errRetry // gone between the scan and the lock
		}
		cp, name, _ := store.DecodeInodeKey(rq.Key)
		hk := hintKey{cp, name}
		if err := t.cacheRowAt(hk, vals[i]); err != nil {
			return nil, err
		}
		t.rows.setMode(hk, store.Exclusive)
		out[i] = t.rows.get(hk)
	}
	return out, nil
}

// remove removes entry c of dir (c has nothing below it now): the rows it
// owns go now, its own row with dir's prefix (or now, without a
// RangeDeleter).
func (d *deleter) remove(ctx context.Context, dir *delDir, c *store.Inode) error {
	t := d.t
	dir.below.add(c) // before dropOwnRows, which zeroes a file's Written
	if err := t.dropOwnRows(ctx, c); err != nil {
		return err
	}
	switch {
	case d.rd == nil && c.Type != meta.TypeDir:
		t.del(c)
	case d.rd == nil:
		// Not through del: checkWriteLocks would no longer see the
		// directory as locked for the deletions of its entries in this
		// transaction. It is locked exclusive (lock).
		t.delRaw(c.Key())
		fallthrough
	case c.Type == meta.TypeDir:
		t.e.hints.drop(c.Parent, c.Name)
	}
	dir.direct++
	d.removed++
	d.budget--
	return nil
}

// dropPrefix ends what empty did in dir: the removed prefix of its entries
// goes with one range deletion (all of them when done), and a directory
// that stays (not done, and not the delete's root, which the operation row
// accounts for) has its entry count and the quota it has lowered.
func (d *deleter) dropPrefix(ctx context.Context, dir *delDir, done bool) error {
	t := d.t
	if d.rd != nil && dir.direct > 0 {
		start, end := store.ChildrenRange(dir.n.ID, "")
		if !done {
			end = append(bytes.Clone(dir.last), 0) // the smallest key after the last removed
		}
		t.raw = true
		if err := d.rd.DeleteRange(ctx, start, end); err != nil {
			return err
		}
	}
	if done || dir.n.ID == t.op.own || dir.direct == 0 && dir.below.inodes() == 0 {
		return nil
	}
	if err := t.charge(d.op, dir.path, []*store.Inode{dir.n}, -dir.below.inodes(), -dir.below.space); err != nil {
		return err
	}
	dir.n.Children -= dir.direct
	dir.n.Mtime = t.now
	t.put(dir.n)
	return nil
}

// plus adds the usage v to u.
func (u *usage) plus(v usage) {
	u.files += v.files
	u.dirs += v.dirs
	u.links += v.links
	u.length += v.length
	u.space += v.space
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
