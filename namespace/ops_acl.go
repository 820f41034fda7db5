package namespace

import (
	"context"
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// POSIX ACLs as HDFS keeps them: an inode's extended entries live in its own
// row (store.Inode.ACL, see store/acl.go for why), the transformations and
// the access check are meta's (aclcheck.go), shared with the in-memory file
// system of the tests.

var _ meta.ACLs = (*Engine)(nil)

// changeAcl runs one ACL-changing operation: the path locked exclusive, the
// owner or a superuser, the whole ACL transformed by fn and stored back as
// extended entries and permission bits.
func (e *Engine) changeAcl(ctx context.Context, op, path string, u meta.User, fn func(acl []meta.AclEntry) ([]meta.AclEntry, error)) error {
	return e.update(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		if n.Type == meta.TypeSymlink {
			return meta.Errorf(op, r.path, meta.ErrUnresolvedLink, "%s is a symbolic link to %s", r.path, n.Symlink)
		}
		if err := t.requireOwner(op, r.path, n); err != nil {
			return err
		}
		ext, err := store.DecodeACL(n.ACL)
		if err != nil {
			return meta.Errorf(op, r.path, meta.ErrInternal, "%v", err)
		}
		acl, err := fn(meta.LogicalAcl(n.Perm, ext))
		if err != nil {
			return aclError(op, r.path, err, "")
		}
		ext, perm, err := meta.SplitAcl(acl, n.Perm, n.Type == meta.TypeDir)
		if err != nil {
			return aclError(op, r.path, err, " Path: "+r.path)
		}
		n.ACL, n.Perm = store.EncodeACL(ext), perm
		return nil
	})
}

// aclError is an invalid-argument error that also matches meta.ErrAcl (the
// edges answer HDFS's AclException), its detail HDFS's message.
func aclError(op, path string, err error, suffix string) error {
	return &meta.OpError{Op: op, Path: path, Err: fmt.Errorf("%w: %w", meta.ErrInvalidArgument, err), Detail: err.Error() + suffix}
}

// ModifyAclEntries implements meta.ACLs. Locks: the path exclusive.
func (e *Engine) ModifyAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return e.changeAcl(ctx, "modify acl entries", path, u, func(acl []meta.AclEntry) ([]meta.AclEntry, error) {
		return meta.ModifyAcl(acl, entries)
	})
}

// RemoveAclEntries implements meta.ACLs. Locks: the path exclusive.
func (e *Engine) RemoveAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return e.changeAcl(ctx, "remove acl entries", path, u, func(acl []meta.AclEntry) ([]meta.AclEntry, error) {
		return meta.RemoveAclEntries(acl, entries)
	})
}

// RemoveDefaultAcl implements meta.ACLs. Locks: the path exclusive.
func (e *Engine) RemoveDefaultAcl(ctx context.Context, u meta.User, path string) error {
	return e.changeAcl(ctx, "remove default acl", path, u, meta.RemoveDefaultAcl)
}

// RemoveAcl implements meta.ACLs: back to the permission bits alone.
// Locks: the path exclusive.
func (e *Engine) RemoveAcl(ctx context.Context, u meta.User, path string) error {
	return e.changeAcl(ctx, "remove acl", path, u, func(acl []meta.AclEntry) ([]meta.AclEntry, error) {
		// HDFS's removeINodeAcl: the owning group's entry, not the mask,
		// becomes the group bits again.
		out := make([]meta.AclEntry, 0, 3)
		for _, e := range acl {
			if e.Scope == meta.AclAccess && e.Name == "" && e.Type != meta.AclMask {
				out = append(out, e)
			}
		}
		return out, nil
	})
}

// SetAcl implements meta.ACLs. Locks: the path exclusive.
func (e *Engine) SetAcl(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return e.changeAcl(ctx, "set acl", path, u, func(acl []meta.AclEntry) ([]meta.AclEntry, error) {
		return meta.ReplaceAcl(acl, entries)
	})
}

// GetAclStatus implements meta.ACLs. Locks: none (one row, read committed).
func (e *Engine) GetAclStatus(ctx context.Context, u meta.User, path string) (*meta.AclStatus, error) {
	const op = "get acl status"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	var out *meta.AclStatus
	err = e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		ext, err := store.DecodeACL(n.ACL)
		if err != nil {
			return meta.Errorf(op, p, meta.ErrInternal, "%v", err)
		}
		out = &meta.AclStatus{Owner: n.Owner, Group: n.Group, Perm: n.Perm,
			StickyBit: n.Perm&meta.StickyBit != 0, Entries: meta.AclStatusEntries(ext)}
		return nil
	})
	return out, err
}

// inheritAcl gives the new file or directory n the default ACL of its
// parent, if it has one (HDFS's copyINodeDefaultAcl): n.Perm is the
// requested permission, filtering the copied owner, mask and other entries.
func (t *tx) inheritAcl(parent, n *store.Inode) {
	pext, err := store.DecodeACL(parent.ACL)
	if err != nil {
		return // checked when the row was decoded: cannot happen
	}
	if ext, perm, ok := meta.InheritAcl(pext, n.Perm, n.Type == meta.TypeDir); ok {
		n.ACL, n.Perm = store.EncodeACL(ext), perm
	}
}
