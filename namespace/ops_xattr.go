package namespace

import (
	"context"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Extended attributes, with HDFS's namespaces and permission rules
// (XAttrPermissionFilter, FSDirXAttrOp). Each attribute is a row keyed by the
// inode id (store/acl.go); the inode's XAttrs flag says whether there are
// any, so that deleting an inode without attributes reads nothing more.

var _ meta.XAttrs = (*Engine)(nil)

// unreadableBySuperuser is the one security.* attribute HDFS lets clients
// set (without a value): it marks a file whose content superusers may not
// read.
const unreadableBySuperuser = "security.hdfs.unreadable.by.superuser"

var xattrNamespaces = [...]string{"user", "trusted", "security", "system", "raw"}

// xattrName checks name's namespace prefix and returns it with the
// namespace lowercased (HDFS's XAttrHelper.buildXAttr) and the length of
// its prefix.
func xattrName(op, path, name string) (string, int, error) {
	dot := strings.IndexByte(name, '.')
	if name == "" {
		return "", 0, meta.Errorf(op, path, meta.ErrInvalidArgument, "XAttr name cannot be null.")
	}
	if dot > 0 {
		ns := strings.ToLower(name[:dot])
		for _, known := range xattrNamespaces {
			if ns != known {
				continue
			}
			if dot == len(name)-1 {
				return "", 0, meta.Errorf(op, path, meta.ErrInvalidArgument, "XAttr name cannot be empty.")
			}
			if strings.IndexByte(name, 0) >= 0 {
				return "", 0, meta.Errorf(op, path, meta.ErrInvalidArgument, "XAttr name %q contains a NUL byte.", name)
			}
			return ns + name[dot:], dot + 1, nil
		}
	}
	return "", 0, meta.Errorf(op, path, meta.ErrInvalidArgument,
		"An XAttr name must be prefixed with user/trusted/security/system/raw, followed by a '.'")
}

// xattrVisible is HDFS's filter of what a caller may name or see: user.*
// always, trusted.* for superusers, security.hdfs.unreadable.by.superuser,
// raw.* only through a /.reserved/raw path (raw); never system.* (the
// server's own).
func (t *tx) xattrVisible(name string, raw bool) bool {
	switch {
	case strings.HasPrefix(name, "user."):
		return true
	case strings.HasPrefix(name, "trusted."):
		return t.super
	case strings.HasPrefix(name, "raw."):
		return raw
	}
	return name == unreadableBySuperuser
}

func (t *tx) xattrAllowed(op, path, name string, raw bool) error {
	if t.xattrVisible(name, raw) {
		return nil
	}
	return meta.Errorf(op, path, meta.ErrPermission, "User doesn't have permission for xattr: %s", name)
}

// xattrChange is HDFS's checkXAttrChangeAccess: a user.* attribute takes
// write permission on the inode, or ownership of a sticky directory.
func (t *tx) xattrChange(op, path, name string, n *store.Inode) error {
	if !strings.HasPrefix(name, "user.") {
		return nil
	}
	if n.Type == meta.TypeDir && n.Perm&meta.StickyBit != 0 {
		return t.requireOwner(op, path, n)
	}
	return t.require(op, path, n, permW)
}

// xattrs scans the attributes of n (none when its flag is clear), values
// copied.
func (t *tx) xattrs(ctx context.Context, n *store.Inode, fn func(name string, value []byte)) error {
	if !n.XAttrs {
		return nil
	}
	start, end := store.XAttrsRange(n.ID)
	return t.st.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		if _, name, ok := store.DecodeXAttrKey(k); ok {
			fn(name, append([]byte{}, v...))
		}
		return true
	})
}

// dropXAttrs deletes the attribute rows of n, which is being deleted.
func (t *tx) dropXAttrs(ctx context.Context, n *store.Inode) error {
	var names []string
	if err := t.xattrs(ctx, n, func(name string, _ []byte) { names = append(names, name) }); err != nil {
		return err
	}
	for _, name := range names {
		t.delRaw(store.XAttrKey(n.ID, name))
	}
	return nil
}

// readableBySuperuser refuses a superuser the content of a file marked
// security.hdfs.unreadable.by.superuser, with HDFS's words. Only files with
// attributes read by superusers get here: one more row.
func (t *tx) readableBySuperuser(ctx context.Context, op, path string, n *store.Inode) error {
	vals, err := t.st.Read(ctx, []store.ReadReq{{Key: store.XAttrKey(n.ID, unreadableBySuperuser)}})
	if err != nil {
		return err
	}
	if vals[0] != nil {
		return meta.Errorf(op, path, meta.ErrPermission,
			"Access is denied for %s since the superuser is not allowed to perform this operation.", t.user)
	}
	return nil
}

// rawPath resolves HDFS's /.reserved/raw/P to /P, reporting whether path
// was one: raw.* attributes are named and seen only through such a path.
// Reading through it is open to all (HDFS's DirOp.READ); changing through it
// takes the superuser (FSDirectory.resolvePath). Other paths are returned
// as given, for clean.
func (e *Engine) rawPath(op, path string, u meta.User, change bool) (string, bool, error) {
	if !strings.Contains(path, reservedDir) {
		return path, false, nil // the common case, without cleaning twice
	}
	p, err := meta.CleanPath(op, path)
	if err != nil || !strings.HasPrefix(p, reservedDir+rawDir) {
		return path, false, nil
	}
	rest := p[len(reservedDir+rawDir):]
	switch {
	case rest == "":
		rest = meta.RootPath
	case rest[0] != '/':
		return path, false, nil // /.reserved/rawx: an ordinary name
	}
	if change {
		if err := checkUser(op, p, u); err != nil {
			return "", false, err
		}
		if _, super := e.identity(u.Name); !super {
			return "", false, meta.Errorf(op, p, meta.ErrPermission,
				"Access denied for user %s. Superuser privilege is required", u.Name)
		}
	}
	return rest, true, nil
}

// SetXAttr implements meta.XAttrs. Locks: the path exclusive (its attribute
// rows are written under its lock).
func (e *Engine) SetXAttr(ctx context.Context, u meta.User, path string, x meta.XAttr, flag meta.XAttrSetFlag) error {
	const op = "set xattr"
	path, raw, err := e.rawPath(op, path, u, true)
	if err != nil {
		return err
	}
	return e.update(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		name, plen, err := xattrName(op, r.path, x.Name)
		if err != nil {
			return err
		}
		if err := t.xattrAllowed(op, r.path, name, raw); err != nil {
			return err
		}
		if name == unreadableBySuperuser {
			if len(x.Value) != 0 {
				return meta.Errorf(op, r.path, meta.ErrPermission,
					"Attempt to set a value for '%s'. Values are not allowed for this xattr.", unreadableBySuperuser)
			}
			if n.Type != meta.TypeFile {
				return meta.Errorf(op, r.path, meta.ErrInvalidArgument, "Can only set '%s' on a file.", unreadableBySuperuser)
			}
		}
		if n.Type == meta.TypeSymlink {
			return meta.Errorf(op, r.path, meta.ErrUnresolvedLink, "%s is a symbolic link to %s", r.path, n.Symlink)
		}
		if size := len(name) - plen + len(x.Value); size > t.e.cfg.MaxXAttrSize {
			return meta.Errorf(op, r.path, meta.ErrInvalidArgument,
				"The XAttr is too big. The maximum combined size of the name and value is %d, but the total size is %d", t.e.cfg.MaxXAttrSize, size)
		}
		if err := t.xattrChange(op, r.path, name, n); err != nil {
			return err
		}
		count, exists := 0, false
		if err := t.xattrs(ctx, n, func(k string, _ []byte) {
			count++
			exists = exists || k == name
		}); err != nil {
			return err
		}
		switch {
		case exists && flag&meta.XAttrReplace == 0:
			return meta.Errorf(op, r.path, meta.ErrExists, "XAttr: %s already exists. The REPLACE flag must be specified.", name)
		case !exists && flag&meta.XAttrCreate == 0:
			return meta.Errorf(op, r.path, meta.ErrNotFound, "XAttr: %s does not exist. The CREATE flag must be specified.", name)
		case !exists && count >= t.e.cfg.MaxXAttrsPerInode:
			// ErrTooLarge, as the in-memory reference says: the edges give
			// it HDFS's IOException, where a bad name is an argument error.
			return meta.Errorf(op, r.path, meta.ErrTooLarge,
				"Cannot add additional XAttr to inode, would exceed limit of %d", t.e.cfg.MaxXAttrsPerInode)
		}
		t.putRaw(store.XAttrKey(n.ID, name), x.Value)
		n.XAttrs = true
		return nil
	})
}

// RemoveXAttr implements meta.XAttrs. Locks: the path exclusive.
func (e *Engine) RemoveXAttr(ctx context.Context, u meta.User, path, name string) error {
	const op = "remove xattr"
	path, raw, err := e.rawPath(op, path, u, true)
	if err != nil {
		return err
	}
	return e.update(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		name, _, err := xattrName(op, r.path, name)
		if err != nil {
			return err
		}
		if err := t.xattrAllowed(op, r.path, name, raw); err != nil {
			return err
		}
		if name == unreadableBySuperuser {
			// HDFS's words: once set, the mark stays with the file.
			return meta.Errorf(op, r.path, meta.ErrPermission, "The xattr '%s' can not be deleted.", unreadableBySuperuser)
		}
		if err := t.xattrChange(op, r.path, name, n); err != nil {
			return err
		}
		count, exists := 0, false
		if err := t.xattrs(ctx, n, func(k string, _ []byte) {
			count++
			exists = exists || k == name
		}); err != nil {
			return err
		}
		if !exists {
			return meta.Errorf(op, r.path, meta.ErrNotFound, "No matching attributes found for remove operation")
		}
		t.delRaw(store.XAttrKey(n.ID, name))
		n.XAttrs = count > 1
		return nil
	})
}

// readXAttrs runs fn on the existing path locked shared, so that its
// attribute rows are read as one state.
func (e *Engine) readXAttrs(ctx context.Context, op, path string, u meta.User, fn func(t *tx, r *resolved, n *store.Inode) error) error {
	p, _, err := e.rawPath(op, path, u, false)
	if err != nil {
		return err
	}
	p, err = clean(op, p)
	if err != nil {
		return err
	}
	return e.run(ctx, op, p, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Shared})
		if err != nil {
			return err
		}
		n, err := t.existing(op, rs[0])
		if err != nil {
			return err
		}
		return fn(t, rs[0], n)
	})
}

// GetXAttrs implements meta.XAttrs: read permission on the inode, as in
// HDFS. Locks: the path shared.
func (e *Engine) GetXAttrs(ctx context.Context, u meta.User, path string, names []string) ([]meta.XAttr, error) {
	const op = "get xattrs"
	_, raw, err := e.rawPath(op, path, u, false)
	if err != nil {
		return nil, err
	}
	var out []meta.XAttr
	err = e.readXAttrs(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		want := make(map[string]bool, len(names))
		for _, name := range names {
			name, _, err := xattrName(op, r.path, name)
			if err != nil {
				return err
			}
			if err := t.xattrAllowed(op, r.path, name, raw); err != nil {
				return err
			}
			want[name] = true
		}
		if err := t.require(op, r.path, n, permR); err != nil {
			return err
		}
		out = nil
		if err := t.xattrs(ctx, n, func(name string, v []byte) {
			if len(names) == 0 && t.xattrVisible(name, raw) || want[name] {
				out = append(out, meta.XAttr{Name: name, Value: v})
			}
		}); err != nil {
			return err
		}
		if len(out) != len(want) && len(names) > 0 {
			return meta.Errorf(op, r.path, meta.ErrNotFound, "At least one of the attributes provided was not found.")
		}
		return nil
	})
	return out, err
}

// ListXAttrs implements meta.XAttrs: read permission on the inode, as HDFS
// 3.4.1 answers. Locks: the path shared.
func (e *Engine) ListXAttrs(ctx context.Context, u meta.User, path string) ([]string, error) {
	const op = "list xattrs"
	_, raw, err := e.rawPath(op, path, u, false)
	if err != nil {
		return nil, err
	}
	var out []string
	err = e.readXAttrs(ctx, op, path, u, func(t *tx, r *resolved, n *store.Inode) error {
		// Read permission, as HDFS 3.4.1 answers (403, access=READ): the
		// names are the inode's data as much as the values are.
		if err := t.require(op, r.path, n, permR); err != nil {
			return err
		}
		out = nil
		return t.xattrs(ctx, n, func(name string, _ []byte) {
			if t.xattrVisible(name, raw) {
				out = append(out, name)
			}
		})
	})
	return out, err
}
