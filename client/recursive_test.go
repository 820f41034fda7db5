package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// TestRecursiveAttrsOverRPC: chmod -R and chown -R reach the engine in one
// call each and change the whole tree; a refusal keeps its kind and names
// the path refused; a server whose file system has no such operation
// answers unsupported (what the shell falls back to a walk on).
func TestRecursiveAttrsOverRPC(t *testing.T) {
	ctx := context.Background()
	su := meta.User{Name: "root"}
	c := dial(t, serve(t, engine(t), nil), client.Options{})
	for _, p := range []string{"/d/a/f", "/d/a/g", "/d/b/c/h"} {
		if _, err := meta.CreateFile(ctx, c, su, p, meta.CreateOptions{Client: "t", CreateParent: true}, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetPermissionRecursive(ctx, su, "/d", 0o710); err != nil {
		t.Fatal(err)
	}
	if err := c.SetOwnerRecursive(ctx, su, "/d", "alice", "staff"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d", "/d/a", "/d/a/f", "/d/a/g", "/d/b", "/d/b/c", "/d/b/c/h"} {
		st, err := c.Stat(ctx, su, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Perm != 0o710 || st.Owner != "alice" || st.Group != "staff" {
			t.Errorf("%s is %s:%s %o", p, st.Owner, st.Group, st.Perm)
		}
	}
	if err := c.SetOwner(ctx, su, "/d/b/c/h", "bob", ""); err != nil {
		t.Fatal(err)
	}
	err := c.SetPermissionRecursive(ctx, meta.User{Name: "alice"}, "/d", 0o700)
	var oe *meta.OpError
	if !errors.Is(err, meta.ErrPermission) || !errors.As(err, &oe) || oe.Path != "/d/b/c/h" {
		t.Errorf("chmod -R over bob's file: %v, want permission denied at /d/b/c/h", err)
	}

	old := dial(t, serve(t, noCaps{metatest.NewMemFS()}, nil), client.Options{})
	if err := old.SetPermissionRecursive(ctx, su, "/", 0o755); !errors.Is(err, meta.ErrUnsupported) {
		t.Errorf("SetPermissionRecursive on a server without it: %v", err)
	}
	if err := old.SetOwnerRecursive(ctx, su, "/", "", "g"); !errors.Is(err, meta.ErrUnsupported) {
		t.Errorf("SetOwnerRecursive on a server without it: %v", err)
	}
}
