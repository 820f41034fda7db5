package metatest

import (
	"context"
	"slices"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

// ACLs and extended attributes, kept as HDFS's AclStorage keeps them: the
// permission bits carry the owner's, the other's and (with a mask) the
// mask's rights; the node keeps the rest — named users and groups, the
// owning group's entry when a mask exists, and the whole default ACL. The
// rules are HDFS's AclTransformation's, simply: entries replace those of the
// same scope, type and name; a mask missing from a changed scope is
// recomputed as the union of its group class; a default ACL lacking its
// user, group or other entry copies it from the access ACL.

var (
	_ meta.ACLs   = (*MemFS)(nil)
	_ meta.XAttrs = (*MemFS)(nil)
)

type aclKey struct {
	scope meta.AclScope
	typ   meta.AclType
	name  string
}

func keyOf(e meta.AclEntry) aclKey { return aclKey{e.Scope, e.Type, e.Name} }

// fullACL returns n's complete ACL: the access entries from the bits and the
// stored ones, then the default entries.
func fullACL(n *node) []meta.AclEntry {
	p := n.st.Perm
	out := []meta.AclEntry{{Type: meta.AclUser, Perm: p >> 6 & 7}}
	hasAccess := false
	for _, e := range n.acl {
		if e.Scope == meta.AclAccess {
			hasAccess = true
			out = append(out, e)
		}
	}
	if hasAccess {
		out = append(out, meta.AclEntry{Type: meta.AclMask, Perm: p >> 3 & 7})
	} else {
		out = append(out, meta.AclEntry{Type: meta.AclGroup, Perm: p >> 3 & 7})
	}
	out = append(out, meta.AclEntry{Type: meta.AclOther, Perm: p & 7})
	for _, e := range n.acl {
		if e.Scope == meta.AclDefault {
			out = append(out, e)
		}
	}
	return out
}

// sortACL orders entries as HDFS does: access before default, then user,
// group, mask, other, the unnamed entry of a type before named ones by name.
func sortACL(es []meta.AclEntry) {
	slices.SortFunc(es, func(a, b meta.AclEntry) int {
		if a.Scope != b.Scope {
			return int(a.Scope) - int(b.Scope)
		}
		if a.Type != b.Type {
			return int(a.Type) - int(b.Type)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// storeACL validates the complete ACL es (mask recomputed for the scopes in
// recalc) and writes it to n as bits and stored entries.
func storeACL(op, c string, n *node, es []meta.AclEntry, recalc [2]bool) error {
	invalid := func(why string) error { return meta.Errorf(op, c, meta.ErrInvalidArgument, "Invalid ACL: %s", why) }
	byScope := [2][]meta.AclEntry{}
	seen := map[aclKey]bool{}
	for _, e := range es {
		if seen[keyOf(e)] {
			return invalid("multiple entries with same scope, type and name")
		}
		seen[keyOf(e)] = true
		if e.Name != "" && (e.Type == meta.AclMask || e.Type == meta.AclOther) {
			return invalid("this entry type must not have a name: " + e.String())
		}
		byScope[e.Scope] = append(byScope[e.Scope], e)
	}
	// A default ACL takes its missing base entries from the access ACL.
	if len(byScope[meta.AclDefault]) > 0 {
		if n.st.Type != meta.TypeDir {
			return invalid("only directories may have a default ACL")
		}
		for _, a := range byScope[meta.AclAccess] {
			if a.Name == "" && a.Type != meta.AclMask && !seen[aclKey{meta.AclDefault, a.Type, ""}] {
				a.Scope = meta.AclDefault
				byScope[meta.AclDefault] = append(byScope[meta.AclDefault], a)
				seen[keyOf(a)] = true
			}
		}
	}
	for s := range byScope {
		scope := meta.AclScope(s)
		list := byScope[s]
		if len(list) == 0 {
			continue
		}
		var union meta.Perm
		named, hasMask := false, false
		for _, e := range list {
			switch {
			case e.Type == meta.AclMask:
				hasMask = true
			case e.Name != "":
				named = true
				union |= e.Perm
			case e.Type == meta.AclGroup:
				union |= e.Perm
			}
		}
		for _, t := range []meta.AclType{meta.AclUser, meta.AclGroup, meta.AclOther} {
			if !seen[aclKey{scope, t, ""}] {
				return invalid("the user, group and other entries are required.")
			}
		}
		if (named || hasMask) && (recalc[s] || !hasMask) {
			list = slices.DeleteFunc(list, func(e meta.AclEntry) bool { return e.Type == meta.AclMask })
			list = append(list, meta.AclEntry{Scope: scope, Type: meta.AclMask, Perm: union})
		}
		if len(list) > meta.MaxAclEntries {
			return invalid("ACL has too many entries")
		}
		sortACL(list)
		byScope[s] = list
	}
	access := byScope[meta.AclAccess]
	bits := n.st.Perm & meta.StickyBit
	var stored []meta.AclEntry
	var group, mask meta.Perm
	extended := false
	for _, e := range access {
		switch {
		case e.Type == meta.AclUser && e.Name == "":
			bits |= e.Perm << 6
		case e.Type == meta.AclOther:
			bits |= e.Perm
		case e.Type == meta.AclMask:
			mask, extended = e.Perm, true
		case e.Type == meta.AclGroup && e.Name == "":
			group = e.Perm
			stored = append(stored, e)
		default:
			stored = append(stored, e)
		}
	}
	if extended {
		bits |= mask << 3
	} else {
		bits |= group << 3
		stored = nil
	}
	n.st.Perm = bits
	n.acl = append(stored, byScope[meta.AclDefault]...)
	n.st.AclBit = len(n.acl) > 0
	return nil
}

// inheritDefaultACL gives a new file or directory its parent's default ACL,
// as HDFS's AclStorage.copyINodeDefaultAcl: the default entries become its
// access ACL, the owner's, the mask's (or without one the group's) and the
// other's rights cut by the mode it was created with; a directory also takes
// them as its own default ACL. Symlinks have no ACL.
func inheritDefaultACL(parent, n *node) {
	var def []meta.AclEntry
	hasMask := false
	for _, e := range parent.acl {
		if e.Scope == meta.AclDefault {
			def = append(def, e)
			hasMask = hasMask || e.Type == meta.AclMask
		}
	}
	if len(def) == 0 || n.st.Type == meta.TypeSymlink {
		return
	}
	mode := n.st.Perm
	bits := mode & meta.StickyBit
	var access []meta.AclEntry
	for _, e := range def {
		e.Scope = meta.AclAccess
		switch {
		case e.Type == meta.AclUser && e.Name == "":
			bits |= (e.Perm & (mode >> 6 & 7)) << 6
		case e.Type == meta.AclOther:
			bits |= e.Perm & mode & 7
		case e.Type == meta.AclMask, e.Type == meta.AclGroup && e.Name == "" && !hasMask:
			bits |= (e.Perm & (mode >> 3 & 7)) << 3
		default:
			access = append(access, e) // named entries, and the group's beside a mask
		}
	}
	n.st.Perm = bits
	n.acl = access
	if n.st.Type == meta.TypeDir {
		n.acl = append(n.acl, def...)
	}
	n.st.AclBit = len(n.acl) > 0
}

// changeACL runs f on path's complete ACL, as its owner or the superuser.
func (fs *MemFS) changeACL(ctx context.Context, op string, u meta.User, path string, f func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error)) error {
	return fs.update(ctx, op, path, func(n *node, c string) error {
		if u.Name != n.st.Owner && u.Name != Superuser {
			return meta.Errorf(op, c, meta.ErrPermission, "%s is not the owner", u.Name)
		}
		acl, recalc, err := f(n, c, fullACL(n))
		if err != nil {
			return err
		}
		return storeACL(op, c, n, acl, recalc)
	})
}

func scopesOf(es []meta.AclEntry) (r [2]bool) {
	for _, e := range es {
		r[e.Scope] = true
	}
	return r
}

// ModifyAclEntries implements meta.ACLs.
func (fs *MemFS) ModifyAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return fs.changeACL(ctx, "modifyAclEntries", u, path, func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error) {
		recalc := scopesOf(entries)
		for _, e := range entries {
			if e.Type == meta.AclMask {
				recalc[e.Scope] = false // given explicitly
			}
			if i := slices.IndexFunc(acl, func(a meta.AclEntry) bool { return keyOf(a) == keyOf(e) }); i >= 0 {
				acl[i] = e
			} else {
				acl = append(acl, e)
			}
		}
		return acl, recalc, nil
	})
}

// RemoveAclEntries implements meta.ACLs.
func (fs *MemFS) RemoveAclEntries(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return fs.changeACL(ctx, "removeAclEntries", u, path, func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error) {
		for _, e := range entries {
			if e.Name == "" && e.Type != meta.AclMask {
				return nil, [2]bool{}, meta.Errorf("removeAclEntries", c, meta.ErrInvalidArgument, "Invalid ACL: the user, group and other entries are required.")
			}
			acl = slices.DeleteFunc(acl, func(a meta.AclEntry) bool { return keyOf(a) == keyOf(e) })
		}
		return acl, scopesOf(entries), nil
	})
}

// RemoveDefaultAcl implements meta.ACLs.
func (fs *MemFS) RemoveDefaultAcl(ctx context.Context, u meta.User, path string) error {
	return fs.changeACL(ctx, "removeDefaultAcl", u, path, func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error) {
		return slices.DeleteFunc(acl, func(a meta.AclEntry) bool { return a.Scope == meta.AclDefault }), [2]bool{}, nil
	})
}

// RemoveAcl implements meta.ACLs: the owning group's entry, not the mask,
// gives the group bits back.
func (fs *MemFS) RemoveAcl(ctx context.Context, u meta.User, path string) error {
	return fs.changeACL(ctx, "removeAcl", u, path, func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error) {
		group := n.st.Perm >> 3 & 7
		for _, e := range n.acl {
			if e.Scope == meta.AclAccess && e.Type == meta.AclGroup && e.Name == "" {
				group = e.Perm
			}
		}
		p := n.st.Perm
		return []meta.AclEntry{{Type: meta.AclUser, Perm: p >> 6 & 7}, {Type: meta.AclGroup, Perm: group}, {Type: meta.AclOther, Perm: p & 7}}, [2]bool{}, nil
	})
}

// SetAcl implements meta.ACLs: entries replace the ACL; a scope they leave
// out is kept (HDFS's replaceAclEntries).
func (fs *MemFS) SetAcl(ctx context.Context, u meta.User, path string, entries []meta.AclEntry) error {
	return fs.changeACL(ctx, "setAcl", u, path, func(n *node, c string, acl []meta.AclEntry) ([]meta.AclEntry, [2]bool, error) {
		given := scopesOf(entries)
		out := slices.Clone(entries)
		for _, a := range acl {
			if !given[a.Scope] {
				out = append(out, a)
			}
		}
		return out, [2]bool{}, nil
	})
}

// GetAclStatus implements meta.ACLs.
func (fs *MemFS) GetAclStatus(ctx context.Context, u meta.User, path string) (*meta.AclStatus, error) {
	c, err := fs.begin(ctx, "getAclStatus", path)
	if err != nil {
		return nil, err
	}
	defer fs.mu.Unlock()
	n, err := fs.lookup("getAclStatus", c)
	if err != nil {
		return nil, err
	}
	return &meta.AclStatus{Owner: n.st.Owner, Group: n.st.Group, Perm: n.st.Perm,
		StickyBit: n.st.Perm&meta.StickyBit != 0, Entries: slices.Clone(n.acl)}, nil
}

// xattrNamespace returns the namespace prefix of name ("user", "trusted"...)
// or an error when it has none HDFS knows.
func xattrNamespace(op, c, name string) (string, error) {
	i := strings.IndexByte(name, '.')
	if i > 0 && i < len(name)-1 {
		switch ns := strings.ToLower(name[:i]); ns {
		case "user", "trusted", "security", "system", "raw":
			return ns, nil
		}
	}
	return "", meta.Errorf(op, c, meta.ErrInvalidArgument,
		"An XAttr name must be prefixed with user/trusted/security/system/raw, followed by a '.'")
}

// xattrAccess checks u may use name on n (write or read), with HDFS's
// namespace rules: trusted only for the superuser, system and raw for no
// caller, user by the permission bits (MemFS knows no groups: the owner's
// bits for the owner, the other's for the rest).
func xattrAccess(op, c string, u meta.User, n *node, name string, write bool) error {
	ns, err := xattrNamespace(op, c, name)
	if err != nil {
		return err
	}
	deny := func() error {
		return meta.Errorf(op, c, meta.ErrPermission, "User doesn't have permission for xattr: %s", name)
	}
	switch ns {
	case "trusted":
		if u.Name != Superuser {
			return deny()
		}
	case "system", "raw":
		return deny()
	case "user":
		if u.Name == Superuser {
			return nil
		}
		want := meta.Perm(4)
		if write {
			want = 2
		}
		bits := n.st.Perm & 7
		if u.Name == n.st.Owner {
			bits = n.st.Perm >> 6 & 7
		}
		if bits&want == 0 {
			return meta.Errorf(op, c, meta.ErrPermission, "user %s may not %s xattrs of %s", u.Name, map[bool]string{true: "write", false: "read"}[write], c)
		}
	}
	return nil
}

// SetXAttr implements meta.XAttrs.
func (fs *MemFS) SetXAttr(ctx context.Context, u meta.User, path string, x meta.XAttr, flag meta.XAttrSetFlag) error {
	const op = "setXAttr"
	return fs.update(ctx, op, path, func(n *node, c string) error {
		if err := xattrAccess(op, c, u, n, x.Name, true); err != nil {
			return err
		}
		ns, _ := xattrNamespace(op, c, x.Name)
		name := ns + x.Name[len(ns):]
		if len(name)-len(ns)-1+len(x.Value) > meta.MaxXAttrSize {
			return meta.Errorf(op, c, meta.ErrInvalidArgument, "The XAttr is too big. The maximum combined size of the name and value is %d, but the total size is %d",
				meta.MaxXAttrSize, len(name)-len(ns)-1+len(x.Value))
		}
		i := slices.IndexFunc(n.xattrs, func(a meta.XAttr) bool { return a.Name == name })
		switch {
		case i >= 0 && flag&meta.XAttrReplace == 0:
			return meta.Errorf(op, c, meta.ErrExists, "XAttr: %s already exists. The REPLACE flag must be specified.", name)
		case i < 0 && flag&meta.XAttrCreate == 0:
			return meta.Errorf(op, c, meta.ErrNotFound, "XAttr: %s does not exist. The CREATE flag must be specified.", name)
		case i >= 0:
			n.xattrs[i].Value = slices.Clone(x.Value)
		case len(n.xattrs) >= meta.MaxXAttrsPerInode:
			return meta.Errorf(op, c, meta.ErrTooLarge, "Cannot add additional XAttr to inode, would exceed limit of %d", meta.MaxXAttrsPerInode)
		default:
			n.xattrs = append(n.xattrs, meta.XAttr{Name: name, Value: slices.Clone(x.Value)})
		}
		return nil
	})
}

// GetXAttrs implements meta.XAttrs.
func (fs *MemFS) GetXAttrs(ctx context.Context, u meta.User, path string, names []string) ([]meta.XAttr, error) {
	const op = "getXAttrs"
	var out []meta.XAttr
	err := fs.update(ctx, op, path, func(n *node, c string) error {
		if len(names) == 0 {
			for _, x := range n.xattrs {
				if xattrAccess(op, c, u, n, x.Name, false) == nil {
					out = append(out, meta.XAttr{Name: x.Name, Value: slices.Clone(x.Value)})
				}
			}
			return nil
		}
		for _, name := range names {
			if err := xattrAccess(op, c, u, n, name, false); err != nil {
				return err
			}
			ns, _ := xattrNamespace(op, c, name)
			name = ns + name[len(ns):]
			i := slices.IndexFunc(n.xattrs, func(a meta.XAttr) bool { return a.Name == name })
			if i < 0 {
				return meta.Errorf(op, c, meta.ErrNotFound, "At least one of the attributes provided was not found.")
			}
			out = append(out, meta.XAttr{Name: name, Value: slices.Clone(n.xattrs[i].Value)})
		}
		return nil
	})
	return out, err
}

// ListXAttrs implements meta.XAttrs.
func (fs *MemFS) ListXAttrs(ctx context.Context, u meta.User, path string) ([]string, error) {
	const op = "listXAttrs"
	var out []string
	err := fs.update(ctx, op, path, func(n *node, c string) error {
		// Listing takes read permission on the inode, as HDFS 3.4.1 answers.
		if err := xattrAccess(op, c, u, n, "user.list", false); err != nil {
			return err
		}
		for _, x := range n.xattrs {
			if xattrAccess(op, c, u, n, x.Name, false) == nil {
				out = append(out, x.Name)
			}
		}
		return nil
	})
	return out, err
}

// RemoveXAttr implements meta.XAttrs.
func (fs *MemFS) RemoveXAttr(ctx context.Context, u meta.User, path, name string) error {
	const op = "removeXAttr"
	return fs.update(ctx, op, path, func(n *node, c string) error {
		if err := xattrAccess(op, c, u, n, name, true); err != nil {
			return err
		}
		ns, _ := xattrNamespace(op, c, name)
		name = ns + name[len(ns):]
		if name == "security.hdfs.unreadable.by.superuser" {
			return meta.Errorf(op, c, meta.ErrPermission, "The xattr '%s' can not be deleted.", name)
		}
		i := slices.IndexFunc(n.xattrs, func(a meta.XAttr) bool { return a.Name == name })
		if i < 0 {
			return meta.Errorf(op, c, meta.ErrNotFound, "No matching attributes found for remove operation")
		}
		n.xattrs = slices.Delete(n.xattrs, i, i+1)
		return nil
	})
}
