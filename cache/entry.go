package cache

import (
	"encoding/binary"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Inode is what path resolution needs of one inode row: the row's key, the
// inode's id and type, and what a permission check, a symlink or a subtree
// flag on the path asks for. It leaves out on purpose what changes when a
// directory's children change (entry count, times, quota usage) or a file is
// written (length, lease): those would make every create in a directory
// invalidate every cached path through it (docs/ELASTIC.md, "Metadata
// cache").
//
// The strings of an Inode returned by the cache share memory with the cache
// and are immutable; they stay valid after the entry goes.
type Inode struct {
	Parent       uint64 // the parent directory's id (store.RootParentID for "/")
	Name         string // "" for "/"
	ID           uint64
	Type         meta.FileType
	Perm         meta.Perm
	Owner        string
	Group        string
	ACL          string // extended ACL entries, encoded as in store.Inode.ACL; "" for none
	Symlink      string // a symlink's target
	XAttrs       bool   // the inode has extended-attribute rows
	SubtreeOwner uint64 // the subtree-lock flag, 0 when none
}

// FromStore returns the resolution part of a store row.
func FromStore(n *store.Inode) Inode {
	return Inode{Parent: n.Parent, Name: n.Name, ID: n.ID, Type: n.Type, Perm: n.Perm, Owner: n.Owner,
		Group: n.Group, ACL: n.ACL, Symlink: n.Symlink, XAttrs: n.XAttrs, SubtreeOwner: n.SubtreeOwner}
}

// EntryOverhead is what a resolution entry counts against the budget beyond
// its strings: the entry in the slab (80 bytes, about 84 with the slab's
// spare capacity) and its slots in the key and id indexes (two Go maps,
// about 37 bytes each with their control bytes and load), plus the rounding
// of its string to an allocation size class. TestMemoryPerEntry checks that
// the heap stays within what is counted.
const EntryOverhead = 168

// PageOverhead is what a listing page counts against the budget beyond its
// cursor and bytes.
const PageOverhead = 96

const (
	fXAttrs  = 1 << 0
	fSubtree = 1 << 1
	fAttrs   = 1 << 2 // Cache.mu.attrs holds the entry's hot attributes (attrs.go)
)

// entry is one cached inode row. Entries live in a slab (Cache.mu.entries)
// and point at each other by slot index, so that the collector sees one
// pointer per entry (blob) and a million entries cost no million objects.
//
// blob holds the name, then the symlink target, then the ACL, then, when
// fSubtree is set, the subtree owner (8 bytes, little endian); nameLen and
// symLen cut it. One string instead of four: three string headers (48
// bytes) and up to three allocations less per entry.
type entry struct {
	parent  uint64
	id      uint64
	blob    string
	nameLen uint16
	symLen  uint16
	aclLen  uint16
	perm    uint16 // meta.PermMask fits
	typ     uint8  // 0: a free slot
	flags   uint8
	owner   uint32 // index into Cache.mu.users
	group   uint32
	ref     uint32 // CLOCK's reference bit, set by readers under the read lock (atomic)
	up      int32  // the parent's slot; -1 for "/"
	child   int32  // first cached child (directories); -1 for none
	next    int32  // next sibling, or next free slot
	prev    int32
	pages   int32 // first cached listing page; -1 for none
}

func (e *entry) name() string { return e.blob[:e.nameLen] }

// encodable reports whether n fits an entry: every length in 16 bits and
// a valid type and permission. A row that does not is simply not cached.
func encodable(n *Inode) bool {
	return len(n.Name) <= 0xffff && len(n.Symlink) <= 0xffff && len(n.ACL) <= 0xffff &&
		n.Type >= meta.TypeFile && n.Type <= meta.TypeSymlink && n.Perm&^meta.PermMask == 0
}

// encodeBlob sets e's strings and flags from n.
func encodeBlob(e *entry, n *Inode) {
	size := len(n.Name) + len(n.Symlink) + len(n.ACL)
	if n.SubtreeOwner != 0 {
		size += 8
	}
	b := make([]byte, 0, size)
	b = append(b, n.Name...)
	b = append(b, n.Symlink...)
	b = append(b, n.ACL...)
	e.flags &= fAttrs // the hot attributes stay: an invalidation drops them, not a newer row
	if n.SubtreeOwner != 0 {
		b = binary.LittleEndian.AppendUint64(b, n.SubtreeOwner)
		e.flags |= fSubtree
	}
	if n.XAttrs {
		e.flags |= fXAttrs
	}
	e.blob = string(b)
	e.nameLen, e.symLen, e.aclLen = uint16(len(n.Name)), uint16(len(n.Symlink)), uint16(len(n.ACL))
	e.parent, e.id, e.typ, e.perm = n.Parent, n.ID, uint8(n.Type), uint16(n.Perm)
}

// decodeBlob fills n from e, but for Owner and Group (interned: the cache
// fills them).
func decodeBlob(e *entry, n *Inode) {
	s := e.blob
	i, j, k := int(e.nameLen), int(e.nameLen)+int(e.symLen), int(e.nameLen)+int(e.symLen)+int(e.aclLen)
	*n = Inode{Parent: e.parent, Name: s[:i], ID: e.id, Type: meta.FileType(e.typ), Perm: meta.Perm(e.perm),
		Symlink: s[i:j], ACL: s[j:k], XAttrs: e.flags&fXAttrs != 0}
	if e.flags&fSubtree != 0 {
		n.SubtreeOwner = binary.LittleEndian.Uint64([]byte(s[k : k+8]))
	}
}

func entryCost(e *entry) int64 { return EntryOverhead + int64(len(e.blob)) }

// page is one cached listing page of a directory: bytes the caller encoded
// (the cache does not look inside), found by the directory and the cursor the
// page starts after.
type page struct {
	dir     int32 // the directory's entry slot; -1: a free slot
	next    int32
	prev    int32
	ref     uint32
	cursor  string
	data    []byte
	val     any   // a page kept as a Go value (PutListingValue), or nil
	valSize int64 // what val counts against the budget
}

func pageCost(p *page) int64 {
	return PageOverhead + int64(len(p.cursor)) + int64(len(p.data)) + p.valSize
}

// ResolutionChanged reports whether a write that turns row old into row new
// changes what the cache holds of it (FromStore), that is, whether the write
// must invalidate the row's key. A create, delete or rename in a directory
// changes the directory's entry count, times and quota usage, not its
// resolution part: such a write invalidates the directory's listing, and
// no cached path through it. This is the one place that says which fields
// are which.
func ResolutionChanged(old, new *store.Inode) bool { return FromStore(old) != FromStore(new) }
