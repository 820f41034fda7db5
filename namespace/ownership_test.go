package namespace

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/store"
)

// TestOwnershipRule: the routing keys of the entries (ownership.go).
func TestOwnershipRule(t *testing.T) {
	dir := &store.Inode{Parent: 7, Name: "d", ID: 9, Type: meta.TypeDir}
	file := &store.Inode{Parent: 7, Name: "f", ID: 10, Type: meta.TypeFile}
	link := &store.Inode{Parent: 7, Name: "l", ID: 11, Type: meta.TypeSymlink}
	for _, c := range []struct {
		name      string
		old, n    *store.Inode
		want      Target
		wantRoute uint64
	}{
		{"file created", nil, file, owned(cache.Key(7, "f"), 7), 7},
		{"file deleted", file, nil, owned(cache.Key(7, "f"), 7), 7},
		{"file changed", file, file, owned(cache.Key(7, "f"), 7), 7},
		{"symlink", nil, link, owned(cache.Key(7, "f"), 7), 7},
		{"directory created", nil, dir, everywhere(cache.Key(7, "f")), 0},
		{"directory deleted", dir, nil, everywhere(cache.Key(7, "f")), 0},
		{"directory replaced by a file", dir, file, everywhere(cache.Key(7, "f")), 0},
		{"unknown", nil, nil, everywhere(cache.Key(7, "f")), 0},
	} {
		if got := rowTarget(7, "f", c.old, c.n); got != c.want {
			t.Errorf("%s: rowTarget = %+v, want %+v", c.name, got, c.want)
		}
	}
	if k, shared := rowRoute(dir); !shared || k != 0 {
		t.Errorf("rowRoute(dir) = %d, %v; want shared", k, shared)
	}
	if k, shared := rowRoute(file); shared || k != 7 {
		t.Errorf("rowRoute(file) = %d, %v; want 7", k, shared)
	}
	if attrsRoute(dir) != 7 || listingRoute(9) != 9 {
		t.Errorf("attrsRoute(dir) = %d, listingRoute(9) = %d; want the parent 7 and the directory 9", attrsRoute(dir), listingRoute(9))
	}
}

// recordingInvalidator is a Guarded invalidator over one cache that keeps
// the targets of every write.
type recordingInvalidator struct {
	c  *cache.Cache
	mu sync.Mutex
	ts [][]Target
}

func (r *recordingInvalidator) Invalidate(ctx context.Context, ts []cache.Target) (func(bool), error) {
	h := r.c.Hold(ts...)
	return func(bool) { h.Release() }, nil
}

func (r *recordingInvalidator) InvalidateGuarded(ctx context.Context, ts []Target) (func(context.Context, store.Txn) error, func(bool), error) {
	r.mu.Lock()
	r.ts = append(r.ts, slices.Clone(ts))
	r.mu.Unlock()
	h := r.c.Hold(cacheTargets(ts)...)
	return func(context.Context, store.Txn) error { return nil }, func(bool) { h.Release() }, nil
}

// last returns the targets of the last write with any, and forgets all.
func (r *recordingInvalidator) last() []Target {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Target
	for _, ts := range r.ts {
		if len(ts) > 0 {
			out = ts
		}
	}
	r.ts = nil
	return out
}

// TestOwnershipFillsAndTargets: an engine of deployment 0 of 2 fills a
// file's row and attributes only under a directory its deployment owns, a
// listing only of such a directory, directory rows always; and the
// targets of creates, chmods and renames carry the rule's reach.
func TestOwnershipFillsAndTargets(t *testing.T) {
	const n, d = 2, 0
	rec := &recordingInvalidator{}
	e, _, err := openEngineDirWith(t.TempDir(), func(cfg *Config) {
		withCache(1 << 20)(cfg)
		rec.c = cfg.Cache
		cfg.Invalidator = rec
		cfg.Deployment, cfg.Deployments = d, n
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	c := e.cache
	ids := map[string]uint64{}
	stat := func(p string) *meta.FileStatus {
		t.Helper()
		st, err := e.Stat(ctx, root, p)
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = st.FileID
		return st
	}
	seen := map[bool]int{}
	for i := range 8 {
		dir := fmt.Sprintf("/d%d", i)
		if err := e.Mkdirs(ctx, root, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := meta.CreateFile(ctx, e, root, dir+"/f", meta.CreateOptions{Client: "t", Perm: 0o644}, nil); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			stat(dir + "/f")
			if _, err := e.List(ctx, root, dir, "", 0); err != nil {
				t.Fatal(err)
			}
		}
		id := ids[dir+"/f"]
		dirID := stat(dir).FileID
		mine := routing.Owner(dirID, n) == d
		seen[mine]++
		if _, ok := c.Get(store.RootID, dir[1:]); !ok {
			t.Errorf("%s: the directory's row is not cached (any deployment caches it)", dir)
		}
		if _, ok := c.Get(dirID, "f"); ok != mine {
			t.Errorf("%s/f: row cached %v, owned %v", dir, ok, mine)
		}
		if _, ok := c.Attrs(id); ok != mine {
			t.Errorf("%s/f: attributes cached %v, owned %v", dir, ok, mine)
		}
		if _, ok := c.Listing(dirID, pageCursor(e.cfg.ListLimit, "")); ok != mine {
			t.Errorf("%s: listing cached %v, owned %v", dir, ok, mine)
		}
		// The reads are right whoever owns what.
		if st := stat(dir + "/f"); st.Path != dir+"/f" || st.Type != meta.TypeFile {
			t.Errorf("stat %s/f = %+v", dir, st)
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("owned directories %d, others %d: the test needs both", seen[true], seen[false])
	}

	rec.last()
	a, b := ids["/d0"], ids["/d1"]
	want := func(op string, got []Target, ws ...Target) {
		t.Helper()
		for _, w := range ws {
			if !slices.Contains(got, w) {
				t.Errorf("%s: targets %+v lack %+v", op, got, w)
			}
		}
		if len(got) != len(ws) {
			t.Errorf("%s: targets %+v, want %+v", op, got, ws)
		}
	}
	if _, err := meta.CreateFile(ctx, e, root, "/d0/g", meta.CreateOptions{Client: "t", Perm: 0o644}, nil); err != nil {
		t.Fatal(err)
	}
	// The parent's attributes (count, times) belong to the owner of the
	// parent's parent, as does the listing that shows them. The new key
	// itself is no target: no cache can hold a row that was not there.
	want("create /d0/g", rec.last(), owned(cache.ListingOf(a), a),
		owned(cache.AttrsOf(a), store.RootID), owned(cache.ListingOf(store.RootID), store.RootID))
	if err := e.SetPermission(ctx, root, "/d0/g", 0o600); err != nil {
		t.Fatal(err)
	}
	want("chmod /d0/g", rec.last(), owned(cache.Key(a, "g"), a), owned(cache.ListingOf(a), a))
	if err := e.SetPermission(ctx, root, "/d0", 0o700); err != nil {
		t.Fatal(err)
	}
	want("chmod /d0", rec.last(), everywhere(cache.Key(store.RootID, "d0")), owned(cache.ListingOf(store.RootID), store.RootID))
	if err := e.Rename(ctx, root, "/d0/g", "/d1/h", meta.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	want("rename /d0/g /d1/h", rec.last(),
		owned(cache.Key(a, "g"), a), owned(cache.ListingOf(a), a), owned(cache.ListingOf(b), b),
		owned(cache.AttrsOf(a), store.RootID), owned(cache.AttrsOf(b), store.RootID), owned(cache.ListingOf(store.RootID), store.RootID))
	if err := e.Rename(ctx, root, "/d1", "/d0/e", meta.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	// A directory's old key reaches every instance (paths resolve
	// through it); its new key, where nothing was, reaches none.
	got := rec.last()
	if w := everywhere(cache.Key(store.RootID, "d1")); !slices.Contains(got, w) {
		t.Errorf("rename /d1 /d0/e: targets %+v lack %+v", got, w)
	}
	for _, x := range got {
		if x.Target == cache.Key(a, "e") {
			t.Errorf("rename /d1 /d0/e: targets %+v hold the new key %+v", got, x)
		}
	}
}
