package namespace

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// update runs the common shape of the attribute operations: lock the path
// exclusive, check it exists, apply fn to the row and write it back.
func (e *Engine) update(ctx context.Context, op, path string, u meta.User, fn func(t *tx, r *resolved, n *store.Inode) error) error {
	return e.updateKind(ctx, op, path, u, 0, fn)
}

// updateKind is update for an operation that HopsFS runs as a subtree
// operation (kind, 0 for none) on a non-empty directory: a chmod or chown
// changes what may reach the paths below, so it waits for the operations
// under way there (subtree.go).
func (e *Engine) updateKind(ctx context.Context, op, path string, u meta.User, kind subtree.Kind, fn func(t *tx, r *resolved, n *store.Inode) error) error {
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	body := func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Exclusive})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		if kind != 0 && n.Type == meta.TypeDir && n.Children > 0 && n.ID != t.op.own {
			return errNeedSubtree
		}
		if err := fn(t, rs[0], n); err != nil {
			return err
		}
		t.put(n)
		return nil
	}
	plain := func() error { _, err := e.runOnce(ctx, op, p, u, body); return err }
	for {
		err := plain()
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
		err = e.subtreeOp(ctx, op, p, u, kind, e.oneTxn(ctx, op, p, u, body), plain)
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
	}
}

// attrChange is a chmod's or chown's change to one inode, split so that a
// recursive one (ops_attr_recursive.go) checks every inode before it changes
// any: check says whether the caller may make it (on the inode at path),
// apply makes it.
type attrChange struct {
	op    string
	check func(t *tx, path string, n *store.Inode) error
	apply func(n *store.Inode)
}

const (
	opChmod = "set permission"
	opChown = "set owner"
)

func chmodChange(perm meta.Perm) attrChange {
	return attrChange{op: opChmod,
		check: func(t *tx, path string, n *store.Inode) error { return t.checkChmod(path, n, perm) },
		apply: func(n *store.Inode) { n.Perm = perm },
	}
}

func chownChange(owner, group string) attrChange {
	return attrChange{op: opChown,
		check: func(t *tx, path string, n *store.Inode) error { return t.checkChown(path, n, owner, group) },
		apply: func(n *store.Inode) { setOwner(n, owner, group) },
	}
}

// checkChmod: the owner or a superuser may set the mode bits. On an inode
// with an ACL the group bits are the mask entry (HDFS's chmod), so the ACL
// needs no change.
func (t *tx) checkChmod(path string, n *store.Inode, perm meta.Perm) error {
	if perm&^meta.PermMask != 0 {
		return meta.Errorf(opChmod, path, meta.ErrInvalidArgument, "permission %o out of range", perm)
	}
	return t.requireOwner(opChmod, path, n)
}

// checkChown: only a superuser changes the owner; the owner may change the
// group to one of its own groups.
func (t *tx) checkChown(path string, n *store.Inode, owner, group string) error {
	const op = opChown
	if owner == "" && group == "" {
		return meta.Errorf(op, path, meta.ErrInvalidArgument, "neither owner nor group given")
	}
	if owner != "" && owner != n.Owner && !t.super {
		return meta.Errorf(op, path, meta.ErrPermission, "only a superuser may change the owner")
	}
	if group != "" && group != n.Group && !t.super {
		if n.Owner != t.user {
			return meta.Errorf(op, path, meta.ErrPermission, "user %s is not the owner (%s)", t.user, n.Owner)
		}
		if !t.inGroup(group) {
			return meta.Errorf(op, path, meta.ErrPermission, "user %s is not in group %s", t.user, group)
		}
	}
	for _, s := range []string{owner, group} {
		if len(s) > meta.MaxNameLen || containsAny(s, "/:\x00\n") {
			return meta.Errorf(op, path, meta.ErrInvalidArgument, "bad user or group name %q", s)
		}
	}
	return nil
}

func setOwner(n *store.Inode, owner, group string) {
	if owner != "" {
		n.Owner = owner
	}
	if group != "" {
		n.Group = group
	}
}

// SetPermission implements meta.FileSystem. Locks: the path exclusive.
func (e *Engine) SetPermission(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	return e.updateKind(ctx, opChmod, path, u, subtree.KindChmod, func(t *tx, r *resolved, n *store.Inode) error {
		if err := t.checkChmod(r.path, n, perm); err != nil {
			return err
		}
		n.Perm = perm
		return nil
	})
}

// SetOwner implements meta.FileSystem. Locks: the path exclusive.
func (e *Engine) SetOwner(ctx context.Context, u meta.User, path, owner, group string) error {
	return e.updateKind(ctx, opChown, path, u, subtree.KindChown, func(t *tx, r *resolved, n *store.Inode) error {
		if err := t.checkChown(r.path, n, owner, group); err != nil {
			return err
		}
		setOwner(n, owner, group)
		return nil
	})
}

func containsAny(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return true
			}
		}
	}
	return false
}

// SetTimes implements meta.FileSystem. Locks: the path exclusive.
func (e *Engine) SetTimes(ctx context.Context, u meta.User, path string, mtime, atime int64) error {
	const op = "set times"
	return e.update(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		if mtime < -1 || atime < -1 {
			return meta.Errorf(op, r.path, meta.ErrInvalidArgument, "negative time")
		}
		if err := t.require(op, r.path, n, permW); err != nil && n.Owner != t.user {
			return err
		}
		if mtime != -1 {
			n.Mtime = mtime
		}
		if atime != -1 {
			n.Atime = atime
		}
		return nil
	})
}

// SetReplication implements meta.FileSystem. Locks: the file exclusive (and
// directories with a space quota above it).
func (e *Engine) SetReplication(ctx context.Context, u meta.User, path string, replication uint16) error {
	const op = "set replication"
	return e.update(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		if err := checkFile(op, r.path, n); err != nil {
			return err
		}
		if replication == 0 || replication > t.e.cfg.MaxReplication {
			return meta.Errorf(op, r.path, meta.ErrInvalidArgument, "replication %d not in 1..%d", replication, t.e.cfg.MaxReplication)
		}
		if err := t.require(op, r.path, n, permW); err != nil {
			return err
		}
		delta := (int64(replication) - int64(n.Replication)) * n.Written
		if err := t.charge(op, r.path, r.chain[:r.depth()], 0, delta); err != nil {
			return err
		}
		n.Replication = replication
		return nil
	})
}

// SetQuota implements meta.FileSystem.
// Locks: the directory exclusive; on a non-empty directory, after the subtree
// protocol's quiesce (subtree.go): an operation below that read the
// directory before the quota was set, and so does not charge it, has
// committed before the count, and every later one waits at the flag until
// the quota is set, so that the usage counted is exact when it starts to
// apply.
func (e *Engine) SetQuota(ctx context.Context, u meta.User, dir string, nsQuota, spaceQuota int64) error {
	const op = "set quota"
	return e.updateKind(ctx, op, dir, u, subtree.KindQuota, func(t *tx, r *resolved, n *store.Inode) error {
		if !t.super {
			return meta.Errorf(op, r.path, meta.ErrPermission, "only a superuser may set quotas")
		}
		if n.Type != meta.TypeDir {
			return meta.Errorf(op, r.path, meta.ErrNotDir, "quotas apply to directories")
		}
		if nsQuota < -1 || spaceQuota < -1 {
			return meta.Errorf(op, r.path, meta.ErrInvalidArgument, "quota below -1")
		}
		if nsQuota != 0 {
			n.NsQuota = nsQuota
		}
		if spaceQuota != 0 {
			n.SpaceQuota = spaceQuota
		}
		if !n.HasQuota() {
			n.NsUsed, n.SpaceUsed = 0, 0
			return nil
		}
		// Counted with unlocked scans: an empty directory's row is locked
		// exclusive (an entry added needs it); a non-empty one is flagged
		// (updateKind sent it through the subtree protocol), and after the
		// quiesce nothing below it changes until the flag goes. The count
		// holds the directories not yet visited, not the subtree's rows.
		use, err := t.usage(ctx, op, r.path, n, false)
		if err != nil {
			return err
		}
		n.NsUsed, n.SpaceUsed = use.inodes(), use.space
		return nil
	})
}
