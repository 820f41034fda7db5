package store

import (
	"encoding/binary"
	"fmt"
)

// Lease is a row of the lease table: file id (in the key) -> where the file's
// inode row is and who holds the lease. It is written with the inode in the
// same transaction whenever a file goes under construction or is renamed
// while under construction, and deleted when the file is closed or deleted.
type Lease struct {
	ID     uint64 // the file's inode id (from the key)
	Parent uint64 // the inode row's key: (Parent, Name)
	Name   string
	Holder string
	// Path is the file's path, kept up to date by renames of the file and
	// of its ancestors (as HDFS's LeaseManager does), so that a writer whose
	// file moved while open still finds it.
	Path string
}

// EncodeLease appends the value of l (without its key) to dst.
func EncodeLease(dst []byte, l *Lease) []byte {
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, l.Parent)
	dst = appendString(dst, l.Name)
	dst = appendString(dst, l.Holder)
	return appendString(dst, l.Path)
}

// DecodeLease decodes a lease row.
func DecodeLease(key, value []byte, l *Lease) error {
	id, ok := DecodeLeaseKey(key)
	if !ok {
		return fmt.Errorf("%w: %s is not a lease key", ErrCorrupt, FormatKey(key))
	}
	d := decoder{b: value}
	if v := d.byte(); v != 1 {
		return fmt.Errorf("%w: %s: unknown lease format %d", ErrCorrupt, FormatKey(key), v)
	}
	*l = Lease{ID: id, Parent: d.uvarint(), Name: d.string(), Holder: d.string(), Path: d.string()}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: %s: malformed lease", ErrCorrupt, FormatKey(key))
	}
	return nil
}
