package store

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Replica is one row of the replica table: DataNode Node keeps a replica of
// block Block, as its block reports last said. A DataNode's reports are the
// only writers of its rows (a full report reconciles them with what is on
// its disk, an incremental one applies each change as it happens), so the
// table says where the bytes are, not where the NameNode wants them.
//
// Each replica has two rows with the same value: one keyed by block (who
// has block b: one scan, for readers and re-replication) and one keyed by
// DataNode (what does DataNode n have, in block order: one scan per batch
// of a full report, which merges it with the sorted report).
type Replica struct {
	Block    uint64 // from the key
	Node     uint64 // DataNode id, from the key
	GenStamp uint64
	Length   int64 // bytes: the whole replica once finalized, the synced prefix while being written
	State    ReplicaState
}

// ReplicaState is a replica's state as reported.
type ReplicaState uint8

const (
	// ReplicaFinalized: complete (HDFS FINALIZED).
	ReplicaFinalized ReplicaState = iota + 1
	// ReplicaBeingWritten: a writer may still add bytes (HDFS RBW).
	ReplicaBeingWritten
	// ReplicaCorrupt: the DataNode found a chunk that does not match its
	// checksum; readers must not be sent to it.
	ReplicaCorrupt
)

func (s ReplicaState) String() string {
	switch s {
	case ReplicaFinalized:
		return "finalized"
	case ReplicaBeingWritten:
		return "rbw"
	case ReplicaCorrupt:
		return "corrupt"
	}
	return fmt.Sprintf("replica-state(%d)", uint8(s))
}

// The rows of the replica tables:
//
//	'p' block:8 node:8 -> Replica value (format byte 1, state, genstamp, length)
//	'q' node:8 block:8 -> the same value

const replicaFormatV1 = 1

// ReplicaKey is the key of the row of block's replica on DataNode node.
func ReplicaKey(block, node uint64) []byte { return pairKey(tableReplica, block, node) }

// NodeReplicaKey is the key of the same replica in DataNode node's index.
func NodeReplicaKey(node, block uint64) []byte { return pairKey(tableNodeReplica, node, block) }

func pairKey(table byte, a, b uint64) []byte {
	k := make([]byte, 17)
	k[0] = table
	binary.BigEndian.PutUint64(k[1:], a)
	binary.BigEndian.PutUint64(k[9:], b)
	return k
}

// DecodeReplicaKey splits a replica key (by block); ok is false when k is
// not one.
func DecodeReplicaKey(k []byte) (block, node uint64, ok bool) {
	if len(k) != 17 || k[0] != tableReplica {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:]), true
}

// DecodeNodeReplicaKey splits a replica key of a DataNode's index; ok is
// false when k is not one.
func DecodeNodeReplicaKey(k []byte) (node, block uint64, ok bool) {
	if len(k) != 17 || k[0] != tableNodeReplica {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:]), true
}

// ReplicasOfBlockRange covers the replica rows of block.
func ReplicasOfBlockRange(block uint64) (start, end []byte) {
	return idRange(tableReplica, block)
}

// ReplicasOfNodeRange covers DataNode node's index rows whose block is at
// least from.
func ReplicasOfNodeRange(node, from uint64) (start, end []byte) {
	_, end = idRange(tableNodeReplica, node)
	return NodeReplicaKey(node, from), end
}

// AllReplicasRange covers the whole replica table (by block).
func AllReplicasRange() (start, end []byte) {
	return []byte{tableReplica}, []byte{tableReplica + 1}
}

// idRange covers the keys of table that begin with id.
func idRange(table byte, id uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = table
	binary.BigEndian.PutUint64(start[1:], id)
	if id == math.MaxUint64 {
		return start, []byte{table + 1}
	}
	end = make([]byte, 9)
	end[0] = table
	binary.BigEndian.PutUint64(end[1:], id+1)
	return start, end
}

// EncodeReplica appends the value of r's rows (Block and Node are in the
// keys) to dst.
func EncodeReplica(dst []byte, r *Replica) []byte {
	dst = append(dst, replicaFormatV1, byte(r.State))
	dst = binary.AppendUvarint(dst, r.GenStamp)
	return binary.AppendVarint(dst, r.Length)
}

// DecodeReplica decodes a replica row, of either table, into r.
func DecodeReplica(key, value []byte, r *Replica) error {
	block, node, ok := DecodeReplicaKey(key)
	if !ok {
		if node, block, ok = DecodeNodeReplicaKey(key); !ok {
			return fmt.Errorf("%w: %s is not a replica key", ErrCorrupt, FormatKey(key))
		}
	}
	d := decoder{b: value}
	if v := d.byte(); v != replicaFormatV1 && d.err == nil {
		d.err = fmt.Errorf("unknown replica format %d", v)
	}
	state := ReplicaState(d.byte())
	*r = Replica{Block: block, Node: node, State: state, GenStamp: d.uvarint(), Length: d.varint()}
	switch {
	case d.err != nil:
	case state < ReplicaFinalized || state > ReplicaCorrupt:
		d.err = fmt.Errorf("unknown replica state %d", state)
	case r.Length < 0:
		d.err = fmt.Errorf("length %d", r.Length)
	case len(d.b) != 0:
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	return nil
}
