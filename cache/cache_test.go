package cache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func root() Inode {
	return Inode{Parent: store.RootParentID, ID: store.RootID, Type: meta.TypeDir, Perm: 0o755, Owner: "hdfs", Group: "supergroup"}
}

func dir(parent, id uint64, name string) Inode {
	return Inode{Parent: parent, Name: name, ID: id, Type: meta.TypeDir, Perm: 0o755, Owner: "alice", Group: "staff"}
}

func file(parent, id uint64, name string) Inode {
	return Inode{Parent: parent, Name: name, ID: id, Type: meta.TypeFile, Perm: 0o644, Owner: "alice", Group: "staff"}
}

// tree caches /a (2), /a/b (3), /a/b/f (4), /a/g (5).
func tree(t *testing.T, c *Cache) {
	t.Helper()
	if n := c.PutPath(c.Begin(), root(), dir(1, 2, "a"), dir(2, 3, "b"), file(3, 4, "f")); n != 4 {
		t.Fatalf("PutPath installed %d of 4", n)
	}
	if !c.Put(c.Begin(), file(2, 5, "g")) {
		t.Fatal("Put /a/g")
	}
}

func names(rows []Inode) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Name)
	}
	return "/" + strings.Join(s[min(1, len(s)):], "/")
}

func TestResolve(t *testing.T) {
	c := newCache(t, DefaultConfig())
	if rows := c.Resolve([]string{"a"}, nil); len(rows) != 0 {
		t.Fatalf("empty cache resolved %v", rows)
	}
	tree(t, c)
	for _, tc := range []struct {
		path []string
		want string
	}{
		{nil, "/"},
		{[]string{"a", "b", "f"}, "/a/b/f"},
		{[]string{"a", "b", "x"}, "/a/b"},
		{[]string{"a", "g", "x"}, "/a/g"}, // stops at a file
		{[]string{"z"}, "/"},
	} {
		if got := names(c.Resolve(tc.path, nil)); got != tc.want {
			t.Errorf("Resolve(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
	n, ok := c.Get(3, "f")
	want := file(3, 4, "f")
	if !ok || n != want {
		t.Fatalf("Get(3, f) = %+v %v, want %+v", n, ok, want)
	}
}

func TestPutNeedsParent(t *testing.T) {
	c := newCache(t, DefaultConfig())
	if c.Put(c.Begin(), file(7, 8, "orphan")) {
		t.Fatal("installed a row whose parent is not cached")
	}
	c.Put(c.Begin(), root())
	if c.Put(c.Begin(), file(1, 2, "f")); c.Put(c.Begin(), file(2, 3, "x")) {
		t.Fatal("installed a row under a file")
	}
	// A path stops at its first refused row.
	if n := c.PutPath(c.Begin(), dir(1, 4, "d"), dir(9, 5, "e"), file(5, 6, "g")); n != 1 {
		t.Fatalf("PutPath installed %d, want 1", n)
	}
}

func TestFromStoreRoundTrip(t *testing.T) {
	c := newCache(t, DefaultConfig())
	c.Put(c.Begin(), root())
	s := store.Inode{Parent: 1, Name: "l", ID: 9, Type: meta.TypeSymlink, Perm: 0o1777, Owner: "bob", Group: "g",
		Symlink: "/x/y", ACL: "\x01acl", XAttrs: true, SubtreeOwner: 0xdeadbeef, Mtime: 5, Length: 7, Children: 3}
	if !c.Put(c.Begin(), FromStore(&s)) {
		t.Fatal("Put")
	}
	got, _ := c.Get(1, "l")
	if want := FromStore(&s); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReplaceAndMove(t *testing.T) {
	c := newCache(t, DefaultConfig())
	tree(t, c)
	// The same key and id again: replaced, the children stay.
	d := dir(1, 2, "a")
	d.Perm = 0o700
	if !c.Put(c.Begin(), d) {
		t.Fatal("refill /a")
	}
	if got := names(c.Resolve([]string{"a", "b", "f"}, nil)); got != "/a/b/f" {
		t.Fatalf("after a refill: %s", got)
	}
	// /a/b under another key (moved to /a/g2... here /b2): the old key goes.
	if !c.Put(c.Begin(), dir(1, 3, "b2")) {
		t.Fatal("Put /b2")
	}
	if _, ok := c.Get(2, "b"); ok {
		t.Fatal("the old key of a moved inode is still cached")
	}
	if _, ok := c.Get(3, "f"); ok {
		t.Fatal("the old key's subtree is still cached")
	}
	// Another inode under an old key: replaced, with its subtree.
	if !c.Put(c.Begin(), dir(1, 20, "a")) {
		t.Fatal("Put new /a")
	}
	if _, ok := c.Get(2, "g"); ok {
		t.Fatal("the replaced inode's children are still cached")
	}
	if st := c.Stats(); st.Entries != 3 {
		t.Fatalf("%d entries, want 3 (/, /b2, /a)", st.Entries)
	}
}

func TestInvalidateKinds(t *testing.T) {
	for _, tc := range []struct {
		target Target
		gone   []string // of /a, /a/b, /a/b/f, /a/g
	}{
		{Key(2, "b"), []string{"/a/b", "/a/b/f"}},
		{Key(2, "g"), []string{"/a/g"}},
		{Key(2, "nothing"), nil},
		{InodeID(4), []string{"/a/b/f"}},
		{InodeID(2), []string{"/a", "/a/b", "/a/b/f", "/a/g"}},
		{Subtree(3), []string{"/a/b", "/a/b/f"}},
		{Subtree(4), nil}, // not a directory
		{ListingOf(2), nil},
	} {
		c := newCache(t, DefaultConfig())
		tree(t, c)
		c.Invalidate(tc.target)
		var gone []string
		for _, p := range []struct {
			parent uint64
			name   string
			path   string
		}{{1, "a", "/a"}, {2, "b", "/a/b"}, {3, "f", "/a/b/f"}, {2, "g", "/a/g"}} {
			if _, ok := c.Get(p.parent, p.name); !ok {
				gone = append(gone, p.path)
			}
		}
		if fmt.Sprint(gone) != fmt.Sprint(tc.gone) {
			t.Errorf("%+v: gone %v, want %v", tc.target, gone, tc.gone)
		}
		if _, ok := c.Get(0, ""); !ok {
			t.Errorf("%+v: the root went", tc.target)
		}
	}
}

func TestListing(t *testing.T) {
	c := newCache(t, DefaultConfig())
	if c.PutListing(c.Begin(), 2, "", []byte("p0")) {
		t.Fatal("a page of an uncached directory went in")
	}
	tree(t, c)
	if c.PutListing(c.Begin(), 4, "", []byte("p0")) {
		t.Fatal("a page of a file went in")
	}
	c.PutListing(c.Begin(), 2, "", []byte("p0"))
	c.PutListing(c.Begin(), 2, "b", []byte("p1"))
	c.PutListing(c.Begin(), 3, "", []byte("q0"))
	c.PutListing(c.Begin(), 2, "b", []byte("p1'"))
	for _, tc := range []struct {
		dir    uint64
		cursor string
		want   string
	}{{2, "", "p0"}, {2, "b", "p1'"}, {3, "", "q0"}, {2, "x", ""}} {
		got, ok := c.Listing(tc.dir, tc.cursor)
		if string(got) != tc.want || ok != (tc.want != "") {
			t.Errorf("Listing(%d, %q) = %q %v, want %q", tc.dir, tc.cursor, got, ok, tc.want)
		}
	}
	if st := c.Stats(); st.Pages != 3 {
		t.Fatalf("%d pages, want 3", st.Pages)
	}
	c.Invalidate(ListingOf(2))
	if _, ok := c.Listing(2, ""); ok {
		t.Fatal("page survived its listing's invalidation")
	}
	if _, ok := c.Get(1, "a"); !ok {
		t.Fatal("a listing invalidation took the directory's entry")
	}
	c.Invalidate(Key(2, "b")) // the directory goes, its pages with it
	if _, ok := c.Listing(3, ""); ok {
		t.Fatal("page survived its directory")
	}
	if st := c.Stats(); st.Pages != 0 {
		t.Fatalf("%d pages, want 0", st.Pages)
	}
}

func TestBytesAccounting(t *testing.T) {
	c := newCache(t, DefaultConfig())
	tree(t, c)
	c.PutListing(c.Begin(), 2, "", make([]byte, 100))
	want := 5*int64(EntryOverhead) + int64(len("abfg")) + PageOverhead + 100
	if st := c.Stats(); st.Bytes != want {
		t.Fatalf("bytes %d, want %d", st.Bytes, want)
	}
	c.Invalidate(Subtree(1))
	if st := c.Stats(); st.Bytes != 0 || st.Entries != 0 || st.Pages != 0 {
		t.Fatalf("after dropping everything: %+v", st)
	}
}

func TestEvictionKeepsBudgetAndHotPaths(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBytes = 200 * (EntryOverhead + 8)
	c := newCache(t, cfg)
	c.Put(c.Begin(), root())
	c.Put(c.Begin(), dir(1, 2, "hot"))
	c.Put(c.Begin(), file(2, 3, "f"))
	for i := range 5000 {
		c.Put(c.Begin(), file(1, uint64(100+i), fmt.Sprintf("cold%04d", i)))
		if i%50 == 0 { // a path in use keeps its bits set
			if rows := c.Resolve([]string{"hot", "f"}, nil); len(rows) != 3 {
				t.Fatalf("hot path evicted at %d: %s", i, names(rows))
			}
		}
		if st := c.Stats(); st.Bytes > cfg.MaxBytes {
			t.Fatalf("bytes %d over the budget %d", st.Bytes, cfg.MaxBytes)
		}
	}
	if st := c.Stats(); st.Entries < 150 {
		t.Fatalf("only %d entries left in a budget of 200", st.Entries)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Registerer = reg
	c := newCache(t, cfg)
	tree(t, c)
	c.Get(2, "g")
	c.Get(2, "nope")
	c.Invalidate(Key(2, "g"), Subtree(3))
	c.Listing(2, "")
	if _, err := New(cfg); err == nil {
		t.Fatal("a second cache on one registerer")
	}
	for name, want := range map[string]float64{
		"nimbus_cache_hits_total":          1,
		"nimbus_cache_misses_total":        2,
		"nimbus_cache_invalidations_total": 2,
		"nimbus_cache_entries":             2,
		"nimbus_cache_bytes":               2*EntryOverhead + 1,
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got float64
		for _, mf := range mfs {
			if mf.GetName() == name {
				for _, m := range mf.GetMetric() {
					got += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := testutil.ToFloat64(c.m.invalidations.WithLabelValues("prefix")); n != 1 {
		t.Errorf("prefix invalidations %v", n)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.MaxBytes = 1
	if _, err := New(cfg); err == nil {
		t.Fatal("a budget below one entry")
	}
}
