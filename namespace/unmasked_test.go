package namespace

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestUnmaskedModeUnderDefaultAcl: HDFS-6962. Under a parent with a default
// ACL a new file or directory takes its ACL and mode from the unmasked mode
// the client sent (the umask does not apply); under a parent without one,
// the masked mode is used and the unmasked one changes nothing. The
// expected values are those of Hadoop 3.4.1's FSAclBaseTest
// testDefaultAclNewFile/NewDir/NewFileIntermediate/NewDirIntermediate
// (a client with umask 022: 0644/0666 for files, 0755/0777 for directories).
func TestUnmaskedModeUnderDefaultAcl(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	const def = "default:user::rwx,default:user:foo:rwx,default:group::r-x,default:mask::rwx,default:other::---"
	must(t, e.Mkdirs(ctx, root, "/acl", 0o777))
	must(t, e.SetAcl(ctx, root, "/acl", aclSpec("user::rwx,group::rwx,other::rwx,default:user::rwx,default:user:foo:rwx,default:group::r-x,default:other::---")))
	must(t, e.Mkdirs(ctx, root, "/plain", 0o777))
	must(t, e.Mkdirs(ctx, root, "/access", 0o777))
	// An access ACL alone is no default ACL: the umask applies.
	must(t, e.SetAcl(ctx, root, "/access", aclSpec("user::rwx,user:foo:rwx,group::rwx,other::rwx")))
	create := func(path string, perm, unmasked meta.Perm, has bool) {
		t.Helper()
		_, err := e.CreateFile(ctx, alice, path, meta.CreateOptions{Perm: perm, Unmasked: unmasked, HasUnmasked: has, CreateParent: true}, []byte("x"))
		must(t, err)
	}
	mkdirs := func(path string, perm, unmasked meta.Perm, has bool) {
		t.Helper()
		if has {
			must(t, e.MkdirsUnmasked(ctx, alice, path, perm, unmasked))
		} else {
			must(t, e.Mkdirs(ctx, alice, path, perm))
		}
	}

	// Files.
	create("/acl/f-unmasked", 0o644, 0o666, true)
	wantAcl(t, e, "/acl/f-unmasked", 0o660, "user:foo:rwx,group::r-x")
	create("/acl/f-masked", 0o644, 0, false)
	wantAcl(t, e, "/acl/f-masked", 0o640, "user:foo:rwx,group::r-x")
	create("/plain/f", 0o644, 0o666, true)
	wantAcl(t, e, "/plain/f", 0o644, "")
	create("/access/f", 0o644, 0o666, true)
	wantAcl(t, e, "/access/f", 0o644, "")
	// An unmasked 000 is a mode like any other, not "none".
	create("/acl/f-zero", 0o644, 0, true)
	wantAcl(t, e, "/acl/f-zero", 0o000, "user:foo:rwx,group::r-x")

	// Directories.
	mkdirs("/acl/d-unmasked", 0o755, 0o777, true)
	wantAcl(t, e, "/acl/d-unmasked", 0o770, "user:foo:rwx,group::r-x,"+def)
	mkdirs("/acl/d-masked", 0o755, 0, false)
	wantAcl(t, e, "/acl/d-masked", 0o750, "user:foo:rwx,group::r-x,"+def)
	mkdirs("/plain/d", 0o755, 0o777, true)
	wantAcl(t, e, "/plain/d", 0o755, "")
	mkdirs("/access/d", 0o755, 0o777, true)
	wantAcl(t, e, "/access/d", 0o755, "")
	// The unmasked sticky bit is kept, as HDFS keeps the child's.
	mkdirs("/acl/d-sticky", 0o755, 0o1777, true)
	wantAcl(t, e, "/acl/d-sticky", 0o1770, "user:foo:rwx,group::r-x,"+def)

	// Missing ancestors of mkdirs take the unmasked mode too (HDFS's
	// addImplicitUwx keeps it); those of create do not: a file's parents are
	// made with the default mode (0755 with u+wx), filtered by the default
	// ACL to 0750.
	mkdirs("/acl/i/sub", 0o755, 0o777, true)
	wantAcl(t, e, "/acl/i", 0o770, "user:foo:rwx,group::r-x,"+def)
	wantAcl(t, e, "/acl/i/sub", 0o770, "user:foo:rwx,group::r-x,"+def)
	mkdirs("/acl/j/sub", 0o755, 0, false)
	wantAcl(t, e, "/acl/j", 0o750, "user:foo:rwx,group::r-x,"+def)
	create("/acl/k/f", 0o644, 0o666, true)
	wantAcl(t, e, "/acl/k", 0o750, "user:foo:rwx,group::r-x,"+def)
	wantAcl(t, e, "/acl/k/f", 0o660, "user:foo:rwx,group::r-x")
	// Without a default ACL the ancestors get the masked mode with u+wx.
	mkdirs("/plain/i/sub", 0o555, 0o777, true)
	wantAcl(t, e, "/plain/i", 0o755, "")
	wantAcl(t, e, "/plain/i/sub", 0o555, "")
	fsckClean(t, e)
}

// TestImplicitParentsDropStickyBit: the directories mkdirs creates on the
// way take the mode with u+wx and without the sticky bit, as HDFS's
// FSDirMkdirOp.addImplicitUwx; the last one keeps the mode as given.
func TestImplicitParentsDropStickyBit(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/a/b/c", 0o1555))
	for path, want := range map[string]meta.Perm{"/a": 0o755, "/a/b": 0o755, "/a/b/c": 0o1555} {
		st, err := e.Stat(ctx, root, path)
		must(t, err)
		if st.Perm != want {
			t.Errorf("%s: perm %o, want %o", path, st.Perm, want)
		}
	}
}

// TestUnmaskedModeOutOfRange: an unmasked mode beyond 01777 is refused, as
// a masked one is, before anything is created.
func TestUnmaskedModeOutOfRange(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	wantKind(t, e.MkdirsUnmasked(ctx, root, "/d", 0o755, 0o2777), meta.ErrInvalidArgument)
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "c", Perm: 0o644, Unmasked: 0o10000, HasUnmasked: true})
	wantKind(t, err, meta.ErrInvalidArgument)
	// Not set, it is not looked at.
	_, err = e.Create(ctx, root, "/g", meta.CreateOptions{Client: "c", Perm: 0o644, Unmasked: 0o10000})
	must(t, err)
	for _, p := range []string{"/d", "/f"} {
		_, err := e.Stat(ctx, root, p)
		wantKind(t, err, meta.ErrNotFound)
	}
}
