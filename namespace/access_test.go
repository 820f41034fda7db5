package namespace

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestCheckAccess: HDFS's checkAccess answers as the permission check of
// the operations does: the owner, group and other classes, a named user's
// ACL entry under its mask, search on every ancestor, the superuser, a
// missing path.
func TestCheckAccess(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o755))
	writeFile(t, e, root, "/d/f", []byte("x"))
	must(t, e.SetOwner(ctx, root, "/d/f", "alice", "staff"))
	must(t, e.SetPermission(ctx, root, "/d/f", 0o640))
	carol := meta.User{Name: "carol"} // no groups: other
	for _, c := range []struct {
		u    meta.User
		mode meta.Perm
		ok   bool
	}{
		{alice, permR | permW, true}, {alice, permX, false},
		{bob, permR, false}, {bob, 0, true}, // no access asked: the path exists and its ancestors are searchable
		{carol, permR, false},
		{root, permR | permW | permX, true},
	} {
		err := e.CheckAccess(ctx, c.u, "/d/f", c.mode)
		if c.ok {
			must(t, err)
		} else {
			wantKind(t, err, meta.ErrPermission)
		}
	}
	// A named user's entry, cut by the mask.
	must(t, e.ModifyAclEntries(ctx, alice, "/d/f", aclSpec("user:bob:rw-")))
	must(t, e.CheckAccess(ctx, bob, "/d/f", permR|permW))
	must(t, e.SetPermission(ctx, alice, "/d/f", 0o640)) // mask r--
	must(t, e.CheckAccess(ctx, bob, "/d/f", permR))
	wantKind(t, e.CheckAccess(ctx, bob, "/d/f", permW), meta.ErrPermission)
	// Search on the ancestors.
	must(t, e.SetPermission(ctx, root, "/d", 0o700))
	wantKind(t, e.CheckAccess(ctx, bob, "/d/f", 0), meta.ErrPermission)
	must(t, e.CheckAccess(ctx, root, "/d/f", permR))
	// A directory, a missing path, a bad mode.
	must(t, e.CheckAccess(ctx, root, "/d", permR|permX))
	wantKind(t, e.CheckAccess(ctx, root, "/d/nope", 0), meta.ErrNotFound)
	wantKind(t, e.CheckAccess(ctx, root, "/d/f", 8), meta.ErrInvalidArgument)
}
