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
	rows map[uint64]*Inode
	next uint64
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
		m := &modelTree{rows: map[uint64]*Inode{1: &r}, next: 2}
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
				c.Invalidate(Key(p, name), ListingOf(p))
				m.rows[n.ID] = &n
			},
			"chmod": func(t *rapid.T) {
				id := m.ids(t, "id")
				r := m.rows[id]
				c.Invalidate(Key(r.Parent, r.Name), ListingOf(r.Parent)) // the parent's listing shows it
				r.Perm = meta.Perm(rapid.IntRange(0, 0o777).Draw(t, "perm"))
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
				c.Invalidate(Key(r.Parent, r.Name), Key(to, name), ListingOf(r.Parent), ListingOf(to))
				r.Parent, r.Name = to, name
			},
			"delete": func(t *rapid.T) {
				id := m.ids(t, "id")
				if id == 1 {
					return
				}
				r := m.rows[id]
				h := c.Hold(Key(r.Parent, r.Name), ListingOf(r.Parent), Subtree(id))
				m.below(id, func(x *Inode) { delete(m.rows, x.ID) })
				delete(m.rows, id)
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
		s = append(s, fmt.Sprintf("%s:%d:%o", ch.Name, ch.ID, ch.Perm))
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
