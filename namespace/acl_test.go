package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

func aclEntry(s string) meta.AclEntry {
	var e meta.AclEntry
	if rest, ok := strings.CutPrefix(s, "default:"); ok {
		e.Scope, s = meta.AclDefault, rest
	}
	parts := strings.Split(s, ":")
	e.Type = map[string]meta.AclType{"user": meta.AclUser, "group": meta.AclGroup, "mask": meta.AclMask, "other": meta.AclOther}[parts[0]]
	e.Name = parts[1]
	for i, c := range "rwx" {
		if parts[2][i] == byte(c) {
			e.Perm |= 4 >> i
		}
	}
	return e
}

func aclSpec(s string) []meta.AclEntry {
	var out []meta.AclEntry
	for _, f := range strings.Split(s, ",") {
		out = append(out, aclEntry(f))
	}
	return out
}

func aclString(entries []meta.AclEntry) string {
	var s []string
	for _, e := range entries {
		s = append(s, e.String())
	}
	return strings.Join(s, ",")
}

func wantAcl(t *testing.T, e *Engine, path string, perm meta.Perm, entries string) {
	t.Helper()
	st, err := e.GetAclStatus(context.Background(), root, path)
	must(t, err)
	if st.Perm != perm || aclString(st.Entries) != entries {
		t.Fatalf("%s: ACL status %o [%s], want %o [%s]", path, st.Perm, aclString(st.Entries), perm, entries)
	}
	fs, err := e.Stat(context.Background(), root, path)
	must(t, err)
	if fs.Perm != perm || fs.AclBit != (entries != "") {
		t.Fatalf("%s: stat perm %o aclBit %v, want %o %v", path, fs.Perm, fs.AclBit, perm, entries != "")
	}
}

// TestAclOperations: each ACL operation, the mask as the group bits, and who
// may change an ACL.
func TestAclOperations(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/home", 0o777))
	must(t, e.Mkdirs(ctx, alice, "/home/alice", 0o700))
	writeFile(t, e, alice, "/home/alice/f", []byte("secret"))

	_, err := e.Stat(ctx, bob, "/home/alice/f")
	wantKind(t, err, meta.ErrPermission)

	// A named user gets a mask computed from the group entries.
	must(t, e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec("user:bob:r-x")))
	wantAcl(t, e, "/home/alice", 0o750, "user:bob:r-x,group::---")
	_, err = e.Stat(ctx, bob, "/home/alice/f")
	must(t, err)

	// chmod sets the mask: 0700 masks bob's entry away, 0750 gives it back.
	must(t, e.SetPermission(ctx, alice, "/home/alice", 0o700))
	wantAcl(t, e, "/home/alice", 0o700, "user:bob:r-x,group::---")
	_, err = e.Stat(ctx, bob, "/home/alice/f")
	wantKind(t, err, meta.ErrPermission)
	must(t, e.SetPermission(ctx, alice, "/home/alice", 0o750))
	_, err = e.Stat(ctx, bob, "/home/alice/f")
	must(t, err)

	// Only the owner or a superuser changes an ACL; anyone who can reach it
	// reads it.
	wantKind(t, e.ModifyAclEntries(ctx, bob, "/home/alice", aclSpec("user:bob:rwx")), meta.ErrPermission)
	wantKind(t, e.RemoveAcl(ctx, bob, "/home/alice"), meta.ErrPermission)
	if _, err := e.GetAclStatus(ctx, bob, "/home/alice"); err != nil {
		t.Fatal(err)
	}

	// A mask needed by a named entry cannot go; entries and masks must be
	// valid.
	err = e.RemoveAclEntries(ctx, alice, "/home/alice", aclSpec("mask::---"))
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "remove acl entries", "/home/alice", "Invalid ACL: mask is required and cannot be deleted.")
	if !errors.Is(err, meta.ErrAcl) || meta.KindOf(err) != meta.KindInvalidArgument {
		t.Fatalf("%v: not an ACL error of kind invalid argument", err)
	}
	err = e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec("user:carol:r--,user:carol:rwx"))
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "Invalid ACL: the ACL spec contains duplicate entries.")
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf("user:u%d:r--", i))
	}
	err = e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec(strings.Join(many, ",")))
	wantDetail(t, err, "Invalid ACL: ACL spec has 33 entries, which exceeds maximum of 32.")
	err = e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec(strings.Join(many[:30], ",")))
	wantDetail(t, err, "Invalid ACL: ACL has 35 access entries, which exceeds maximum of 32.")
	err = e.SetAcl(ctx, alice, "/home/alice", aclSpec("user::rwx,group::r-x"))
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "set acl", "Invalid ACL: the user, group and other entries are required.")
	err = e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec("mask:m:rwx"))
	wantDetail(t, err, "this entry type must not have a name")
	err = e.ModifyAclEntries(ctx, alice, "/home/alice/f", aclSpec("default:user:bob:rwx"))
	wantKind(t, err, meta.ErrInvalidArgument)
	wantDetail(t, err, "Invalid ACL: only directories may have a default ACL.", "/home/alice/f")
	_, err = e.GetAclStatus(ctx, alice, "/home/alice/none")
	wantKind(t, err, meta.ErrNotFound)

	// Removing the last named entry keeps the owning group's entry and the
	// mask, as HDFS does; RemoveAcl restores the group entry's bits.
	must(t, e.ModifyAclEntries(ctx, alice, "/home/alice", aclSpec("group::r--")))
	wantAcl(t, e, "/home/alice", 0o750, "user:bob:r-x,group::r--")
	must(t, e.RemoveAclEntries(ctx, alice, "/home/alice", aclSpec("user:bob:---")))
	wantAcl(t, e, "/home/alice", 0o740, "group::r--")
	must(t, e.RemoveAcl(ctx, alice, "/home/alice"))
	wantAcl(t, e, "/home/alice", 0o740, "")

	// SetAcl replaces a scope; a default ACL gets the access ACL's base
	// entries it lacks; RemoveDefaultAcl drops it.
	must(t, e.SetAcl(ctx, root, "/home/alice", aclSpec("user::rwx,group::r-x,other::---,group:staff:rwx,mask::r-x,default:user:bob:rw-")))
	wantAcl(t, e, "/home/alice", 0o750,
		"group::r-x,group:staff:rwx,default:user::rwx,default:user:bob:rw-,default:group::r-x,default:mask::rwx,default:other::---")
	must(t, e.RemoveDefaultAcl(ctx, alice, "/home/alice"))
	wantAcl(t, e, "/home/alice", 0o750, "group::r-x,group:staff:rwx")
	// The sticky bit stays through ACL changes.
	must(t, e.SetPermission(ctx, alice, "/home/alice", 0o1750))
	must(t, e.SetAcl(ctx, alice, "/home/alice", aclSpec("user::rwx,group::r-x,other::r-x")))
	wantAcl(t, e, "/home/alice", 0o1755, "")
	fsckClean(t, e)
}

// TestAclNamedGroupsAndMask: any matching group entry grants; a match that
// grants nothing denies instead of falling back to other.
func TestAclNamedGroupsAndMask(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o755))
	writeFile(t, e, root, "/d/f", []byte("x"))
	must(t, e.SetAcl(ctx, root, "/d/f", aclSpec("user::rw-,group::---,group:staff:r--,other::r--")))
	if _, err := e.Read(ctx, alice, "/d/f", 0, 1); err != nil { // staff
		t.Fatal(err)
	}
	if _, err := e.Read(ctx, bob, "/d/f", 0, 1); err != nil { // other
		t.Fatal(err)
	}
	must(t, e.SetAcl(ctx, root, "/d/f", aclSpec("user::rw-,group::---,group:staff:---,other::r--")))
	_, err := e.Read(ctx, alice, "/d/f", 0, 1)
	wantKind(t, err, meta.ErrPermission)
	// A named user's entry is masked.
	must(t, e.SetAcl(ctx, root, "/d/f", aclSpec("user::rw-,user:bob:rw-,group::---,mask::-w-,other::---")))
	_, err = e.Read(ctx, bob, "/d/f", 0, 1)
	wantKind(t, err, meta.ErrPermission)
	must(t, e.SetPermission(ctx, root, "/d/f", 0o640))
	if _, err := e.Read(ctx, bob, "/d/f", 0, 1); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultAclInheritance: HDFS's copyINodeDefaultAcl for files and
// directories, mkdir -p included.
func TestDefaultAclInheritance(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/p", 0o777))
	must(t, e.SetAcl(ctx, root, "/p", aclSpec("user::rwx,group::rwx,other::rwx,default:user::rwx,default:user:bob:rwx,default:group::r-x,default:other::r-x")))
	_, err := e.Create(ctx, alice, "/p/f", meta.CreateOptions{Client: "c", Perm: 0o640})
	must(t, err)
	// The mask (rwx) is filtered by the mode's group bits (r--), the owner
	// and other entries by theirs.
	wantAcl(t, e, "/p/f", 0o640, "user:bob:rwx,group::r-x")
	must(t, e.Mkdirs(ctx, alice, "/p/d/e", 0o750))
	def := "default:user::rwx,default:user:bob:rwx,default:group::r-x,default:mask::rwx,default:other::r-x"
	wantAcl(t, e, "/p/d/e", 0o750, "user:bob:rwx,group::r-x,"+def)
	wantAcl(t, e, "/p/d", 0o750|0o000, "user:bob:rwx,group::r-x,"+def)
	// Symlinks get none.
	must(t, e.CreateSymlink(ctx, alice, "/p/f", "/p/l", false))
	// A minimal default ACL filters the group entry and leaves a file
	// without an ACL.
	must(t, e.Mkdirs(ctx, root, "/m", 0o777))
	must(t, e.SetAcl(ctx, root, "/m", aclSpec("default:user::rwx,default:group::r-x,default:other::---")))
	_, err = e.Create(ctx, alice, "/m/f", meta.CreateOptions{Client: "c", Perm: 0o666})
	must(t, err)
	wantAcl(t, e, "/m/f", 0o640, "")
	fsckClean(t, e)
}

func xattrRows(t *testing.T, st store.Store) int {
	t.Helper()
	ctx := context.Background()
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	n := 0
	start, end := store.AllXAttrsRange()
	must(t, txn.Scan(ctx, start, end, 0, func(k, v []byte) bool { n++; return true }))
	return n
}

// TestXAttrs: flags, namespaces, permissions, limits and the errors'
// words.
func TestXAttrs(t *testing.T) {
	e, st := newEngine(t)
	ctx := context.Background()
	e.cfg.MaxXAttrsPerInode = 3
	must(t, e.Mkdirs(ctx, root, "/d", 0o777))
	writeFile(t, e, alice, "/d/f", []byte("x"))
	both := meta.XAttrCreate | meta.XAttrReplace

	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("1")}, meta.XAttrCreate))
	err := e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("2")}, meta.XAttrCreate)
	wantKind(t, err, meta.ErrExists)
	wantDetail(t, err, "set xattr", "/d/f", "XAttr: user.a already exists. The REPLACE flag must be specified.")
	err = e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.b", Value: []byte("2")}, meta.XAttrReplace)
	wantKind(t, err, meta.ErrNotFound)
	wantDetail(t, err, "XAttr: user.b does not exist. The CREATE flag must be specified.")
	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("2")}, meta.XAttrReplace))
	// The namespace is case-insensitive and stored lowercased.
	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "USER.B", Value: nil}, both))
	got, err := e.GetXAttrs(ctx, alice, "/d/f", []string{"user.a", "User.B"})
	must(t, err)
	if len(got) != 2 || got[0].Name != "user.B" || got[1].Name != "user.a" || string(got[1].Value) != "2" {
		t.Fatalf("GetXAttrs = %+v", got)
	}

	for _, bad := range []string{"a", "foo.a", "user.", "", ".a"} {
		err := e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: bad}, both)
		wantKind(t, err, meta.ErrInvalidArgument)
	}
	// Namespaces: trusted for superusers, system and raw for nobody, one
	// security attribute without a value.
	err = e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "trusted.t"}, both)
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "User doesn't have permission for xattr: trusted.t")
	must(t, e.SetXAttr(ctx, root, "/d/f", meta.XAttr{Name: "trusted.t", Value: []byte("t")}, both))
	for _, name := range []string{"system.s", "raw.r", "security.s"} {
		wantKind(t, e.SetXAttr(ctx, root, "/d/f", meta.XAttr{Name: name}, both), meta.ErrPermission)
	}
	wantKind(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: unreadableBySuperuser, Value: []byte("v")}, both), meta.ErrPermission)
	wantKind(t, e.SetXAttr(ctx, alice, "/d", meta.XAttr{Name: unreadableBySuperuser}, both), meta.ErrInvalidArgument)
	// A file marked unreadable by superusers is, to them; its owner reads it.
	writeFile(t, e, alice, "/d/secret", []byte("s"))
	must(t, e.SetXAttr(ctx, alice, "/d/secret", meta.XAttr{Name: unreadableBySuperuser}, both))
	_, err = e.Read(ctx, root, "/d/secret", 0, 1)
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "Access is denied for root since the superuser is not allowed to perform this operation.")
	if _, err := e.Read(ctx, alice, "/d/secret", 0, 1); err != nil {
		t.Fatal(err)
	}
	// The mark stays: HDFS refuses to remove it, to its owner too.
	err = e.RemoveXAttr(ctx, alice, "/d/secret", unreadableBySuperuser)
	wantKind(t, err, meta.ErrPermission)
	wantDetail(t, err, "The xattr 'security.hdfs.unreadable.by.superuser' can not be deleted.")
	must(t, e.Delete(ctx, root, "/d/secret", false))
	// The limit counts attributes already there; a replace is not an addition.
	err = e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: unreadableBySuperuser}, both)
	wantKind(t, err, meta.ErrTooLarge)
	wantDetail(t, err, "Cannot add additional XAttr to inode, would exceed limit of 3")
	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("3")}, both))

	names, err := e.ListXAttrs(ctx, alice, "/d/f")
	must(t, err)
	if !slices.Equal(names, []string{"user.B", "user.a"}) {
		t.Fatalf("alice lists %v", names)
	}
	names, err = e.ListXAttrs(ctx, root, "/d/f")
	must(t, err)
	if !slices.Equal(names, []string{"trusted.t", "user.B", "user.a"}) {
		t.Fatalf("root lists %v", names)
	}
	all, err := e.GetXAttrs(ctx, alice, "/d/f", nil)
	must(t, err)
	if len(all) != 2 {
		t.Fatalf("alice gets %+v", all)
	}
	_, err = e.GetXAttrs(ctx, alice, "/d/f", []string{"trusted.t"})
	wantKind(t, err, meta.ErrPermission)
	_, err = e.GetXAttrs(ctx, alice, "/d/f", []string{"user.a", "user.zz"})
	wantKind(t, err, meta.ErrNotFound)
	wantDetail(t, err, "At least one of the attributes provided was not found.")

	// The size limit: the name without its prefix plus the value.
	e.cfg.MaxXAttrSize = 10
	must(t, e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("123456789")}, both))
	err = e.SetXAttr(ctx, alice, "/d/f", meta.XAttr{Name: "user.a", Value: []byte("1234567890")}, both)
	wantDetail(t, err, "The XAttr is too big. The maximum combined size of the name and value is 10, but the total size is 11")

	// user.* needs write to change and read to get; bob has neither (0644).
	wantKind(t, e.SetXAttr(ctx, bob, "/d/f", meta.XAttr{Name: "user.x"}, both), meta.ErrPermission)
	wantKind(t, e.RemoveXAttr(ctx, bob, "/d/f", "user.a"), meta.ErrPermission)
	must(t, e.SetPermission(ctx, alice, "/d/f", 0o600))
	_, err = e.GetXAttrs(ctx, bob, "/d/f", nil)
	wantKind(t, err, meta.ErrPermission)
	// Listing takes read too, as HDFS 3.4.1 answers (403, access=READ).
	_, err = e.ListXAttrs(ctx, bob, "/d/f")
	wantKind(t, err, meta.ErrPermission)
	if names, err := e.ListXAttrs(ctx, alice, "/d/f"); err != nil || len(names) == 0 {
		t.Fatalf("the owner lists %v, %v", names, err)
	}
	// A sticky directory's user attributes are its owner's.
	must(t, e.SetPermission(ctx, root, "/d", 0o1777))
	wantKind(t, e.SetXAttr(ctx, alice, "/d", meta.XAttr{Name: "user.x"}, both), meta.ErrPermission)
	must(t, e.SetXAttr(ctx, root, "/d", meta.XAttr{Name: "user.x"}, both))

	must(t, e.RemoveXAttr(ctx, alice, "/d/f", "user.a"))
	err = e.RemoveXAttr(ctx, alice, "/d/f", "user.a")
	wantKind(t, err, meta.ErrNotFound)
	wantDetail(t, err, "No matching attributes found for remove operation")
	must(t, e.RemoveXAttr(ctx, alice, "/d/f", "user.B"))
	must(t, e.RemoveXAttr(ctx, root, "/d/f", "trusted.t"))
	if fs, _ := e.Stat(ctx, root, "/d/f"); fs == nil {
		t.Fatal("stat failed")
	}
	if n := xattrRows(t, st); n != 1 {
		t.Fatalf("%d xattr rows, want 1 (/d's)", n)
	}
	fsckClean(t, e)
}

// TestAclXAttrRowsFollowInode: ACLs and xattrs stay with a renamed inode
// and go with a deleted or overwritten one, recursive deletes included;
// fsck is clean at every step and finds stray rows.
func TestAclXAttrRowsFollowInode(t *testing.T) {
	e, st := newEngine(t)
	ctx := context.Background()
	both := meta.XAttrCreate | meta.XAttrReplace
	must(t, e.Mkdirs(ctx, root, "/a/b/c", 0o755))
	writeFile(t, e, root, "/a/b/c/f", []byte("x"))
	for _, p := range []string{"/a/b", "/a/b/c", "/a/b/c/f"} {
		must(t, e.SetXAttr(ctx, root, p, meta.XAttr{Name: "user.k", Value: []byte(p)}, both))
		must(t, e.SetXAttr(ctx, root, p, meta.XAttr{Name: "trusted.k", Value: []byte(p)}, both))
		must(t, e.ModifyAclEntries(ctx, root, p, aclSpec("user:bob:r-x")))
	}
	fsckClean(t, e)
	must(t, e.Rename(ctx, root, "/a/b", "/z", meta.RenameOptions{}))
	got, err := e.GetXAttrs(ctx, root, "/z/c/f", []string{"user.k"})
	must(t, err)
	if string(got[0].Value) != "/a/b/c/f" {
		t.Fatalf("xattr after rename: %q", got[0].Value)
	}
	wantAcl(t, e, "/z/c", 0o755, "user:bob:r-x,group::r-x")
	if n := xattrRows(t, st); n != 6 {
		t.Fatalf("%d xattr rows after rename, want 6", n)
	}
	fsckClean(t, e)

	// An overwritten file's rows go.
	_, err = e.Create(ctx, root, "/z/c/f", meta.CreateOptions{Client: "c", Overwrite: true})
	must(t, err)
	if n := xattrRows(t, st); n != 4 {
		t.Fatalf("%d xattr rows after overwrite, want 4", n)
	}
	must(t, e.SetXAttr(ctx, root, "/z/c/f", meta.XAttr{Name: "user.k"}, both))
	must(t, e.Delete(ctx, root, "/z", true))
	if n := xattrRows(t, st); n != 0 {
		t.Fatalf("%d xattr rows after a recursive delete, want 0", n)
	}
	fsckClean(t, e)

	// fsck finds a row of no inode.
	txn, err := st.Begin(ctx)
	must(t, err)
	txn.Put(store.XAttrKey(999, "user.lost"), []byte("v"))
	must(t, txn.Commit(ctx))
	rep, err := e.Fsck(ctx)
	must(t, err)
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "xattr user.lost belongs to no inode") {
		t.Fatalf("fsck problems %v", rep.Problems)
	}
}

// TestConcatDropsSourceXAttrs: concat deletes its sources with their
// attribute rows, inline files and block files alike; the target keeps its
// own.
func TestConcatDropsSourceXAttrs(t *testing.T) {
	ctx := context.Background()
	both := meta.XAttrCreate | meta.XAttrReplace
	check := func(t *testing.T, e *Engine) {
		for _, p := range []string{"/d/p0", "/d/p1", "/d/p2"} {
			must(t, e.SetXAttr(ctx, root, p, meta.XAttr{Name: "user.k", Value: []byte(p)}, both))
		}
		must(t, e.Concat(ctx, root, "/d/p0", []string{"/d/p1", "/d/p2"}))
		if n := xattrRows(t, e.st); n != 1 {
			t.Fatalf("%d xattr rows after concat, want the target's 1", n)
		}
		fsckClean(t, e)
	}
	t.Run("inline", func(t *testing.T) {
		e, _ := newEngine(t)
		must(t, e.Mkdirs(ctx, root, "/d", 0o755))
		for i := range 3 {
			writeFile(t, e, root, fmt.Sprintf("/d/p%d", i), []byte("abc"))
		}
		check(t, e)
	})
	t.Run("blocks", func(t *testing.T) {
		e, _ := newBlockEngine(t, t.TempDir())
		const bsz = 4096
		for i, size := range []int{bsz, bsz, 1500} {
			p := fmt.Sprintf("/d/p%d", i)
			_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: bsz, CreateParent: true})
			must(t, err)
			writeChunks(t, e, p, "w", 0, randomBytes(size, uint64(i)), 1000)
			_, err = e.Complete(ctx, root, p, "w")
			must(t, err)
		}
		check(t, e)
	})
}
