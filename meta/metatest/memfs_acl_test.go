package metatest

import (
	"context"
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func specOf(t *testing.T, s string, withPerm bool) []meta.AclEntry {
	t.Helper()
	es, err := meta.ParseAclSpec(s, withPerm)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestMemFSACL(t *testing.T) {
	ctx := context.Background()
	fs := NewMemFS()
	alice := meta.User{Name: "alice"}
	if err := fs.Mkdirs(ctx, alice, "/d", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := fs.ModifyAclEntries(ctx, alice, "/d", specOf(t, "user:bob:rwx,default:group:staff:r-x", true)); err != nil {
		t.Fatal(err)
	}
	st, err := fs.GetAclStatus(ctx, alice, "/d")
	if err != nil {
		t.Fatal(err)
	}
	// The mask is the union of the group class (bob's rwx and the group's
	// r-x), and the default ACL copied its base entries from the access ACL.
	if got, want := meta.FormatAclSpec(st.Entries, true), "user:bob:rwx,group::r-x,default:user::rwx,default:group::r-x,default:group:staff:r-x,default:mask::r-x,default:other::---"; got != want {
		t.Fatalf("entries %s\nwant    %s", got, want)
	}
	if st.Perm != 0o770 {
		t.Fatalf("perm %o, want 770 (the mask in the group bits)", st.Perm)
	}
	fst, _ := fs.Stat(ctx, alice, "/d")
	if !fst.AclBit {
		t.Fatal("no aclBit")
	}
	if err := fs.ModifyAclEntries(ctx, meta.User{Name: "bob"}, "/d", specOf(t, "user:bob:rwx", true)); !errors.Is(err, meta.ErrPermission) {
		t.Fatalf("non-owner modify: %v", err)
	}
	if err := fs.RemoveAclEntries(ctx, alice, "/d", specOf(t, "user:bob", false)); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveDefaultAcl(ctx, alice, "/d"); err != nil {
		t.Fatal(err)
	}
	st, _ = fs.GetAclStatus(ctx, alice, "/d")
	if got := meta.FormatAclSpec(st.Entries, true); got != "group::r-x" || st.Perm != 0o750 {
		t.Fatalf("after removals: %q perm %o", got, st.Perm)
	}
	if err := fs.RemoveAcl(ctx, alice, "/d"); err != nil {
		t.Fatal(err)
	}
	if fst, _ = fs.Stat(ctx, alice, "/d"); fst.AclBit || fst.Perm != 0o750 {
		t.Fatalf("after removeAcl: aclBit %v perm %o", fst.AclBit, fst.Perm)
	}
	if err := fs.SetAcl(ctx, alice, "/d", specOf(t, "user::rw-,user:bob:r--,group::---,other::---", true)); err != nil {
		t.Fatal(err)
	}
	if st, _ = fs.GetAclStatus(ctx, alice, "/d"); st.Perm != 0o640 || meta.FormatAclSpec(st.Entries, true) != "user:bob:r--,group::---" {
		t.Fatalf("after setAcl: %o %s", st.Perm, meta.FormatAclSpec(st.Entries, true))
	}
	if err := fs.SetAcl(ctx, alice, "/d", specOf(t, "user:bob:r--", true)); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("setAcl without base entries: %v", err)
	}
}

// New children take a directory's default ACL as HDFS's do.
func TestMemFSDefaultACLInherited(t *testing.T) {
	ctx := context.Background()
	fs := NewMemFS()
	alice := meta.User{Name: "alice"}
	if err := fs.Mkdirs(ctx, alice, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fs.ModifyAclEntries(ctx, alice, "/d", specOf(t, "default:user:bob:rwx,default:other::---", true)); err != nil {
		t.Fatal(err)
	}
	if err := fs.Mkdirs(ctx, alice, "/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	st, _ := fs.GetAclStatus(ctx, alice, "/d/sub")
	// The mask (rwx) is cut by the mode's group bits (r-x); other by both.
	if got, want := meta.FormatAclSpec(st.Entries, true), "user:bob:rwx,group::r-x,default:user::rwx,default:user:bob:rwx,default:group::r-x,default:mask::rwx,default:other::---"; got != want || st.Perm != 0o750 {
		t.Fatalf("sub: %s perm %o\nwant %s perm 750", got, st.Perm, want)
	}
	if _, err := fs.Create(ctx, alice, "/d/f", meta.CreateOptions{Client: "c", Perm: 0o640}); err != nil {
		t.Fatal(err)
	}
	st, _ = fs.GetAclStatus(ctx, alice, "/d/f")
	if got := meta.FormatAclSpec(st.Entries, true); got != "user:bob:rwx,group::r-x" || st.Perm != 0o640 {
		t.Fatalf("file: %s perm %o", got, st.Perm)
	}
	if fst, _ := fs.Stat(ctx, alice, "/d/f"); !fst.AclBit {
		t.Fatal("file has no aclBit")
	}
}

// The unmasked mode (HDFS-6962) decides under a default ACL, for files,
// directories and the directories mkdirs makes on the way, and changes
// nothing elsewhere: the engine's rule (namespace.TestUnmaskedModeUnderDefaultAcl).
func TestMemFSUnmaskedMode(t *testing.T) {
	ctx := context.Background()
	fs := NewMemFS()
	alice := meta.User{Name: "alice"}
	for _, d := range []string{"/acl", "/plain"} {
		if err := fs.Mkdirs(ctx, alice, d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.ModifyAclEntries(ctx, alice, "/acl", specOf(t, "default:user:foo:rwx", true)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"/acl/f", "/plain/f"} {
		if _, err := fs.Create(ctx, alice, f, meta.CreateOptions{Client: "c", Perm: 0o644, Unmasked: 0o666, HasUnmasked: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"/acl/a/b", "/plain/a/b"} {
		if err := fs.MkdirsUnmasked(ctx, alice, d, 0o755, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fs.Create(ctx, alice, "/acl/m", meta.CreateOptions{Client: "c", Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]meta.Perm{"/acl/f": 0o660, "/acl/a": 0o770, "/acl/a/b": 0o770, "/acl/m": 0o640,
		"/plain/f": 0o644, "/plain/a": 0o755, "/plain/a/b": 0o755} {
		st, err := fs.Stat(ctx, alice, path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Perm != want || st.AclBit != (path[:4] == "/acl") {
			t.Errorf("%s: perm %o aclBit %v, want %o", path, st.Perm, st.AclBit, want)
		}
	}
}

func TestMemFSXAttrs(t *testing.T) {
	ctx := context.Background()
	fs := NewMemFS()
	alice := meta.User{Name: "alice"}
	if err := fs.Mkdirs(ctx, alice, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	set := func(name, v string, f meta.XAttrSetFlag) error {
		return fs.SetXAttr(ctx, alice, "/d", meta.XAttr{Name: name, Value: []byte(v)}, f)
	}
	if err := set("user.a", "1", meta.XAttrCreate); err != nil {
		t.Fatal(err)
	}
	if err := set("user.a", "2", meta.XAttrCreate); !errors.Is(err, meta.ErrExists) {
		t.Fatalf("create over existing: %v", err)
	}
	if err := set("user.b", "2", meta.XAttrReplace); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("replace of missing: %v", err)
	}
	if err := set("user.a", "3", meta.XAttrCreate|meta.XAttrReplace); err != nil {
		t.Fatal(err)
	}
	if err := set("nope.a", "3", meta.XAttrCreate); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("bad namespace: %v", err)
	}
	if err := set("trusted.a", "3", meta.XAttrCreate); !errors.Is(err, meta.ErrPermission) {
		t.Fatalf("trusted as a user: %v", err)
	}
	xs, err := fs.GetXAttrs(ctx, alice, "/d", []string{"user.a"})
	if err != nil || len(xs) != 1 || string(xs[0].Value) != "3" {
		t.Fatalf("GetXAttrs = %v, %v", xs, err)
	}
	if _, err := fs.GetXAttrs(ctx, alice, "/d", []string{"user.zz"}); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if err := fs.SetXAttr(ctx, meta.User{Name: "bob"}, "/d", meta.XAttr{Name: "user.b"}, meta.XAttrCreate); !errors.Is(err, meta.ErrPermission) {
		t.Fatalf("bob writes: %v", err)
	}
	names, _ := fs.ListXAttrs(ctx, meta.User{Name: "bob"}, "/d")
	if len(names) != 1 || names[0] != "user.a" {
		t.Fatalf("ListXAttrs = %v", names)
	}
	if err := fs.RemoveXAttr(ctx, alice, "/d", "user.a"); err != nil {
		t.Fatal(err)
	}
	if err := fs.RemoveXAttr(ctx, alice, "/d", "user.a"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("remove again: %v", err)
	}
}
