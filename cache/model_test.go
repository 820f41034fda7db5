package cache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"pgregory.net/rapid"
)

// modelTree is the store in the model test: inodes by id, each with its key.
type modelTree struct {
	rows  map[uint64]*Inode
	attrs map[uint64]*Attrs // the hot attributes of every row
	next  uint64
}

// touched is what a change of directory id's entries invalidates besides
// the entry's key and id's listing: id's hot attributes, and the listing of
// id's parent, which shows them.
func (m *modelTree) touched(id uint64) []Target {
	return []Target{AttrsOf(id), ListingOf(m.rows[id].Parent)}
}

// touch changes the hot attributes of id as a create or delete of one of
// its entries (d: +1 or -1) does.
func (m *modelTree) touch(id uint64, d int64) {
	a := m.attrs[id]
	a.Children += d
	a.Mtime++
}

func (m *modelTree) children(id uint64) []*Inode {
	var out []*Inode
	for _, r := range m.rows {
		if r.Parent == id && r.ID != id {
			out = append(out, r)
		}
	}
	return out
}

func (m *modelTree) lookup(parent uint64, name string) *Inode {
	for _, r := range m.rows {
		if r.Parent == parent && r.Name == name {
			return r
		}
	}
	return nil
}

// chain returns the rows from the root to id.
func (m *modelTree) chain(id uint64) []Inode {
	var out []Inode
	for {
		r := m.rows[id]
		out = append([]Inode{*r}, out...)
		if r.Parent == 0 {
			return out
		}
		id = r.Parent
	}
}

func (m *modelTree) below(id uint64, f func(*Inode)) {
	for _, ch := range m.children(id) {
		f(ch)
		if ch.Type == meta.TypeDir {
			m.below(ch.ID, f)
		}
	}
}

func (m *modelTree) ids(t *rapid.T, label string) uint64 {
	var ids []uint64
	for id := range m.rows {
		ids = append(ids, id)
	}
	return rapid.SampledFrom(sortIDs(ids)).Draw(t, label)
}

func sortIDs(ids []uint64) []uint64 {
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return ids
}

// TestModel runs random fills, lookups and writes (each write invalidates
// what it changes, as the protocol will) against a model tree, with a budget
// small enough to evict, and checks that every cached answer is the model's
// row and that the invariants hold after every step.
func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.MaxBytes = rapid.Int64Range(EntryOverhead*4, EntryOverhead*40).Draw(t, "budget")
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := root()
		m := &modelTree{rows: map[uint64]*Inode{1: &r}, attrs: map[uint64]*Attrs{1: {}}, next: 2}
		t.Repeat(map[string]func(*rapid.T){
			"mkdir or create": func(t *rapid.T) {
				p := m.ids(t, "parent")
				if m.rows[p].Type != meta.TypeDir {
					return
				}
				name := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "name")
				if m.lookup(p, name) != nil {
					return
				}
				n := file(p, m.next, name)
				if rapid.Bool().Draw(t, "dir") {
					n = dir(p, m.next, name)
				}
				m.next++
				c.Invalidate(append(m.touched(p), Key(p, name), ListingOf(p))...)
				m.rows[n.ID] = &n
				m.attrs[n.ID] = &Attrs{Mtime: 1}
				m.touch(p, 1)
			},
			"chmod": func(t *rapid.T) {
				id := m.ids(t, "id")
				r := m.rows[id]
				c.Invalidate(Key(r.Parent, r.Name), ListingOf(r.Parent)) // the parent's listing shows it
				r.Perm = meta.Perm(rapid.IntRange(0, 0o777).Draw(t, "perm"))
			},
			"write": func(t *rapid.T) { // a file's length: its hot attributes and its parent's listing
				id := m.ids(t, "id")
				if id == 1 || m.rows[id].Type != meta.TypeFile {
					return
				}
				h := c.Hold(AttrsOf(id), ListingOf(m.rows[id].Parent))
				m.attrs[id].Length += int64(rapid.IntRange(1, 100).Draw(t, "bytes"))
				h.Release()
			},
			"chmod -R": func(t *rapid.T) {
				id := m.ids(t, "id")
				if m.rows[id].Type != meta.TypeDir {
					return
				}
				h := c.Hold(Subtree(id), ListingOf(m.rows[id].Parent))
				m.rows[id].Perm ^= 0o7
				m.below(id, func(r *Inode) { r.Perm ^= 0o7 })
				h.Release()
			},
			"rename": func(t *rapid.T) {
				id := m.ids(t, "id")
				to := m.ids(t, "to")
				r := m.rows[id]
				name := rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "name")
				if id == 1 || m.rows[to].Type != meta.TypeDir || m.lookup(to, name) != nil {
					return
				}
				for a := to; a != 0; a = m.rows[a].Parent { // not into itself
					if a == id {
						return
					}
				}
				c.Invalidate(append(append(m.touched(r.Parent), m.touched(to)...),
					Key(r.Parent, r.Name), Key(to, name), ListingOf(r.Parent), ListingOf(to))...)
				m.touch(r.Parent, -1)
				m.touch(to, 1)
				r.Parent, r.Name = to, name
			},
			"delete": func(t *rapid.T) {
				id := m.ids(t, "id")
				if id == 1 {
					return
				}
				r := m.rows[id]
				h := c.Hold(append(m.touched(r.Parent), Key(r.Parent, r.Name), ListingOf(r.Parent), Subtree(id))...)
				m.below(id, func(x *Inode) { delete(m.rows, x.ID); delete(m.attrs, x.ID) })
				delete(m.rows, id)
				delete(m.attrs, id)
				m.touch(r.Parent, -1)
				h.Release()
			},
			"fill": func(t *rapid.T) {
				id := m.ids(t, "id")
				tk := c.Begin()
				rows := m.chain(id)
				c.PutPath(tk, rows...)
			},
			"fill listing": func(t *rapid.T) {
				id := m.ids(t, "id")
				tk := c.Begin()
				c.PutPath(tk, m.chain(id)...)
				c.PutListing(tk, id, "", []byte(listing(m, id)))
				l := listing(m, id)
				c.PutListingValue(tk, id, "v", &l, int64(len(l)))
			},
			"fill attrs": func(t *rapid.T) {
				id := m.ids(t, "id")
				tk := c.Begin()
				c.PutPath(tk, m.chain(id)...)
				c.PutAttrs(tk, id, *m.attrs[id])
			},
			"stale fill attrs": func(t *rapid.T) { // a write overtakes the fill of a file's attributes
				id := m.ids(t, "id")
				if m.rows[id].Type != meta.TypeFile {
					return
				}
				tk := c.Begin()
				c.PutPath(tk, m.chain(id)...)
				read := *m.attrs[id]
				c.Invalidate(AttrsOf(id), ListingOf(m.rows[id].Parent))
				m.attrs[id].Length++
				if c.PutAttrs(tk, id, read) {
					t.Fatalf("a fill of the attributes of %d overtaken by a write installed them", id)
				}
			},
			"stale fill": func(t *rapid.T) { // a fill that a write overtakes: must not install
				id := m.ids(t, "id")
				if id == 1 {
					return
				}
				tk := c.Begin()
				rows := m.chain(id)
				r := m.rows[id]
				c.Invalidate(Key(r.Parent, r.Name), ListingOf(r.Parent))
				r.Perm ^= 0o1
				if n := c.PutPath(tk, rows...); n == len(rows) {
					t.Fatalf("a fill overtaken by a write installed all %d rows", n)
				}
			},
			"lookup": func(t *rapid.T) {
				id := m.ids(t, "id")
				want := m.chain(id)
				var names []string
				for _, r := range want[1:] {
					names = append(names, r.Name)
				}
				got := c.Resolve(names, nil)
				for k, g := range got {
					if g != want[k] {
						t.Fatalf("Resolve(%q)[%d] = %+v, want %+v", names, k, g, want[k])
					}
				}
				if b, ok := c.Listing(id, ""); ok && string(b) != listing(m, id) {
					t.Fatalf("listing of %d = %q, want %q", id, b, listing(m, id))
				}
				if a, ok := c.Attrs(id); ok && a != *m.attrs[id] {
					t.Fatalf("attrs of %d = %+v, want %+v", id, a, *m.attrs[id])
				}
				var v View
				c.Look(names, true, "v", &v)
				for k, g := range v.Rows {
					if g != want[k] {
						t.Fatalf("Look(%q).Rows[%d] = %+v, want %+v", names, k, g, want[k])
					}
				}
				if v.HasAttrs && v.Attrs != *m.attrs[id] {
					t.Fatalf("Look(%q).Attrs = %+v, want %+v", names, v.Attrs, *m.attrs[id])
				}
				if v.HasPage && *v.Page.(*string) != listing(m, id) {
					t.Fatalf("Look(%q).Page = %q, want %q", names, *v.Page.(*string), listing(m, id))
				}
			},
			"": func(t *rapid.T) {
				if err := c.check(); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
}

func listing(m *modelTree, id uint64) string {
	var s []string
	for _, ch := range m.children(id) {
		s = append(s, fmt.Sprintf("%s:%d:%o:%+v", ch.Name, ch.ID, ch.Perm, *m.attrs[ch.ID]))
	}
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return strings.Join(s, ",")
}
