package cache

import (
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Attrs are an inode's hot attributes: what a stat shows that Inode leaves
// out because it changes with every child of a directory (entry count,
// times) or every write of a file (length, the lease). They are the cache's
// second kind of value, keyed by inode id and kept only while the inode's
// entry is (they go with it, on eviction and on every invalidation that
// drops it), so that a stat of a cached path costs no store round trip while
// a create in a directory invalidates the directory's Attrs and listing, and
// no cached path through it (docs/ELASTIC.md, "Hot directory rows").
//
// Quota usage (NsUsed, SpaceUsed) is not here: a stat does not show it, and
// every create below a directory with a quota changes it.
type Attrs struct {
	Length     int64
	Mtime      int64
	Atime      int64
	BlockSize  int64
	Children   int64
	NsQuota    int64
	SpaceQuota int64
	// Replication and UnderConstruction (a lease holder is set) are a
	// file's; the strings of the lease are not cached.
	Replication       uint16
	UnderConstruction bool
}

// AttrsFromStore returns the hot attributes of a store row.
func AttrsFromStore(n *store.Inode) Attrs {
	return Attrs{Length: n.Length, Mtime: n.Mtime, Atime: n.Atime, BlockSize: n.BlockSize, Children: n.Children,
		NsQuota: n.NsQuota, SpaceQuota: n.SpaceQuota, Replication: n.Replication, UnderConstruction: n.UnderConstruction()}
}

// AttrsChanged reports whether a write that turns row old into row new
// changes its hot attributes, that is, whether it must invalidate
// AttrsOf(id). With ResolutionChanged it is the one place that says which
// fields of a row the cache holds.
func AttrsChanged(old, new *store.Inode) bool { return AttrsFromStore(old) != AttrsFromStore(new) }

// ToStore returns the store row made of a cached entry and its hot
// attributes: every field a stat or a listing shows is right; the others
// (quota usage, the lease's holder and renewal, Written, Blocks) are zero,
// and LeaseHolder is a placeholder when the file is under construction.
func ToStore(n *Inode, a *Attrs) store.Inode {
	s := store.Inode{Parent: n.Parent, Name: n.Name, ID: n.ID, Type: n.Type, XAttrs: n.XAttrs, Perm: n.Perm,
		Owner: n.Owner, Group: n.Group, Symlink: n.Symlink, ACL: n.ACL, SubtreeOwner: n.SubtreeOwner,
		Replication: a.Replication, Mtime: a.Mtime, Atime: a.Atime, Length: a.Length, BlockSize: a.BlockSize,
		Children: a.Children, NsQuota: a.NsQuota, SpaceQuota: a.SpaceQuota}
	if a.UnderConstruction {
		s.LeaseHolder = "?"
	}
	return s
}

// AttrsOverhead is what the hot attributes of one inode count against the
// budget: the value (64 bytes) and its key in a Go map, whose slots are
// between 7/16 and 7/8 full (82 to 165 bytes a slot of 72), about 128 on
// average.
const AttrsOverhead = 128

// Attrs returns the cached hot attributes of inode id.
func (c *Cache) Attrs(id uint64) (Attrs, bool) {
	c.mu.RLock()
	a, ok := c.mu.attrs[id]
	c.mu.RUnlock()
	if ok {
		c.m.hitAttrs.add(id, 1)
	} else {
		c.m.missAttrs.add(id, 1)
	}
	return a, ok
}

// PutAttrs installs the hot attributes of inode id, read from the store by a
// fill that began with t. The inode's entry must be cached (the attributes
// go when it goes); the fill-race rule is the same as for a listing page:
// an invalidation of the id (AttrsOf, InodeID, ListingOf, Subtree) since t
// refuses it.
func (c *Cache) PutAttrs(t Token, id uint64, a Attrs) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.mu.ids[id]
	if !ok {
		return false
	}
	if !c.mayFillLocked(t, 0, false, id) {
		c.m.fillsDropped.Inc()
		return false
	}
	e := &c.mu.entries[i]
	if e.flags&fAttrs == 0 {
		e.flags |= fAttrs
		c.mu.bytes += AttrsOverhead
	}
	c.mu.attrs[id] = a
	c.evictLocked()
	return true
}

// dropAttrsLocked forgets the hot attributes of entry e, if cached.
func (c *Cache) dropAttrsLocked(e *entry) {
	if e.flags&fAttrs == 0 {
		return
	}
	e.flags &^= fAttrs
	delete(c.mu.attrs, e.id)
	c.mu.bytes -= AttrsOverhead
	c.dropContentLocked(e.id)
}

// View is one look at a path (Look): the longest cached prefix of its rows,
// as Resolve returns it, and, when the whole path is cached, the hot
// attributes of its last row and the listing page asked for, if cached.
type View struct {
	Rows     []Inode
	Attrs    Attrs
	HasAttrs bool
	Page     any // a listing value (PutListingValue)
	HasPage  bool
	// Content is the last row's bytes (a small regular file's, PutContent)
	// when cached with its hot attributes; read only.
	Content    []byte
	HasContent bool
}

// Full reports whether every component of a path of n names was cached.
func (v *View) Full(n int) bool { return len(v.Rows) == n+1 }

// Look is Resolve of names into v.Rows (reusing its memory), with the hot
// attributes of the last row and, when page is set, the listing value of
// the last row that starts after cursor, all under one read lock: the
// answer comes from one state of the cache, so that a stat or a listing
// answered from it is the state at one instant (the lookup's).
func (c *Cache) Look(names []string, page bool, cursor string, v *View) {
	c.mu.RLock()
	var h uint64
	v.Rows, h = c.resolveLocked(names, v.Rows[:0])
	v.HasAttrs, v.HasPage, v.Page = false, false, nil
	v.Content, v.HasContent = nil, false
	full := len(v.Rows) == len(names)+1
	if full {
		last := &v.Rows[len(v.Rows)-1]
		v.Attrs, v.HasAttrs = c.mu.attrs[last.ID]
		if v.HasAttrs && last.Type == meta.TypeFile {
			v.Content, v.HasContent = c.mu.content[last.ID]
		}
		if page && last.Type == meta.TypeDir {
			if pg := c.pageLocked(last.ID, cursor); pg != nil {
				v.Page, v.HasPage = pg.val, true
			}
		}
	}
	c.mu.RUnlock()
	c.countResolve(h, len(names), v.Rows)
	if full {
		id := v.Rows[len(v.Rows)-1].ID
		if v.HasAttrs {
			c.m.hitAttrs.add(id, 1)
		} else {
			c.m.missAttrs.add(id, 1)
		}
		if page {
			if v.HasPage {
				c.m.hitListing.add(id, 1)
			} else {
				c.m.missListing.add(id, 1)
			}
		}
	}
}
