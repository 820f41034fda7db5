package store

import (
	"encoding/binary"
	"fmt"
)

// DataNode is one row of the DataNode table: a `nimbus datanode` process
// that keeps block replicas, as its own heartbeats publish it. The DataNode
// writes the row when it registers and on every heartbeat (Beat counted
// up by one each time); NameNodes read it. Liveness is judged as for the
// instance table: by the reader's own clock, from how long Beat has not
// moved (no two machines' clocks are compared). Admin is the one field a
// DataNode does not decide: an operator sets it through a NameNode, and a
// heartbeat keeps what it finds.
type DataNode struct {
	ID        uint64 // from the key: allocated from CounterDataNode at first registration
	UUID      string // the DataNode's identity, kept in its storage directory (HDFS's datanodeUuid)
	StorageID string // its storage's identity, kept in its storage directory (DS-...)
	Host      string // host name, for operators and for a reader's same-host test
	DataAddr  string // host:port of its data transfer (DTP) port
	HTTPAddr  string // host:port of its HTTP port (/metrics, /healthz)
	Zone      string // availability zone ("" when not configured)
	Version   string // software version, for operators

	Capacity  int64  // bytes usable for blocks (the volume's size less the reserve)
	Used      int64  // bytes its replicas take
	Remaining int64  // bytes still free for blocks (free space less the reserve, at least 0)
	Transfers uint32 // data transfers in flight (HDFS's xceiver count)
	Replicas  int64  // replicas it holds, as of its last full report or count of its directory
	Admin     AdminState
	Full      bool // free space is below the reserve: no new replicas
	Failed    bool // its storage directory failed a check: no new replicas, reads may fail

	Beat    uint64 // counted up by every heartbeat and registration
	Started int64  // Unix ms at the process's start, by its clock (for operators)
	Updated int64  // Unix ms of the last heartbeat, by its clock (for operators only)
}

// AdminState is what an operator asked of a DataNode.
type AdminState uint8

const (
	// AdminNormal: in service.
	AdminNormal AdminState = iota
	// AdminDecommissioning: its replicas are being copied elsewhere; it
	// serves reads and receives no new replicas.
	AdminDecommissioning
	// AdminDecommissioned: every replica it held has enough copies
	// elsewhere; it may be stopped.
	AdminDecommissioned
)

func (a AdminState) String() string {
	switch a {
	case AdminNormal:
		return "normal"
	case AdminDecommissioning:
		return "decommissioning"
	case AdminDecommissioned:
		return "decommissioned"
	}
	return fmt.Sprintf("admin(%d)", uint8(a))
}

// The rows of the DataNode tables:
//
//	'k' id:8    -> DataNode (format byte 2, then the fields; format 1 rows lack Replicas)
//	'u' uuid    -> id:8     the id a DataNode UUID was given at its first registration

const (
	dataNodeFormatV1 = 1 // without Replicas (decoded as 0)
	dataNodeFormatV2 = 2 // Replicas after Updated

	dataNodeFlagFull   = 1 << 0
	dataNodeFlagFailed = 1 << 1
	dataNodeFlagsKnown = dataNodeFlagFull | dataNodeFlagFailed

	// MaxDataNodeString bounds every string of a DataNode row (UUID,
	// addresses, zone, version), so that a row is small whatever a
	// process sends.
	MaxDataNodeString = 255
)

// CounterDataNode is the counter DataNode ids are allocated from.
const CounterDataNode = "datanode"

// DataNodeKey is the key of DataNode id's row.
func DataNodeKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = tableDataNode
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// DecodeDataNodeKey returns the id of a DataNode key; ok is false when k
// is not one.
func DecodeDataNodeKey(k []byte) (id uint64, ok bool) {
	if len(k) != 9 || k[0] != tableDataNode {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// AllDataNodesRange covers the whole DataNode table.
func AllDataNodesRange() (start, end []byte) {
	return []byte{tableDataNode}, []byte{tableDataNode + 1}
}

// DataNodeUUIDKey is the key of the row that maps a DataNode UUID to its id.
func DataNodeUUIDKey(uuid string) []byte {
	k := make([]byte, 1, 1+len(uuid))
	k[0] = tableDataNodeUUID
	return append(k, uuid...)
}

// DecodeDataNodeUUIDKey returns the UUID of a UUID key.
func DecodeDataNodeUUIDKey(k []byte) (string, bool) {
	if len(k) < 2 || k[0] != tableDataNodeUUID {
		return "", false
	}
	return string(k[1:]), true
}

// EncodeDataNodeID is the value of a UUID row.
func EncodeDataNodeID(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// DecodeDataNodeID decodes a UUID row's value.
func DecodeDataNodeID(key, v []byte) (uint64, error) {
	if _, ok := DecodeDataNodeUUIDKey(key); !ok {
		return 0, fmt.Errorf("%w: %s is not a DataNode UUID key", ErrCorrupt, FormatKey(key))
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s: DataNode id of %d bytes", ErrCorrupt, FormatKey(key), len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// EncodeDataNode appends the value of dn's row (ID is in the key) to dst.
func EncodeDataNode(dst []byte, dn *DataNode) []byte {
	dst = append(dst, dataNodeFormatV2)
	for _, s := range []string{dn.UUID, dn.StorageID, dn.Host, dn.DataAddr, dn.HTTPAddr, dn.Zone, dn.Version} {
		dst = appendString(dst, s)
	}
	dst = binary.AppendVarint(dst, dn.Capacity)
	dst = binary.AppendVarint(dst, dn.Used)
	dst = binary.AppendVarint(dst, dn.Remaining)
	dst = binary.AppendUvarint(dst, uint64(dn.Transfers))
	var flags byte
	if dn.Full {
		flags |= dataNodeFlagFull
	}
	if dn.Failed {
		flags |= dataNodeFlagFailed
	}
	dst = append(dst, byte(dn.Admin), flags)
	dst = binary.AppendUvarint(dst, dn.Beat)
	dst = binary.AppendVarint(dst, dn.Started)
	dst = binary.AppendVarint(dst, dn.Updated)
	return binary.AppendUvarint(dst, uint64(max(dn.Replicas, 0)))
}

// DecodeDataNode decodes a DataNode row into dn, overwriting every field.
func DecodeDataNode(key, value []byte, dn *DataNode) error {
	id, ok := DecodeDataNodeKey(key)
	if !ok {
		return fmt.Errorf("%w: %s is not a DataNode key", ErrCorrupt, FormatKey(key))
	}
	d := decoder{b: value}
	format := d.byte()
	if format != dataNodeFormatV1 && format != dataNodeFormatV2 && d.err == nil {
		d.err = fmt.Errorf("unknown DataNode format %d", format)
	}
	*dn = DataNode{ID: id}
	for _, s := range []*string{&dn.UUID, &dn.StorageID, &dn.Host, &dn.DataAddr, &dn.HTTPAddr, &dn.Zone, &dn.Version} {
		*s = d.string()
		if d.err == nil && len(*s) > MaxDataNodeString {
			d.err = fmt.Errorf("a string of %d bytes", len(*s))
		}
	}
	dn.Capacity = d.varint()
	dn.Used = d.varint()
	dn.Remaining = d.varint()
	tr := d.uvarint()
	admin, flags := d.byte(), d.byte()
	dn.Beat = d.uvarint()
	dn.Started = d.varint()
	dn.Updated = d.varint()
	var reps uint64
	if format == dataNodeFormatV2 {
		reps = d.uvarint()
	}
	switch {
	case d.err != nil:
	case tr > 1<<32-1:
		d.err = fmt.Errorf("transfers %d", tr)
	case admin > byte(AdminDecommissioned):
		d.err = fmt.Errorf("unknown admin state %d", admin)
	case flags&^dataNodeFlagsKnown != 0:
		d.err = fmt.Errorf("unknown flags %#x", flags)
	case dn.Capacity < 0 || dn.Used < 0 || dn.Remaining < 0:
		d.err = fmt.Errorf("negative space (%d, %d, %d)", dn.Capacity, dn.Used, dn.Remaining)
	case reps > 1<<62:
		d.err = fmt.Errorf("replicas %d", reps)
	case len(d.b) != 0:
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	dn.Replicas = int64(reps)
	dn.Transfers = uint32(tr)
	dn.Admin = AdminState(admin)
	dn.Full = flags&dataNodeFlagFull != 0
	dn.Failed = flags&dataNodeFlagFailed != 0
	return nil
}
