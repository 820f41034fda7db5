package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/nimbus-fs/nimbus/meta"
)

// Inode is one row of the inode table. Parent and Name come from the row's key
// and are not part of the encoded value.
type Inode struct {
	Parent uint64 // parent directory's id (RootParentID for the root)
	Name   string // "" for the root

	ID uint64
	// Type, the flags, Replication and Perm share one word: the engine
	// decodes some ten rows per operation, and the struct's size class
	// is its allocation.
	Type meta.FileType
	// Blocks is set for a file whose content is in block storage (block rows
	// and replicas) rather than inline content rows.
	Blocks bool
	// XAttrs says the inode has extended-attribute rows (acl.go).
	XAttrs      bool
	Replication uint16
	Perm        meta.Perm
	Owner       string
	Group       string
	Mtime       int64 // ms since the epoch
	Atime       int64 // ms since the epoch
	Length      int64 // files: completed content length
	BlockSize   int64
	Children    int64  // directories: number of entries
	Symlink     string // symlinks: target

	// Under construction: a non-empty LeaseHolder holds the file's lease.
	LeaseHolder  string
	LeaseRenewed int64 // ms since the epoch, last renewal
	Written      int64 // bytes written so far, >= Length while under construction

	// ACL holds the extended ACL entries, encoded (EncodeACL), "" for none
	// (acl.go).
	ACL string

	// SubtreeOwner, when not 0, is the subtree-lock flag (HopsFS's
	// subtree operations protocol): the instance id of the engine
	// whose subtree operation owns this directory and everything below it.
	// Path resolution backs off from it; a flag of an instance that is not
	// the running one is stale. Its operation has a row in the subtree
	// operation table (subtree.go).
	SubtreeOwner uint64

	// Quotas (directories). -1 means none. Usage is maintained only while a
	// quota is set, as in HDFS.
	NsQuota    int64
	SpaceQuota int64
	NsUsed     int64 // inodes in the subtree, this directory included
	SpaceUsed  int64 // bytes times replication in the subtree
}

// Key returns the inode's row key.
func (n *Inode) Key() []byte { return InodeKey(n.Parent, n.Name) }

// UnderConstruction reports whether a writer holds the file's lease.
func (n *Inode) UnderConstruction() bool { return n.LeaseHolder != "" }

// HasQuota reports whether the directory has a namespace or space quota.
func (n *Inode) HasQuota() bool { return n.NsQuota >= 0 || n.SpaceQuota >= 0 }

const (
	inodeFormatV1 = 1

	flagUC      = 1 << 0
	flagQuota   = 1 << 1
	flagSymlink = 1 << 2
	flagBlocks  = 1 << 3
	flagACL     = 1 << 4
	flagXAttrs  = 1 << 5
	flagSubtree = 1 << 6
)

// ErrCorrupt is wrapped by decoding errors: a row that cannot be read back.
var ErrCorrupt = errors.New("store: corrupt row")

// EncodeInode appends the encoded value of n (without its key) to dst.
func EncodeInode(dst []byte, n *Inode) []byte {
	var flags byte
	if n.LeaseHolder != "" {
		flags |= flagUC
	}
	if n.HasQuota() {
		flags |= flagQuota
	}
	if n.Symlink != "" {
		flags |= flagSymlink
	}
	if n.Blocks {
		flags |= flagBlocks
	}
	if n.ACL != "" {
		flags |= flagACL
	}
	if n.XAttrs {
		flags |= flagXAttrs
	}
	if n.SubtreeOwner != 0 {
		flags |= flagSubtree
	}
	dst = append(dst, inodeFormatV1, flags, byte(n.Type))
	dst = binary.AppendUvarint(dst, n.ID)
	dst = binary.AppendUvarint(dst, uint64(n.Perm))
	dst = appendString(dst, n.Owner)
	dst = appendString(dst, n.Group)
	dst = binary.AppendVarint(dst, n.Mtime)
	dst = binary.AppendVarint(dst, n.Atime-n.Mtime) // usually 0 or small
	dst = binary.AppendVarint(dst, n.Length)
	dst = binary.AppendUvarint(dst, uint64(n.Replication))
	dst = binary.AppendVarint(dst, n.BlockSize)
	dst = binary.AppendVarint(dst, n.Children)
	if flags&flagSymlink != 0 {
		dst = appendString(dst, n.Symlink)
	}
	if flags&flagUC != 0 {
		dst = appendString(dst, n.LeaseHolder)
		dst = binary.AppendVarint(dst, n.LeaseRenewed)
		dst = binary.AppendVarint(dst, n.Written)
	}
	if flags&flagQuota != 0 {
		dst = binary.AppendVarint(dst, n.NsQuota)
		dst = binary.AppendVarint(dst, n.SpaceQuota)
		dst = binary.AppendVarint(dst, n.NsUsed)
		dst = binary.AppendVarint(dst, n.SpaceUsed)
	}
	if flags&flagACL != 0 {
		dst = appendString(dst, n.ACL)
	}
	if flags&flagSubtree != 0 {
		dst = binary.AppendUvarint(dst, n.SubtreeOwner)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeInode decodes the row (key, value) into n, overwriting every field.
func DecodeInode(key, value []byte, n *Inode) error { return decodeInode(key, value, n, false) }

// DecodeInodeView is DecodeInode without a copy of the name: n.Name aliases
// key, so it is valid only as long as key's bytes are unchanged. It is for a
// scan that looks at each row and moves on (a listing copies the names it
// keeps into paths).
func DecodeInodeView(key, value []byte, n *Inode) error { return decodeInode(key, value, n, true) }

func decodeInode(key, value []byte, n *Inode, view bool) error {
	parent, name, ok := splitInodeKey(key)
	if !ok {
		return fmt.Errorf("%w: %s is not an inode key", ErrCorrupt, FormatKey(key))
	}
	s := unsafe.String(unsafe.SliceData(name), len(name))
	if !view {
		s = string(name)
	}
	return DecodeInodeValue(parent, s, value, n)
}

// DecodeInodeValue decodes the value of the row keyed (parent, name) into n,
// overwriting every field; the caller already has the key's parts.
func DecodeInodeValue(parent uint64, name string, value []byte, n *Inode) error {
	key := func() []byte { return InodeKey(parent, name) } // for errors only
	*n = Inode{Parent: parent, Name: name, NsQuota: -1, SpaceQuota: -1}
	d := decoder{b: value}
	if v := d.byte(); v != inodeFormatV1 {
		return fmt.Errorf("%w: %s: unknown inode format %d", ErrCorrupt, FormatKey(key()), v)
	}
	flags := d.byte()
	n.Blocks = flags&flagBlocks != 0
	n.XAttrs = flags&flagXAttrs != 0
	n.Type = meta.FileType(d.byte())
	n.ID = d.uvarint()
	n.Perm = meta.Perm(d.uvarint())
	n.Owner = d.name()
	n.Group = d.name()
	n.Mtime = d.varint()
	n.Atime = n.Mtime + d.varint()
	n.Length = d.varint()
	n.Replication = uint16(d.uvarint())
	n.BlockSize = d.varint()
	n.Children = d.varint()
	if flags&flagSymlink != 0 {
		if n.Symlink = d.string(); n.Symlink == "" && d.err == nil {
			d.err = errors.New("symlink flag without a target")
		}
	}
	if flags&flagUC != 0 {
		if n.LeaseHolder = d.string(); n.LeaseHolder == "" && d.err == nil {
			d.err = errors.New("under-construction flag without a lease holder")
		}
		n.LeaseRenewed = d.varint()
		n.Written = d.varint()
	} else {
		n.Written = n.Length
	}
	if flags&flagQuota != 0 {
		n.NsQuota = d.varint()
		n.SpaceQuota = d.varint()
		n.NsUsed = d.varint()
		n.SpaceUsed = d.varint()
		// Only the canonical form is accepted: the flag means some quota is set.
		if d.err == nil && (n.NsQuota < -1 || n.SpaceQuota < -1 || !n.HasQuota()) {
			d.err = fmt.Errorf("quota flag with quotas %d and %d", n.NsQuota, n.SpaceQuota)
		}
	}
	if flags&flagACL != 0 {
		if n.ACL = d.string(); d.err == nil {
			if n.ACL == "" {
				d.err = errEmptyACL
			} else if _, err := DecodeACL(n.ACL); err != nil {
				d.err = err
			}
		}
	}
	if flags&flagSubtree != 0 {
		if n.SubtreeOwner = d.uvarint(); n.SubtreeOwner == 0 && d.err == nil {
			d.err = errors.New("subtree flag without an owner")
		}
	}
	if d.err == nil && flags&^(flagUC|flagQuota|flagSymlink|flagBlocks|flagACL|flagXAttrs|flagSubtree) != 0 {
		d.err = fmt.Errorf("unknown flags %#x", flags)
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key()), d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrCorrupt, FormatKey(key()), len(d.b))
	}
	switch n.Type {
	case meta.TypeFile, meta.TypeDir, meta.TypeSymlink:
	default:
		return fmt.Errorf("%w: %s: bad inode type %d", ErrCorrupt, FormatKey(key()), n.Type)
	}
	if n.Perm&^meta.PermMask != 0 {
		return fmt.Errorf("%w: %s: bad permission %o", ErrCorrupt, FormatKey(key()), n.Perm)
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("value too short")

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// lengthPrefixed reads a uvarint length and that many bytes (nil after an
// error).
func (d *decoder) lengthPrefixed() []byte {
	l := d.uvarint()
	if d.err != nil {
		return nil
	}
	if l > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	b := d.b[:l]
	d.b = d.b[l:]
	return b
}

// name reads a string that is likely to repeat (a user or group name).
func (d *decoder) name() string {
	b := d.lengthPrefixed()
	if d.err != nil {
		return ""
	}
	return internBytes(b)
}

func (d *decoder) string() string { return string(d.lengthPrefixed()) }
