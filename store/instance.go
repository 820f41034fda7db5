package store

import (
	"encoding/binary"
	"fmt"
)

// Instance is one row of the instance table: a namespace engine (a
// NameNode) serving from a store that several share. It is written when the
// engine starts, its Beat counted up by the engine's heartbeat, and deleted
// when the engine stops cleanly. Others judge an engine gone when its row is
// missing, or when its Beat has not moved for as long as they allow, by their
// own clocks (no two machines' clocks are compared): the subtree flags an
// engine leaves are then cleared, and its half-done recursive deletes
// finished, by whoever notices (namespace/members.go).
type Instance struct {
	Started int64  // Unix ms at the engine's start, for operators
	Beat    uint64 // counted up by every heartbeat
	Host    string // where it runs, for operators (host name and process id)
}

const instanceFormatV1 = 1

// InstanceKey is the key of the row of instance id.
func InstanceKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = tableInstance
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// DecodeInstanceKey returns the instance id of an instance key; ok is false
// when k is not one.
func DecodeInstanceKey(k []byte) (id uint64, ok bool) {
	if len(k) != 9 || k[0] != tableInstance {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// AllInstancesRange covers the whole instance table.
func AllInstancesRange() (start, end []byte) {
	return []byte{tableInstance}, []byte{tableInstance + 1}
}

// EncodeInstance appends the encoded value of in to dst.
func EncodeInstance(dst []byte, in *Instance) []byte {
	dst = append(dst, instanceFormatV1)
	dst = binary.AppendVarint(dst, in.Started)
	dst = binary.AppendUvarint(dst, in.Beat)
	return appendString(dst, in.Host)
}

// DecodeInstance decodes an instance row.
func DecodeInstance(key, value []byte, in *Instance) error {
	if _, ok := DecodeInstanceKey(key); !ok {
		return fmt.Errorf("%w: %s is not an instance key", ErrCorrupt, FormatKey(key))
	}
	d := decoder{b: value}
	if v := d.byte(); v != instanceFormatV1 && d.err == nil {
		d.err = fmt.Errorf("unknown instance format %d", v)
	}
	in.Started = d.varint()
	in.Beat = d.uvarint()
	in.Host = d.string()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	return nil
}
