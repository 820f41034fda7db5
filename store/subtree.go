package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SubtreeOp is one row of the subtree operation table: a subtree operation
// (HopsFS's protocol) under way on the directory whose id keys the
// row, whose row carries the matching flag (Inode.SubtreeOwner). The row is
// written with the flag and deleted with it, in the same transactions; after
// a crash it tells the engine which flags to clear (or which operations to
// resume), without a walk of the namespace.
type SubtreeOp struct {
	Owner  uint64 // the instance id of the engine running it
	Kind   uint8  // the operation (namespace/subtree's Kind)
	Parent uint64 // the directory's row key at the start: (Parent, Name)
	Name   string
	Path   string // the directory's path at the start, for messages

	// A recursive delete leaves the directory's row, and the usage of the
	// quotas above it, as they were until its last transaction, so that
	// nothing outside sees it half done; what its batches removed so far
	// is kept here: inodes and space (not yet charged above), and the
	// directory's own entries (not yet taken from its entry count).
	PendingInodes  int64
	PendingSpace   int64
	PendingEntries int64

	// A recursive chmod or chown keeps what it sets, so that the next start
	// can finish it: the mode bits, the owner and the group (empty:
	// unchanged). Written only when one is set (format 2).
	SetPerm  uint32
	SetUser  string
	SetGroup string

	// Started is when the operation began (Unix nanoseconds, its starter's
	// clock): with Owner and the directory's id, its age (subtree.Age), by
	// which two operations whose work meets the other's flag decide which
	// gives way, on every NameNode alike. Format 3; 0 in older rows.
	Started int64
	// ReqClient and ReqID name the client's request the operation serves
	// (meta.Request; ReqID 0: none), so that whoever finishes a recursive
	// delete, chmod or chown left half done (the next start, or another
	// NameNode's reaper) writes its request record with its last
	// transaction, and the client's resubmission is answered from it
	// (namespace/once.go). Format 4; none in older rows.
	ReqClient string
	ReqID     uint64
	// Checked: a recursive delete's permission check over its whole
	// subtree (HDFS's sub-access check) passed, so that whoever finds it
	// left half done may finish it. One left before that (its NameNode
	// died while checking) is cancelled instead: finishing it would
	// delete what the caller may not have been allowed to. Format 5;
	// false in older rows.
	Checked bool
}

const (
	subtreeFormatV1 = 1
	subtreeFormatV2 = 2 // V1 and SetPerm, SetUser, SetGroup
	subtreeFormatV3 = 3 // V2 and Started
	subtreeFormatV4 = 4 // V3 and ReqClient, ReqID
	subtreeFormatV5 = 5 // V4 (ReqClient, ReqID always) and Checked
)

// SubtreeOpKey is the key of the subtree operation row of directory id.
func SubtreeOpKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = tableSubtree
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// DecodeSubtreeOpKey returns the directory id of a subtree operation key; ok
// is false when k is not one.
func DecodeSubtreeOpKey(k []byte) (id uint64, ok bool) {
	if len(k) != 9 || k[0] != tableSubtree {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// AllSubtreeOpsRange covers the whole subtree operation table.
func AllSubtreeOpsRange() (start, end []byte) {
	return []byte{tableSubtree}, []byte{tableSubtree + 1}
}

// EncodeSubtreeOp appends the encoded value of op to dst.
func EncodeSubtreeOp(dst []byte, op *SubtreeOp) []byte {
	v := byte(subtreeFormatV3)
	switch {
	case op.Checked:
		v = subtreeFormatV5
	case op.ReqID != 0:
		v = subtreeFormatV4
	}
	dst = append(dst, v, op.Kind)
	dst = binary.AppendUvarint(dst, op.Owner)
	dst = binary.AppendUvarint(dst, op.Parent)
	dst = appendString(dst, op.Name)
	dst = appendString(dst, op.Path)
	dst = binary.AppendVarint(dst, op.PendingInodes)
	dst = binary.AppendVarint(dst, op.PendingSpace)
	dst = binary.AppendVarint(dst, op.PendingEntries)
	dst = binary.AppendUvarint(dst, uint64(op.SetPerm))
	dst = appendString(dst, op.SetUser)
	dst = appendString(dst, op.SetGroup)
	dst = binary.AppendVarint(dst, op.Started)
	if v >= subtreeFormatV4 {
		dst = appendString(dst, op.ReqClient)
		dst = binary.AppendUvarint(dst, op.ReqID)
	}
	if v >= subtreeFormatV5 {
		dst = append(dst, 1)
	}
	return dst
}

// DecodeSubtreeOp decodes a subtree operation row.
func DecodeSubtreeOp(key, value []byte, op *SubtreeOp) error {
	if _, ok := DecodeSubtreeOpKey(key); !ok {
		return fmt.Errorf("%w: %s is not a subtree operation key", ErrCorrupt, FormatKey(key))
	}
	d := decoder{b: value}
	v := d.byte()
	if (v < subtreeFormatV1 || v > subtreeFormatV5) && d.err == nil {
		d.err = fmt.Errorf("unknown subtree operation format %d", v)
	}
	op.Kind = d.byte()
	op.Owner = d.uvarint()
	op.Parent = d.uvarint()
	op.Name = d.string()
	op.Path = d.string()
	op.PendingInodes = d.varint()
	op.PendingSpace = d.varint()
	op.PendingEntries = d.varint()
	op.SetPerm, op.SetUser, op.SetGroup, op.Started = 0, "", "", 0
	op.ReqClient, op.ReqID, op.Checked = "", 0, false
	if v >= subtreeFormatV2 {
		op.SetPerm = uint32(d.uvarint())
		op.SetUser = d.string()
		op.SetGroup = d.string()
	}
	if v >= subtreeFormatV3 {
		op.Started = d.varint()
	}
	if v >= subtreeFormatV4 {
		op.ReqClient = d.string()
		op.ReqID = d.uvarint()
	}
	if v >= subtreeFormatV5 {
		op.Checked = d.byte() == 1
	}
	if d.err == nil && op.Owner == 0 {
		d.err = errors.New("no owner")
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	return nil
}
