package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// The ACL and xattr calls travel the RPC to a MemFS and come back as the
// MemFS answers them.
func TestACLsAndXAttrsOverRPC(t *testing.T) {
	ctx := context.Background()
	c := dial(t, serve(t, metatest.NewMemFS(), nil), client.Options{})
	alice := meta.User{Name: "alice"}
	if err := c.Mkdirs(ctx, alice, "/d", 0o750); err != nil {
		t.Fatal(err)
	}
	es, _ := meta.ParseAclSpec("user:bob:rwx,default:group:staff:r-x", true)
	if err := c.ModifyAclEntries(ctx, alice, "/d", es); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetAclStatus(ctx, alice, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := meta.FormatAclSpec(st.Entries, true), "user:bob:rwx,group::r-x,default:user::rwx,default:group::r-x,default:group:staff:r-x,default:mask::r-x,default:other::---"; got != want || st.Perm != 0o770 || st.Owner != "alice" {
		t.Fatalf("GetAclStatus = %+v (%s)", st, got)
	}
	if fst, _ := c.Stat(ctx, alice, "/d"); !fst.AclBit {
		t.Fatal("Stat over RPC lost aclBit")
	}
	rm, _ := meta.ParseAclSpec("user:bob", false)
	if err := c.RemoveAclEntries(ctx, alice, "/d", rm); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveDefaultAcl(ctx, alice, "/d"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveAcl(ctx, alice, "/d"); err != nil {
		t.Fatal(err)
	}
	bad, _ := meta.ParseAclSpec("user:bob:rwx", true)
	if err := c.SetAcl(ctx, alice, "/d", bad); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("SetAcl without base entries: %v", err)
	}

	if err := c.SetXAttr(ctx, alice, "/d", meta.XAttr{Name: "user.k", Value: []byte{0, 1, 2}}, meta.XAttrCreate); err != nil {
		t.Fatal(err)
	}
	if err := c.SetXAttr(ctx, alice, "/d", meta.XAttr{Name: "user.k"}, meta.XAttrCreate); !errors.Is(err, meta.ErrExists) {
		t.Fatalf("create over existing: %v", err)
	}
	xs, err := c.GetXAttrs(ctx, alice, "/d", []string{"user.k"})
	if err != nil || len(xs) != 1 || string(xs[0].Value) != "\x00\x01\x02" {
		t.Fatalf("GetXAttrs = %v, %v", xs, err)
	}
	if names, err := c.ListXAttrs(ctx, alice, "/d"); err != nil || len(names) != 1 || names[0] != "user.k" {
		t.Fatalf("ListXAttrs = %v, %v", names, err)
	}
	if err := c.RemoveXAttr(ctx, alice, "/d", "user.k"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveXAttr(ctx, alice, "/d", "user.k"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("remove again: %v", err)
	}
}

// noCaps hides MemFS's optional capabilities.
type noCaps struct{ meta.FileSystem }
