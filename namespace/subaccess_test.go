package namespace

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestRecursiveDeleteChecksDeepDirectories: a recursive delete by a user
// who lacks read on a directory two levels below the one deleted is
// refused, as HDFS refuses it (every directory of the subtree must grant
// read, write and search), and removes nothing; the superuser's goes.
func TestRecursiveDeleteChecksDeepDirectories(t *testing.T) {
	for _, cached := range []bool{false, true} {
		var e *Engine
		if cached {
			e, _ = newCachedEngine(t, 8<<20)
		} else {
			e, _ = newEngine(t)
		}
		ctx := context.Background()
		bob, ann := meta.User{Name: "bob"}, meta.User{Name: "ann"}
		must(t, e.Mkdirs(ctx, root, "/c", 0o777))
		must(t, e.SetOwner(ctx, root, "/c", "bob", ""))
		must(t, e.Mkdirs(ctx, ann, "/c/a", 0o777))
		must(t, e.SetPermission(ctx, ann, "/c/a", 0o777))
		must(t, e.Mkdirs(ctx, ann, "/c/a/a", 0o777))
		must(t, e.SetPermission(ctx, ann, "/c/a/a", 0o733))
		must(t, e.Mkdirs(ctx, ann, "/c/b", 0o777))
		must(t, e.SetPermission(ctx, ann, "/c/b", 0o777))
		// Listed and stat'ed first, so that a cache holds the rows.
		for range 2 {
			if _, err := e.List(ctx, bob, "/c", "", 100); err != nil {
				t.Fatal(err)
			}
			if _, err := e.List(ctx, bob, "/c/a", "", 100); err != nil {
				t.Fatal(err)
			}
		}
		err := e.Delete(ctx, bob, "/c", true)
		if meta.KindOf(err) != meta.KindPermission {
			t.Fatalf("cache %v: bob's rm -r /c with /c/a/a mode 733 (ann's): %v, want permission denied", cached, err)
		}
		if _, err := e.Stat(ctx, root, "/c/a/a"); err != nil {
			t.Fatalf("cache %v: after the refused delete: %v", cached, err)
		}
	}
}
