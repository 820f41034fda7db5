package cache

import "testing"

// TestContentLivesWithAttrs: a file's bytes go in only beside its hot
// attributes, and every drop of the attributes (AttrsOf, InodeID, a
// subtree, the entry's eviction) drops them, so that attributes filled
// again after a write never come back with the bytes of before; the budget
// counts them; a fill that raced an invalidation is refused.
func TestContentLivesWithAttrs(t *testing.T) {
	look := func(c *Cache) View {
		var v View
		c.Look([]string{"a", "b", "f"}, false, "", &v)
		return v
	}
	for _, tc := range []struct {
		name string
		drop Target
	}{{"attrs", AttrsOf(4)}, {"inode", InodeID(4)}, {"subtree", Subtree(3)}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, DefaultConfig())
			tree(t, c)
			if c.PutContent(c.Begin(), 4, []byte("old")) {
				t.Fatal("content went in without the attributes")
			}
			if !c.PutAttrs(c.Begin(), 4, Attrs{Length: 3}) || !c.PutContent(c.Begin(), 4, []byte("old")) {
				t.Fatal("attributes and content refused")
			}
			before := c.Stats().Bytes
			if v := look(c); !v.HasContent || string(v.Content) != "old" {
				t.Fatalf("look: %+v", v)
			}
			tk := c.Begin() // a fill that began before the write's invalidation
			c.Invalidate(tc.drop)
			if v := look(c); v.HasContent {
				t.Fatalf("content kept after %s", tc.name)
			}
			if got := c.Stats().Bytes; got >= before-int64(len("old")) && tc.name == "attrs" {
				t.Fatalf("bytes %d after the drop, %d before: the content's were not given back", got, before)
			}
			if tc.name != "attrs" {
				tree(t, c)
			}
			if c.PutAttrs(tk, 4, Attrs{Length: 3}) || c.PutContent(tk, 4, []byte("old")) {
				t.Fatal("a fill that raced the invalidation went in")
			}
			// A fill after the write: new attributes, and no old bytes with them.
			if !c.PutAttrs(c.Begin(), 4, Attrs{Length: 5}) {
				t.Fatal("attributes refused")
			}
			if v := look(c); !v.HasAttrs || v.HasContent {
				t.Fatalf("after refilling the attributes: attrs %v, content %q", v.HasAttrs, v.Content)
			}
		})
	}
}
