package namespace

import (
	"context"
	"fmt"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestListShared: ListShared answers a cached page with the page itself
// (the same entries every time, capped so that an append reallocates),
// List with a copy its caller may change without changing what later
// listings say, and a write in the directory drops the page, shared or not.
func TestListShared(t *testing.T) {
	e, _ := newCachedEngine(t, 16<<20)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o755))
	for i := range 5 {
		writeFile(t, e, root, fmt.Sprintf("/d/f%d", i), []byte("x"))
	}
	names := func(l *meta.Listing) string {
		s := ""
		for i := range l.Entries {
			s += l.Entries[i].Name() + " "
		}
		return s
	}
	first, err := e.ListShared(ctx, root, "/d", "", 0) // from the store: fills the cache without a copy
	must(t, err)
	a, err := e.ListShared(ctx, root, "/d", "", 0)
	must(t, err)
	b, err := e.ListShared(ctx, root, "/d", "", 0)
	must(t, err)
	if len(a.Entries) != 5 || &a.Entries[0] != &b.Entries[0] || &a.Entries[0] != &first.Entries[0] {
		t.Fatalf("cached shared pages are not the page itself: %d entries", len(a.Entries))
	}
	if cap(a.Entries) != len(a.Entries) {
		t.Fatalf("a shared page has room to append into: len %d cap %d", len(a.Entries), cap(a.Entries))
	}
	_ = append(a.Entries, meta.FileStatus{Path: "/d/appended"})

	own, err := e.List(ctx, root, "/d", "", 0)
	must(t, err)
	if &own.Entries[0] == &a.Entries[0] {
		t.Fatal("List answered with the cached page, not a copy")
	}
	want := names(a)
	own.Entries[0].Path = "/d/changed"
	own.Entries = own.Entries[:1]
	c, err := e.ListShared(ctx, root, "/d", "", 0)
	must(t, err)
	if got := names(c); got != want {
		t.Fatalf("after the caller of List changed its copy: %q, want %q", got, want)
	}

	writeFile(t, e, root, "/d/g", []byte("y"))
	d, err := e.ListShared(ctx, root, "/d", "", 0)
	must(t, err)
	if len(d.Entries) != 6 || d.Entries[5].Name() != "g" {
		t.Fatalf("after a create in the directory: %q", names(d))
	}
}
