package store

import (
	"encoding/binary"
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
)

// Request records: 'r' requestID:8 client -> RequestRecord. One row per write
// a client sent with a request id (meta.Request), written by the engine in
// the transaction that applied the write, so that the row exists exactly
// when the write's effect does. A write resubmitted after a lost reply, to
// any NameNode on the store, finds the row and is answered from it instead
// of being applied again (namespace/once.go). Rows are kept for a bounded
// time (RequestRecord.At says when the write committed) and deleted in
// batches by a sweep.
//
// The id leads the key and the client's name follows: ids carry 24 random
// bits above a sequence (docs/RPC.md), so they spread the rows over the
// table, and the name makes the key unique when two clients' random bits
// coincide. The key is not ordered by time, so the sweep reads the whole
// table; it holds only the last few minutes of writes.

// RowCacheable reports whether a store's row cache gains by keeping the
// row of key k. A request record is not worth it: it is written once per
// write, and read again only if the client resubmits, so each one would
// evict a row that path resolution reads on every operation.
func RowCacheable(k []byte) bool { return len(k) == 0 || k[0] != tableRequest }

// RequestRecord is the record of one applied write.
type RequestRecord struct {
	At int64  // Unix ms at which the write committed, by the writer's clock
	Op string // the operation's name ("create", "rename", ...): a resubmission must name the same
	// Status is the FileStatus the write answered with (create, append,
	// complete), or nil when it answers only success. The engine leaves
	// its Path empty when it is the operation's path.
	Status *meta.FileStatus
	// Err is the error the write failed with, nil when it succeeded: a
	// failure is recorded too (namespace/once.go), so that a late copy of
	// the write answers it rather than succeeding after the client was
	// told it failed. Its Op is the record's Op, and its Path "" when it
	// is the operation's. Status is nil then.
	Err *meta.OpError
}

const requestFormatV1 = 1

// RequestKey is the key of the record of client's request id.
func RequestKey(id uint64, client string) []byte {
	return AppendRequestKey(make([]byte, 0, 9+len(client)), id, client)
}

// AppendRequestKey appends RequestKey(id, client) to dst.
func AppendRequestKey(dst []byte, id uint64, client string) []byte {
	dst = append(dst, tableRequest)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return append(dst, client...)
}

// DecodeRequestKey splits a request record's key; ok is false when k is not one.
func DecodeRequestKey(k []byte) (id uint64, client string, ok bool) {
	if len(k) < 9 || k[0] != tableRequest {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), true
}

// AllRequestsRange covers the request record table.
func AllRequestsRange() (start, end []byte) {
	return []byte{tableRequest}, []byte{tableRequest + 1}
}

// EncodeRequest appends the encoded value of r to dst.
func EncodeRequest(dst []byte, r *RequestRecord) []byte {
	if dst == nil { // one allocation: a record is written on every write
		n := 16 + len(r.Op)
		if s := r.Status; s != nil {
			n += 80 + len(s.Path) + len(s.Owner) + len(s.Group) + len(s.Symlink)
		}
		dst = make([]byte, 0, n)
	}
	dst = append(dst, requestFormatV1)
	dst = binary.AppendVarint(dst, r.At)
	dst = appendString(dst, r.Op)
	if e := r.Err; e != nil {
		dst = append(dst, 2)
		dst = binary.AppendUvarint(dst, uint64(meta.KindOf(e.Err)))
		dst = appendString(dst, e.Path)
		return appendString(dst, e.Detail)
	}
	if r.Status == nil {
		return append(dst, 0)
	}
	s := r.Status
	dst = append(dst, 1)
	dst = appendString(dst, s.Path)
	dst = binary.AppendUvarint(dst, s.FileID)
	dst = append(dst, byte(s.Type))
	dst = binary.AppendUvarint(dst, uint64(s.Perm))
	dst = appendString(dst, s.Owner)
	dst = appendString(dst, s.Group)
	dst = binary.AppendVarint(dst, s.Length)
	dst = binary.AppendUvarint(dst, uint64(s.Replication))
	dst = binary.AppendVarint(dst, s.BlockSize)
	dst = binary.AppendVarint(dst, s.Mtime)
	dst = binary.AppendVarint(dst, s.Atime)
	dst = binary.AppendVarint(dst, s.ChildrenNum)
	dst = appendString(dst, s.Symlink)
	var flags byte
	if s.UnderConstruction {
		flags |= 1
	}
	if s.AclBit {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, s.NsQuota)
	return binary.AppendVarint(dst, s.SpaceQuota)
}

// DecodeRequestAt decodes only the commit time of a request record: what
// the sweep needs.
func DecodeRequestAt(key, value []byte) (int64, error) {
	d := decoder{b: value}
	if v := d.byte(); v != requestFormatV1 && d.err == nil {
		d.err = fmt.Errorf("unknown request record format %d", v)
	}
	at := d.varint()
	if d.err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	return at, nil
}

// DecodeRequest decodes a request record.
func DecodeRequest(key, value []byte, r *RequestRecord) error {
	d := decoder{b: value}
	if v := d.byte(); v != requestFormatV1 && d.err == nil {
		d.err = fmt.Errorf("unknown request record format %d", v)
	}
	r.At = d.varint()
	r.Op = d.string()
	r.Status, r.Err = nil, nil
	switch has := d.byte(); {
	case d.err != nil:
	case has == 2:
		k := meta.Kind(d.uvarint())
		e := &meta.OpError{Op: r.Op, Path: d.string(), Detail: d.string()}
		if e.Err = meta.Sentinel(k); e.Err == nil && d.err == nil {
			d.err = fmt.Errorf("unknown error kind %d", k)
		}
		r.Err = e
	case has == 1:
		s := &meta.FileStatus{}
		s.Path = d.string()
		s.FileID = d.uvarint()
		s.Type = meta.FileType(d.byte())
		s.Perm = meta.Perm(d.uvarint())
		s.Owner = d.string()
		s.Group = d.string()
		s.Length = d.varint()
		s.Replication = uint16(d.uvarint())
		s.BlockSize = d.varint()
		s.Mtime = d.varint()
		s.Atime = d.varint()
		s.ChildrenNum = d.varint()
		s.Symlink = d.string()
		flags := d.byte()
		s.UnderConstruction = flags&1 != 0
		s.AclBit = flags&2 != 0
		s.NsQuota = d.varint()
		s.SpaceQuota = d.varint()
		r.Status = s
	case has != 0:
		d.err = fmt.Errorf("bad status flag %d", has)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, FormatKey(key), d.err)
	}
	return nil
}
