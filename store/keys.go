package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// The key schema. Every row of every table lives in one ordered key space; the
// first byte names the table, and integers are big-endian so that byte order is
// numeric order.
//
//	'i' parentID:8 name      -> Inode (inode.go)      one row per file, directory or symlink
//	'd' inodeID:8 offset:8   -> bytes                 inline file content, in chunks
//	'l' inodeID:8            -> Lease (lease.go)      one row per file under construction
//	'b' inodeID:8 index:4    -> Block (block.go)      the blocks of a file kept in block storage
//	'x' inodeID:8 name       -> bytes (acl.go)        extended attributes, name with its namespace prefix
//	's' inodeID:8            -> SubtreeOp (subtree.go) a subtree operation under way on that directory
//	'n' instanceID:8         -> Instance (instance.go) an engine serving from a shared store
//	'h' holder               -> Unix ms (holder.go)    a lease holder's last renewal, on a shared store
//	'r' requestID:8 client   -> RequestRecord (request.go) a write a client sent with a request id, for
//	                                                  a bounded time: its resubmission is answered from it
//	'k' datanodeID:8         -> DataNode (datanode.go) a DataNode as its heartbeats publish it
//	'u' uuid                 -> datanodeID:8          the id a DataNode UUID was given when it first registered
//	'p' blockID:8 datanodeID:8 -> Replica (replica.go) a replica as its DataNode's block reports say
//	'q' datanodeID:8 blockID:8 -> Replica              the same row indexed by DataNode, for full reports
//	'c' name                 -> uint64 (8, big-endian) id counters (AllocateIDs)
//	'm' name                 -> bytes                 store-wide metadata (format version, cluster
//	                                                  secret and identity, ...)
//
// Inodes are keyed (parent id, name) and so partitioned by parent id, as in
// HopsFS: a directory's entries are one contiguous range, listed by one scan,
// and a rename rewrites exactly one row. The root is the row (0, ""). Inode ids
// are never reused. Content chunk rows are keyed by inode id (not path), so a
// rename never touches them; chunk k of a file holds bytes [k*C, (k+1)*C) for
// the engine's chunk size C, so any offset is found without a scan. Lease rows
// let the engine find every file under construction after a restart. An inode's
// ACL is part of its row (acl.go says why); its extended attributes, keyed by
// inode id like content, never move on a rename.
//
// DataNode and replica rows are written by the DataNodes themselves (their
// registration, heartbeats and block reports) and read by every NameNode;
// docs/BLOCKS.md, "DataNodes". A replica is keyed by block first, so the
// holders of a block are one scan, and indexed by DataNode, so a full
// report is reconciled with one scan per batch in block order.
//
// Later tables (leases by holder, ...) take the next free prefix letters.
const (
	tableInode    = 'i'
	tableData     = 'd'
	tableLease    = 'l'
	tableBlock    = 'b'
	tableSubtree  = 's'
	tableInstance = 'n'
	tableHolder   = 'h'
	tableRequest  = 'r'
	tableCounter  = 'c'
	tableMeta     = 'm'

	tableDataNode     = 'k'
	tableDataNodeUUID = 'u'
	tableReplica      = 'p'
	tableNodeReplica  = 'q'
)

// RootID is the inode id of "/". Its row is InodeKey(0, "").
const RootID uint64 = 1

// RootParentID is the parent id under which the root row is stored.
const RootParentID uint64 = 0

// InodeKey is the key of the inode named name in directory parent.
func InodeKey(parent uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = tableInode
	binary.BigEndian.PutUint64(k[1:], parent)
	return append(k, name...)
}

// AppendInodeKey appends the key of (parent, name) to dst.
func AppendInodeKey(dst []byte, parent uint64, name string) []byte {
	dst = append(dst, tableInode)
	dst = binary.BigEndian.AppendUint64(dst, parent)
	return append(dst, name...)
}

// DecodeInodeKey splits an inode key; ok is false when k is not one.
func DecodeInodeKey(k []byte) (parent uint64, name string, ok bool) {
	p, n, ok := splitInodeKey(k)
	return p, string(n), ok
}

// splitInodeKey is DecodeInodeKey with the name left in k.
func splitInodeKey(k []byte) (parent uint64, name []byte, ok bool) {
	if len(k) < 9 || k[0] != tableInode {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(k[1:9]), k[9:], true
}

// ChildrenRange returns [start, end) covering every entry of directory dir whose
// name sorts after startAfter ("" means from the first).
func ChildrenRange(dir uint64, startAfter string) (start, end []byte) {
	start = InodeKey(dir, startAfter)
	if startAfter != "" {
		start = append(start, 0) // the smallest key after startAfter
	}
	if dir == math.MaxUint64 {
		return start, []byte{tableInode + 1}
	}
	end = make([]byte, 9)
	end[0] = tableInode
	binary.BigEndian.PutUint64(end[1:], dir+1)
	return start, end
}

// PartitionID names a partition of the key space: a table byte and the
// 8-byte id that leads that table's keys (an inode row's parent, a content
// chunk's or a block's file). A partition's rows are one contiguous range
// (a directory's entries, a file's chunks or blocks), read by one scan, as
// an NDB partition-pruned index scan reads them in HopsFS.
type PartitionID [9]byte

// PartitionOf returns the partition of key k; ok is false for keys of the
// tables not partitioned by id (counters, metadata, leases).
func PartitionOf(k []byte) (p PartitionID, ok bool) {
	if len(k) < len(p) {
		return p, false
	}
	switch k[0] {
	case tableInode, tableData, tableBlock:
		copy(p[:], k)
		return p, true
	}
	return p, false
}

// Covers reports whether every key in [start, end) lies in partition p:
// start has p as its prefix and end is at most the partition's end.
func (p PartitionID) Covers(start, end []byte) bool {
	if len(start) < len(p) || [9]byte(start[:9]) != p {
		return false
	}
	if len(end) == 0 {
		return false // no upper bound
	}
	if len(end) >= len(p) && [9]byte(end[:9]) == p {
		return true // ends inside the partition
	}
	var buf PartitionID
	return bytes.Compare(end, p.end(&buf)) <= 0
}

// Whole reports whether [start, end) holds every key of partition p: start
// is the partition's smallest key and end lies past its last. (With Covers,
// the range is exactly the partition.)
func (p PartitionID) Whole(start, end []byte) bool {
	if len(start) != len(p) || [9]byte(start) != p || len(end) == 0 {
		return false
	}
	return !(len(end) >= len(p) && [9]byte(end[:9]) == p) && bytes.Compare(end, start) > 0
}

// end returns the smallest key after every key of partition p, built in buf
// (no allocation on the scan path).
func (p PartitionID) end(buf *PartitionID) []byte {
	id := binary.BigEndian.Uint64(p[1:])
	if id == math.MaxUint64 {
		buf[0] = p[0] + 1
		return buf[:1]
	}
	buf[0] = p[0]
	binary.BigEndian.PutUint64(buf[1:], id+1)
	return buf[:]
}

// AllInodesRange covers the whole inode table.
func AllInodesRange() (start, end []byte) {
	return []byte{tableInode}, []byte{tableInode + 1}
}

// DataKey is the key of the content chunk of inode id starting at offset.
func DataKey(id uint64, offset int64) []byte {
	k := make([]byte, 17)
	k[0] = tableData
	binary.BigEndian.PutUint64(k[1:], id)
	binary.BigEndian.PutUint64(k[9:], uint64(offset))
	return k
}

// DecodeDataKey splits a data key; ok is false when k is not one.
func DecodeDataKey(k []byte) (id uint64, offset int64, ok bool) {
	if len(k) != 17 || k[0] != tableData {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), int64(binary.BigEndian.Uint64(k[9:])), true
}

// DataRange covers the chunks of inode id at offsets >= from.
func DataRange(id uint64, from int64) (start, end []byte) {
	start = DataKey(id, from)
	if id == math.MaxUint64 {
		return start, []byte{tableData + 1}
	}
	end = make([]byte, 9)
	end[0] = tableData
	binary.BigEndian.PutUint64(end[1:], id+1)
	return start, end
}

// AllDataRange covers the whole content table.
func AllDataRange() (start, end []byte) {
	return []byte{tableData}, []byte{tableData + 1}
}

// LeaseKey is the key of the lease row of file id.
func LeaseKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = tableLease
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// DecodeLeaseKey returns the file id of a lease key; ok is false when k is not one.
func DecodeLeaseKey(k []byte) (id uint64, ok bool) {
	if len(k) != 9 || k[0] != tableLease {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// AllLeasesRange covers the whole lease table.
func AllLeasesRange() (start, end []byte) {
	return []byte{tableLease}, []byte{tableLease + 1}
}

// BlockKey is the key of block number index of file id.
func BlockKey(id uint64, index uint32) []byte {
	k := make([]byte, 13)
	k[0] = tableBlock
	binary.BigEndian.PutUint64(k[1:], id)
	binary.BigEndian.PutUint32(k[9:], index)
	return k
}

// DecodeBlockKey splits a block key; ok is false when k is not one.
func DecodeBlockKey(k []byte) (id uint64, index uint32, ok bool) {
	if len(k) != 13 || k[0] != tableBlock {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint32(k[9:]), true
}

// BlocksRange covers the block rows of file id.
func BlocksRange(id uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = tableBlock
	binary.BigEndian.PutUint64(start[1:], id)
	if id == math.MaxUint64 {
		return start, []byte{tableBlock + 1}
	}
	end = make([]byte, 9)
	end[0] = tableBlock
	binary.BigEndian.PutUint64(end[1:], id+1)
	return start, end
}

// AllBlocksRange covers the whole block table.
func AllBlocksRange() (start, end []byte) {
	return []byte{tableBlock}, []byte{tableBlock + 1}
}

// CounterKey is the key of the id counter name.
func CounterKey(name string) []byte { return append([]byte{tableCounter}, name...) }

// MetaKey is the key of store-wide metadata entry name.
func MetaKey(name string) []byte { return append([]byte{tableMeta}, name...) }

// Counter names.
const (
	CounterInode = "inode"
	CounterBlock = "block"
)

// FormatKey returns a readable form of a key, for errors and fsck reports.
func FormatKey(k []byte) string {
	if p, n, ok := DecodeInodeKey(k); ok {
		return fmt.Sprintf("inode(%d,%q)", p, n)
	}
	if id, off, ok := DecodeDataKey(k); ok {
		return fmt.Sprintf("data(%d@%d)", id, off)
	}
	if id, ok := DecodeSubtreeOpKey(k); ok {
		return fmt.Sprintf("subtree(%d)", id)
	}
	if id, name, ok := DecodeXAttrKey(k); ok {
		return fmt.Sprintf("xattr(%d,%q)", id, name)
	}
	if id, ok := DecodeDataNodeKey(k); ok {
		return fmt.Sprintf("datanode(%d)", id)
	}
	if b, n, ok := DecodeReplicaKey(k); ok {
		return fmt.Sprintf("replica(blk_%d,dn %d)", b, n)
	}
	if n, b, ok := DecodeNodeReplicaKey(k); ok {
		return fmt.Sprintf("replica-of-node(dn %d,blk_%d)", n, b)
	}
	if id, client, ok := DecodeRequestKey(k); ok {
		return fmt.Sprintf("request(%s,%#x)", client, id)
	}
	return fmt.Sprintf("%q", k)
}
