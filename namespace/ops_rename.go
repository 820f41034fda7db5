package namespace

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// Rename implements meta.FileSystem.
// Locks: source and destination exclusive, both parents exclusive, and every
// ancestor of both shared, so that the check that a directory does not move
// into its own subtree holds until commit. The inode keeps its id; only its
// row moves (and its lease row, if it is being written).
func (e *Engine) Rename(ctx context.Context, u meta.User, src, dst string, opts meta.RenameOptions) error {
	const op = "rename"
	sp, err := clean(op, src)
	if err != nil {
		return err
	}
	dp, err := clean(op, dst)
	if err != nil {
		return err
	}
	if sp == meta.RootPath {
		return meta.Errorf(op, sp, meta.ErrInvalidArgument, "the root directory cannot be renamed")
	}
	if meta.IsAncestor(sp, dp) {
		return meta.Errorf(op, dp, meta.ErrInvalidArgument, "cannot move %s into its own subtree", sp)
	}
	// into is set when dst turns out to be an existing directory and the
	// source moves inside it (no overwrite): the next attempt locks dst/name.
	into := false
	// dirMove is set when the source turns out to be a directory: the next
	// attempt locks the ancestors of both paths shared, so that the check
	// that a directory does not move into its own subtree holds until commit
	// (docs/NAMESPACE.md). A file has no subtree, so a file's rename reads
	// the ancestors read-committed, as HopsFS does: no lock on the root and
	// the directories every path goes through.
	dirMove := false
	rename := func(t *tx) error {
		target := dp
		if into {
			_, name := meta.ParentPath(sp)
			target = meta.JoinPath(dp, name)
		}
		anc := store.ReadCommitted
		if dirMove {
			anc = store.Shared
		}
		rs, err := t.resolve(ctx,
			want{path: sp, last: store.Exclusive, parent: store.Exclusive, ancestors: anc},
			want{path: target, last: store.Exclusive, parent: store.Exclusive, ancestors: anc})
		if err != nil {
			return err
		}
		s, d := rs[0], rs[1]
		if into {
			// dst was a directory in the attempt before; if it is gone, or
			// no longer a directory, the rename is onto dst itself again
			// (tests/linearizability, TestRenameIntoVanishedDirectory).
			if p := d.parent(); p == nil || p.Type != meta.TypeDir {
				into = false
				return errRetry
			}
		}
		n, err := t.existing(op, s)
		if err != nil {
			return err
		}
		if n.Type == meta.TypeDir && !dirMove {
			dirMove = true
			return errRetry
		}
		if n.Type == meta.TypeDir && n.Children > 0 && n.ID != t.op.own {
			return errNeedSubtree // a move of a subtree: under the protocol (subtree.go)
		}
		if err := t.checkAncestors(op, d); err != nil {
			return err
		}
		if target == sp {
			return nil // renaming a path onto itself changes nothing
		}
		old := d.last()
		if !into && !opts.Overwrite && old != nil && old.Type == meta.TypeDir {
			into = true
			return errRetry
		}
		sParent, dParent := s.parent(), d.parent()
		if err := t.require(op, s.prefix(s.depth()-1), sParent, permW|permX); err != nil {
			return err
		}
		if err := t.require(op, d.prefix(d.depth()-1), dParent, permW|permX); err != nil {
			return err
		}
		if err := t.checkSticky(op, sp, sParent, n); err != nil {
			return err
		}
		if n.Type == meta.TypeDir {
			for _, a := range d.chain[:d.depth()] {
				if a.ID == n.ID {
					return meta.Errorf(op, dp, meta.ErrInvalidArgument, "cannot move %s into its own subtree", sp)
				}
			}
		}
		if old != nil {
			if old.ID == n.ID {
				return meta.Errorf(op, target, meta.ErrExists, "the source is already there")
			}
			if !opts.Overwrite {
				return meta.Errorf(op, target, meta.ErrExists, "")
			}
			if err := t.replaceable(op, target, n, old); err != nil {
				return err
			}
			if err := t.checkSticky(op, target, dParent, old); err != nil {
				return err
			}
		}
		if err := t.moveUsage(ctx, op, s, d, n, old); err != nil {
			return err
		}
		if old != nil {
			if err := t.removeFile(ctx, old); err != nil { // files and empty directories alike
				return err
			}
			dParent.Children--
		}
		t.del(n)
		moved := *n
		moved.Parent, moved.Name = dParent.ID, d.name()
		if old == nil {
			t.create(&moved)
		} else {
			t.put(&moved) // over the entry it replaces
		}
		if moved.UnderConstruction() {
			t.putLease(&moved, d.path)
		}
		if moved.Type == meta.TypeDir && n.Children > 0 {
			if err := t.moveLeases(ctx, sp, d.path); err != nil {
				return err
			}
		}
		sParent.Children--
		sParent.Mtime = t.now
		dParent.Children++
		dParent.Mtime = t.now
		t.put(sParent)
		t.put(dParent)
		return nil
	}
	plain := func() error { _, err := e.runOnce(ctx, op, sp, u, rename); return err }
	for {
		err := plain()
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
		// The source is a non-empty directory: the move is one row
		// change, but after a quiesce of the subtree, so that no
		// operation that resolved a path through it before commits after.
		err = e.subtreeOp(ctx, op, sp, u, subtree.KindRename, e.oneTxn(ctx, op, sp, u, rename), plain)
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
	}
}

// replaceable checks that old may be overwritten by n, as HDFS's rename with
// OVERWRITE allows: a file by a file, an empty directory by a directory.
func (t *tx) replaceable(op, path string, n, old *store.Inode) error {
	switch {
	case old.Type == meta.TypeDir && n.Type != meta.TypeDir:
		return meta.Errorf(op, path, meta.ErrIsDir, "a file cannot replace a directory")
	case old.Type != meta.TypeDir && n.Type == meta.TypeDir:
		return meta.Errorf(op, path, meta.ErrNotDir, "a directory cannot replace a file")
	case old.Type == meta.TypeDir && old.Children > 0:
		return meta.Errorf(op, path, meta.ErrNotEmpty, "the destination directory is not empty")
	}
	return nil
}

// moveUsage moves the usage of n's subtree from the quota directories above
// the source to those above the destination (directories above both see no
// change), and releases what an overwritten old used.
func (t *tx) moveUsage(ctx context.Context, op string, s, d *resolved, n, old *store.Inode) error {
	srcDirs, dstDirs := s.chain[:s.depth()], d.chain[:d.depth()]
	common := make(map[uint64]bool)
	for _, a := range srcDirs {
		for _, b := range dstDirs {
			if a.ID == b.ID {
				common[a.ID] = true
			}
		}
	}
	var leaving, arriving []*store.Inode
	for _, a := range srcDirs {
		if a.HasQuota() && !common[a.ID] {
			leaving = append(leaving, a)
		}
	}
	for _, b := range dstDirs {
		if b.HasQuota() && !common[b.ID] {
			arriving = append(arriving, b)
		}
	}
	if old != nil {
		var ou usage
		ou.add(old)
		if err := t.charge(op, d.path, dstDirs, -ou.inodes(), -ou.space); err != nil {
			return err
		}
	}
	if len(leaving) == 0 && len(arriving) == 0 {
		return nil
	}
	// The subtree's usage moves to other quotas: lock it (shared, NoWait) as
	// it is counted, so that no create, write or rename into it commits
	// between the count and this commit and is charged where it no longer is.
	// (HopsFS's subtree protocol, the next stage, will do this for big trees.)
	_, use, err := t.lockSubtree(ctx, op, s.path, n, store.Shared, 0)
	if err != nil {
		return err
	}
	if err := t.charge(op, s.path, leaving, -use.inodes(), -use.space); err != nil {
		return err
	}
	return t.charge(op, d.path, arriving, use.inodes(), use.space)
}
