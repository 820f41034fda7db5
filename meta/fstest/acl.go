package fstest

import (
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

func specOf(c *C, s string, withPerm bool) []meta.AclEntry {
	c.T.Helper()
	es, err := meta.ParseAclSpec(s, withPerm)
	if err != nil {
		c.T.Fatal(err)
	}
	return es
}

// ACLs and extended attributes, as HDFS keeps them.
var aclCases = []Case{
	{Name: "ACLs", Needs: func(k Caps) bool { return k.ACLs }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		if err := fs.Mkdirs(ctx, alice, "/home/d", 0o750); err != nil {
			c.T.Fatal(err)
		}
		if err := fs.ModifyAclEntries(ctx, alice, "/home/d", specOf(c, "user:bob:rwx,default:group:staff:r-x", true)); err != nil {
			c.T.Fatal(err)
		}
		st, err := fs.GetAclStatus(ctx, alice, "/home/d")
		if err != nil {
			c.T.Fatal(err)
		}
		// The mask is the union of the group class (bob's rwx and the group's
		// r-x), and the default ACL copied its base entries from the access ACL.
		if got, want := meta.FormatAclSpec(st.Entries, true), "user:bob:rwx,group::r-x,default:user::rwx,default:group::r-x,default:group:staff:r-x,default:mask::r-x,default:other::---"; got != want {
			c.T.Fatalf("entries %s\nwant    %s", got, want)
		}
		if st.Perm != 0o770 {
			c.T.Fatalf("perm %o, want 770 (the mask in the group bits)", st.Perm)
		}
		fst, _ := fs.Stat(ctx, alice, "/home/d")
		if !fst.AclBit {
			c.T.Fatal("no aclBit")
		}
		c.Is("non-owner modify", fs.ModifyAclEntries(ctx, bob, "/home/d", specOf(c, "user:bob:rwx", true)), meta.ErrPermission)
		if err := fs.RemoveAclEntries(ctx, alice, "/home/d", specOf(c, "user:bob", false)); err != nil {
			c.T.Fatal(err)
		}
		if err := fs.RemoveDefaultAcl(ctx, alice, "/home/d"); err != nil {
			c.T.Fatal(err)
		}
		st, _ = fs.GetAclStatus(ctx, alice, "/home/d")
		if got := meta.FormatAclSpec(st.Entries, true); got != "group::r-x" || st.Perm != 0o750 {
			c.T.Fatalf("after removals: %q perm %o", got, st.Perm)
		}
		if err := fs.RemoveAcl(ctx, alice, "/home/d"); err != nil {
			c.T.Fatal(err)
		}
		if fst, _ = fs.Stat(ctx, alice, "/home/d"); fst.AclBit || fst.Perm != 0o750 {
			c.T.Fatalf("after removeAcl: aclBit %v perm %o", fst.AclBit, fst.Perm)
		}
		if err := fs.SetAcl(ctx, alice, "/home/d", specOf(c, "user::rw-,user:bob:r--,group::---,other::---", true)); err != nil {
			c.T.Fatal(err)
		}
		if st, _ = fs.GetAclStatus(ctx, alice, "/home/d"); st.Perm != 0o640 || meta.FormatAclSpec(st.Entries, true) != "user:bob:r--,group::---" {
			c.T.Fatalf("after setAcl: %o %s", st.Perm, meta.FormatAclSpec(st.Entries, true))
		}
		c.Is("setAcl without base entries", fs.SetAcl(ctx, alice, "/home/d", specOf(c, "user:bob:r--", true)), meta.ErrInvalidArgument)
	}},
	{Name: "default ACL inherited", Needs: func(k Caps) bool { return k.ACLs }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		if err := fs.Mkdirs(ctx, alice, "/home/d", 0o755); err != nil {
			c.T.Fatal(err)
		}
		if err := fs.ModifyAclEntries(ctx, alice, "/home/d", specOf(c, "default:user:bob:rwx,default:other::---", true)); err != nil {
			c.T.Fatal(err)
		}
		if err := fs.Mkdirs(ctx, alice, "/home/d/sub", 0o755); err != nil {
			c.T.Fatal(err)
		}
		st, _ := fs.GetAclStatus(ctx, alice, "/home/d/sub")
		// The mask (rwx) is cut by the mode's group bits (r-x); other by both.
		if got, want := meta.FormatAclSpec(st.Entries, true), "user:bob:rwx,group::r-x,default:user::rwx,default:user:bob:rwx,default:group::r-x,default:mask::rwx,default:other::---"; got != want || st.Perm != 0o750 {
			c.T.Fatalf("sub: %s perm %o\nwant %s perm 750", got, st.Perm, want)
		}
		if _, err := fs.Create(ctx, alice, "/home/d/f", meta.CreateOptions{Client: "c", Perm: 0o640}); err != nil {
			c.T.Fatal(err)
		}
		st, _ = fs.GetAclStatus(ctx, alice, "/home/d/f")
		if got := meta.FormatAclSpec(st.Entries, true); got != "user:bob:rwx,group::r-x" || st.Perm != 0o640 {
			c.T.Fatalf("file: %s perm %o", got, st.Perm)
		}
		if fst, _ := fs.Stat(ctx, alice, "/home/d/f"); !fst.AclBit {
			c.T.Fatal("file has no aclBit")
		}
	}},
	{Name: "unmasked mode", Needs: func(k Caps) bool { return k.ACLs }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		for _, d := range []string{"/home/acl", "/home/plain"} {
			if err := fs.Mkdirs(ctx, alice, d, 0o750); err != nil {
				c.T.Fatal(err)
			}
		}
		if err := fs.ModifyAclEntries(ctx, alice, "/home/acl", specOf(c, "default:user:foo:rwx", true)); err != nil {
			c.T.Fatal(err)
		}
		for _, f := range []string{"/home/acl/f", "/home/plain/f"} {
			if _, err := fs.Create(ctx, alice, f, meta.CreateOptions{Client: "c", Perm: 0o644, Unmasked: 0o666, HasUnmasked: true}); err != nil {
				c.T.Fatal(err)
			}
		}
		for _, d := range []string{"/home/acl/a/b", "/home/plain/a/b"} {
			if err := fs.MkdirsUnmasked(ctx, alice, d, 0o755, 0o777); err != nil {
				c.T.Fatal(err)
			}
		}
		if _, err := fs.Create(ctx, alice, "/home/acl/m", meta.CreateOptions{Client: "c", Perm: 0o644}); err != nil {
			c.T.Fatal(err)
		}
		for path, want := range map[string]meta.Perm{"/home/acl/f": 0o660, "/home/acl/a": 0o770, "/home/acl/a/b": 0o770, "/home/acl/m": 0o640,
			"/home/plain/f": 0o644, "/home/plain/a": 0o755, "/home/plain/a/b": 0o755} {
			st, err := fs.Stat(ctx, alice, path)
			if err != nil {
				c.T.Fatal(err)
			}
			if st.Perm != want || st.AclBit != strings.HasPrefix(path, "/home/acl/") {
				c.T.Errorf("%s: perm %o aclBit %v, want %o", path, st.Perm, st.AclBit, want)
			}
		}
	}},
	{Name: "xattrs", Needs: func(k Caps) bool { return k.XAttrs }, Run: func(c *C, fs meta.FileSystem) {
		ctx := c.Ctx
		c.Home(fs)
		if err := fs.Mkdirs(ctx, alice, "/home/d", 0o755); err != nil {
			c.T.Fatal(err)
		}
		set := func(name, v string, f meta.XAttrSetFlag) error {
			return fs.SetXAttr(ctx, alice, "/home/d", meta.XAttr{Name: name, Value: []byte(v)}, f)
		}
		if err := set("user.a", "1", meta.XAttrCreate); err != nil {
			c.T.Fatal(err)
		}
		c.Is("create over existing", set("user.a", "2", meta.XAttrCreate), meta.ErrExists)
		c.Is("replace of missing", set("user.b", "2", meta.XAttrReplace), meta.ErrNotFound)
		if err := set("user.a", "3", meta.XAttrCreate|meta.XAttrReplace); err != nil {
			c.T.Fatal(err)
		}
		c.Is("bad namespace", set("nope.a", "3", meta.XAttrCreate), meta.ErrInvalidArgument)
		c.Is("trusted as a user", set("trusted.a", "3", meta.XAttrCreate), meta.ErrPermission)
		xs, err := fs.GetXAttrs(ctx, alice, "/home/d", []string{"user.a"})
		if err != nil || len(xs) != 1 || string(xs[0].Value) != "3" {
			c.T.Fatalf("GetXAttrs = %v, %v", xs, err)
		}
		_, err = fs.GetXAttrs(ctx, alice, "/home/d", []string{"user.zz"})
		c.Is("get missing", err, meta.ErrNotFound)
		c.Is("bob writes", fs.SetXAttr(ctx, bob, "/home/d", meta.XAttr{Name: "user.b"}, meta.XAttrCreate), meta.ErrPermission)
		names, _ := fs.ListXAttrs(ctx, bob, "/home/d")
		if len(names) != 1 || names[0] != "user.a" {
			c.T.Fatalf("ListXAttrs = %v", names)
		}
		if err := fs.RemoveXAttr(ctx, alice, "/home/d", "user.a"); err != nil {
			c.T.Fatal(err)
		}
		c.Is("remove again", fs.RemoveXAttr(ctx, alice, "/home/d", "user.a"), meta.ErrNotFound)
	}},
}
