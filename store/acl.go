package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/nimbus-fs/nimbus/meta"
)

// ACLs and extended attributes.
//
// An inode's ACL lives in its own row, behind the flag bit flagACL: the
// permission check reads every path component's row anyway, so an ACL there
// costs no extra read, a rename moves it with the one row it rewrites, and a
// delete drops it with the row. It is kept in HDFS's AclFeature form, the
// extended entries only (the owner, mask and other entries are the
// permission bits), encoded as a string so that Inode stays comparable and
// cheap to copy. An inode without an ACL pays one flag test.
//
// Extended attributes can be large (32 of up to 16 KiB each), too large for a
// row read on every path resolution, so each is a row of its own keyed by
// the inode id (a rename never touches them), found through the inode's
// flagXAttrs bit so that a delete of an inode without attributes reads
// nothing more:
//
//	'x' inodeID:8 name -> value     name with its namespace prefix ("user.k")

const tableXAttr = 'x'

// EncodeACL encodes extended ACL entries, sorted by meta.CompareAclEntries;
// nil or empty gives "" (no ACL). Each entry is one byte
// (scope<<5 | type<<3 | perm) and a length-prefixed name.
func EncodeACL(entries []meta.AclEntry) string {
	if len(entries) == 0 {
		return ""
	}
	var b []byte
	for _, e := range entries {
		b = append(b, byte(e.Scope)<<5|byte(e.Type)<<3|byte(e.Perm&7))
		b = appendString(b, e.Name)
	}
	return string(b)
}

// DecodeACL decodes an encoded ACL. The names alias s (which, a string,
// never changes), so decoding allocates only the slice.
func DecodeACL(s string) ([]meta.AclEntry, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]meta.AclEntry, 0, 4)
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for len(b) > 0 {
		h := b[0]
		l, n := binary.Uvarint(b[1:])
		// Only the shortest length encoding: one ACL, one encoding.
		if n <= 0 || l > uint64(len(b)-1-n) || n != len(binary.AppendUvarint(nil, l)) {
			return nil, fmt.Errorf("%w: malformed ACL entry", ErrCorrupt)
		}
		name := b[1+n : 1+n+int(l)]
		b = b[1+n+int(l):]
		e := meta.AclEntry{Scope: meta.AclScope(h >> 5), Type: meta.AclType(h >> 3 & 3), Perm: meta.Perm(h & 7),
			Name: unsafe.String(unsafe.SliceData(name), len(name))}
		if e.Scope > meta.AclDefault {
			return nil, fmt.Errorf("%w: ACL entry scope %d", ErrCorrupt, e.Scope)
		}
		if err := meta.ValidAclEntry(e); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if k := len(out); k > 0 && meta.CompareAclEntries(out[k-1], e) >= 0 {
			return nil, fmt.Errorf("%w: ACL entries out of order", ErrCorrupt)
		}
		// The stored form has no owner, mask or other access entries.
		if e.Scope == meta.AclAccess && (e.Type == meta.AclMask || e.Type == meta.AclOther || e.Type == meta.AclUser && e.Name == "") {
			return nil, fmt.Errorf("%w: ACL entry %s belongs to the permission bits", ErrCorrupt, e)
		}
		out = append(out, e)
	}
	if len(out) > 2*meta.MaxAclEntries {
		return nil, fmt.Errorf("%w: %d ACL entries", ErrCorrupt, len(out))
	}
	return out, nil
}

// XAttrKey is the key of inode id's extended attribute name.
func XAttrKey(id uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = tableXAttr
	binary.BigEndian.PutUint64(k[1:], id)
	return append(k, name...)
}

// DecodeXAttrKey splits an xattr key; ok is false when k is not one.
func DecodeXAttrKey(k []byte) (id uint64, name string, ok bool) {
	if len(k) < 10 || k[0] != tableXAttr {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), true
}

// XAttrsRange covers the extended attributes of inode id.
func XAttrsRange(id uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = tableXAttr
	binary.BigEndian.PutUint64(start[1:], id)
	if id == math.MaxUint64 {
		return start, []byte{tableXAttr + 1}
	}
	end = make([]byte, 9)
	end[0] = tableXAttr
	binary.BigEndian.PutUint64(end[1:], id+1)
	return start, end
}

// AllXAttrsRange covers the whole xattr table.
func AllXAttrsRange() (start, end []byte) {
	return []byte{tableXAttr}, []byte{tableXAttr + 1}
}

var errEmptyACL = errors.New("ACL flag without entries")
