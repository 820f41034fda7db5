package namespace

import (
	"context"

	"github.com/nimbus-fs/nimbus/meta"
)

var _ meta.AccessChecker = (*Engine)(nil)

// CheckAccess implements meta.AccessChecker with the check every operation
// makes (search on the ancestors, then mode on the path itself, ACLs
// included). A final symlink is checked as the inode it is, as Stat sees it.
// Locks: none (read committed, as GetAclStatus).
func (e *Engine) CheckAccess(ctx context.Context, u meta.User, path string, mode meta.Perm) error {
	const op = "check access"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	if mode&^(permR|permW|permX) != 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "access mode %o: want rwx bits (0 to 7)", mode)
	}
	return e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		return t.require(op, p, n, mode)
	})
}
