package client_test

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// The unmasked mode travels the RPC to the engine for Create, CreateFile and
// MkdirsUnmasked, and its absence stays an absence (an unmasked 000 is sent
// as a value): under a default ACL with mask rwx, a client with umask 022
// gets HDFS-6962's modes only when it sends the unmasked one.
func TestUnmaskedModeOverRPC(t *testing.T) {
	ctx := context.Background()
	c := dial(t, serve(t, engine(t), nil), client.Options{})
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/p", 0o777); err != nil {
		t.Fatal(err)
	}
	es, _ := meta.ParseAclSpec("default:user::rwx,default:user:foo:rwx,default:group::r-x,default:other::---", true)
	if err := c.ModifyAclEntries(ctx, root, "/p", es); err != nil {
		t.Fatal(err)
	}
	want := func(path string, perm meta.Perm) {
		t.Helper()
		st, err := c.Stat(ctx, root, path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Perm != perm || !st.AclBit {
			t.Errorf("%s: perm %o aclBit %v, want %o with an ACL", path, st.Perm, st.AclBit, perm)
		}
	}
	if _, err := c.Create(ctx, root, "/p/stream", meta.CreateOptions{Perm: 0o644, Unmasked: 0o666, HasUnmasked: true}); err != nil {
		t.Fatal(err)
	}
	want("/p/stream", 0o660)
	if _, err := c.CreateFile(ctx, root, "/p/small", meta.CreateOptions{Perm: 0o644, Unmasked: 0o666, HasUnmasked: true}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	want("/p/small", 0o660)
	if _, err := c.CreateFile(ctx, root, "/p/zero", meta.CreateOptions{Perm: 0o644, HasUnmasked: true}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	want("/p/zero", 0o000)
	if _, err := c.CreateFile(ctx, root, "/p/masked", meta.CreateOptions{Perm: 0o644}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	want("/p/masked", 0o640)
	if err := c.MkdirsUnmasked(ctx, root, "/p/d/e", 0o755, 0o777); err != nil {
		t.Fatal(err)
	}
	want("/p/d", 0o770)
	want("/p/d/e", 0o770)
	if err := c.Mkdirs(ctx, root, "/p/m", 0o755); err != nil {
		t.Fatal(err)
	}
	want("/p/m", 0o750)
}
