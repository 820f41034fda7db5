package cache

import (
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// FuzzEntry puts a row with arbitrary strings and flags and reads it back:
// the packing of name, symlink target, ACL and subtree owner into one
// string must return every field, and a row that cannot be packed is
// refused rather than cut.
func FuzzEntry(f *testing.F) {
	f.Add(uint64(1), "a", uint64(2), uint8(1), uint32(0o644), "alice", "staff", "", "", false, uint64(0))
	f.Add(uint64(1), "l", uint64(3), uint8(3), uint32(0o777), "", "", "\x01\x02", "/x/y", true, uint64(7))
	f.Add(uint64(9), "", uint64(4), uint8(2), uint32(0o1777), "u", "u", "", "", false, ^uint64(0))
	f.Fuzz(func(t *testing.T, parent uint64, name string, id uint64, typ uint8, perm uint32,
		owner, group, acl, symlink string, xattrs bool, subtree uint64) {
		c := newCache(t, DefaultConfig())
		if !c.Put(c.Begin(), root()) {
			t.Fatal("root")
		}
		if parent == 0 || parent == 1 && name == "" {
			parent = 1
			if name == "" {
				name = "x"
			}
		}
		if parent != 1 {
			if !c.Put(c.Begin(), dir(1, parent, "p")) {
				t.Fatalf("parent %d", parent)
			}
		}
		n := Inode{Parent: parent, Name: name, ID: id, Type: meta.FileType(typ), Perm: meta.Perm(perm), Owner: owner,
			Group: group, ACL: acl, Symlink: symlink, XAttrs: xattrs, SubtreeOwner: subtree}
		if id == 1 || id == parent {
			return // the root's or the parent's id: another test's business
		}
		ok := c.Put(c.Begin(), n)
		if ok != encodable(&n) {
			t.Fatalf("Put = %v, encodable %v", ok, encodable(&n))
		}
		got, found := c.Get(parent, name)
		if found != ok {
			t.Fatalf("Get found %v after Put %v", found, ok)
		}
		if ok && got != n {
			t.Fatalf("got %+v, want %+v", got, n)
		}
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
		c.Invalidate(Key(parent, name))
		if _, found := c.Get(parent, name); found {
			t.Fatal("found after its invalidation")
		}
	})
}

func TestResolutionChanged(t *testing.T) {
	base := store.Inode{Parent: 1, Name: "d", ID: 2, Type: meta.TypeDir, Perm: 0o755, Owner: "a", Group: "g",
		NsQuota: 100, SpaceQuota: -1}
	for _, tc := range []struct {
		name    string
		change  func(n *store.Inode)
		changed bool
	}{
		{"entry count, times, quota usage (a create in it)", func(n *store.Inode) {
			n.Children++
			n.Mtime, n.Atime = 5, 5
			n.NsUsed++
			n.SpaceUsed += 10
		}, false},
		{"length and lease (a write)", func(n *store.Inode) { n.Length, n.Written, n.LeaseHolder = 5, 9, "c" }, false},
		{"quota limit", func(n *store.Inode) { n.NsQuota = 5 }, false},
		{"permission", func(n *store.Inode) { n.Perm = 0o700 }, true},
		{"owner", func(n *store.Inode) { n.Owner = "b" }, true},
		{"group", func(n *store.Inode) { n.Group = "h" }, true},
		{"ACL", func(n *store.Inode) { n.ACL = "\x01" }, true},
		{"subtree flag", func(n *store.Inode) { n.SubtreeOwner = 7 }, true},
		{"xattrs", func(n *store.Inode) { n.XAttrs = true }, true},
		{"renamed", func(n *store.Inode) { n.Parent, n.Name = 3, "e" }, true},
	} {
		n := base
		tc.change(&n)
		if got := ResolutionChanged(&base, &n); got != tc.changed {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.changed)
		}
	}
}
