package namespace

import (
	"slices"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Access bits, as in rwx.
const (
	permR meta.Perm = 4
	permW meta.Perm = 2
	permX meta.Perm = 1
)

func accessName(bits meta.Perm) string {
	b := []byte("---")
	if bits&permR != 0 {
		b[0] = 'r'
	}
	if bits&permW != 0 {
		b[1] = 'w'
	}
	if bits&permX != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// checkUser refuses a caller without a name: an empty user would own what
// it creates as nobody, and match the owner class of nothing. (The WebHDFS
// gateway gives a request without user.name its default user, as HDFS does;
// over the RPC the name is always explicit.)
func checkUser(op, path string, u meta.User) error {
	switch {
	case u.Name == "":
		return meta.Errorf(op, path, meta.ErrPermission, "no user name: anonymous callers are refused")
	case strings.IndexByte(u.Name, 0) >= 0:
		return meta.Errorf(op, path, meta.ErrInvalidArgument, "the user name %q contains a NUL byte", u.Name)
	}
	return nil
}

// IsSuperuser implements meta.Superusers: the configured superuser and the
// members of the supergroup.
func (e *Engine) IsSuperuser(u meta.User) bool {
	if u.Name == "" {
		return false
	}
	_, super := e.identity(u.Name)
	return super
}

var _ meta.Superusers = (*Engine)(nil)

// allowed reports whether the caller has all of bits on n, by POSIX rules: the
// owner class if the caller owns it, else the group class if a member, else
// other. Superusers have every right.
func (t *tx) allowed(n *store.Inode, bits meta.Perm) bool {
	if t.super {
		return true
	}
	if n.ACL != "" {
		return t.aclAllowed(n, bits)
	}
	var class meta.Perm
	switch {
	case n.Owner == t.user:
		class = (n.Perm >> 6) & 7
	case t.inGroup(n.Group):
		class = (n.Perm >> 3) & 7
	default:
		class = n.Perm & 7
	}
	return class&bits == bits
}

// aclAllowed is allowed for an inode with an ACL, by HDFS's rules
// (meta.AclAllows). It is apart so that the common path stays small.
func (t *tx) aclAllowed(n *store.Inode, bits meta.Perm) bool {
	ext, err := store.DecodeACL(n.ACL)
	if err != nil {
		return false // the row was checked when decoded: cannot happen
	}
	return meta.AclAllows(n.Owner, n.Group, n.Perm, ext, t.user, t.inGroup, bits)
}

func (t *tx) inGroup(g string) bool { return slices.Contains(t.groups, g) }

// require fails with ErrPermission unless the caller has bits on n.
func (t *tx) require(op, path string, n *store.Inode, bits meta.Perm) error {
	if t.allowed(n, bits) {
		return nil
	}
	return meta.Errorf(op, path, meta.ErrPermission,
		"user %s needs %s on %s (%s %s:%s)", t.user, accessName(bits), nodeDesc(n, path), meta.Symbolic(n.Type, n.Perm), n.Owner, n.Group)
}

func nodeDesc(n *store.Inode, path string) string {
	if path == "" {
		return n.Name
	}
	return path
}

// requireOwner fails unless the caller owns n or is a superuser.
func (t *tx) requireOwner(op, path string, n *store.Inode) error {
	if t.super || n.Owner == t.user {
		return nil
	}
	return meta.Errorf(op, path, meta.ErrPermission, "user %s is not the owner (%s) nor a superuser", t.user, n.Owner)
}

// checkAncestors verifies every ancestor of r's last component: it exists, is a
// directory and grants search (x) to the caller.
func (t *tx) checkAncestors(op string, r *resolved) error {
	for k := 0; k < r.depth(); k++ {
		d := r.chain[k]
		switch {
		case d == nil:
			return meta.Errorf(op, r.path, meta.ErrNotFound, "%s does not exist", r.prefix(k))
		case d.Type == meta.TypeSymlink:
			return meta.Errorf(op, r.path, meta.ErrUnresolvedLink, "%s is a symbolic link to %s", r.prefix(k), d.Symlink)
		case d.Type == meta.TypeFile:
			return meta.Errorf(op, r.path, meta.ErrNotDir, "%s is a file", r.prefix(k))
		case !t.allowed(d, permX):
			return t.require(op, r.prefix(k), d, permX)
		}
	}
	return nil
}

// existing checks the ancestors and that the path itself exists.
func (t *tx) existing(op string, r *resolved) (*store.Inode, error) {
	if err := t.checkAncestors(op, r); err != nil {
		return nil, err
	}
	n := r.last()
	if n == nil {
		return nil, meta.Errorf(op, r.path, meta.ErrNotFound, "")
	}
	return n, nil
}

// checkSticky enforces the sticky bit of dir on removing or renaming child.
func (t *tx) checkSticky(op, path string, dir, child *store.Inode) error {
	if dir.Perm&meta.StickyBit == 0 || t.super || t.user == dir.Owner || t.user == child.Owner {
		return nil
	}
	return meta.Errorf(op, path, meta.ErrPermission, "sticky bit set on the parent: only the owner of %s or of its directory may remove it", path)
}
