package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestACLRoundTrip(t *testing.T) {
	acl := []meta.AclEntry{
		{Type: meta.AclUser, Name: "bob", Perm: 5}, {Type: meta.AclGroup, Perm: 4}, {Type: meta.AclGroup, Name: "g", Perm: 7},
		{Scope: meta.AclDefault, Type: meta.AclUser, Perm: 7}, {Scope: meta.AclDefault, Type: meta.AclMask, Perm: 1},
	}
	got, err := DecodeACL(EncodeACL(acl))
	if err != nil || !slices.Equal(got, acl) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if EncodeACL(nil) != "" {
		t.Fatal("no entries must encode as no ACL")
	}
	// Out of order, duplicates, entries of the permission bits, names on a
	// mask: all corrupt.
	for _, bad := range [][]meta.AclEntry{
		{acl[1], acl[0]},
		{acl[0], acl[0]},
		{{Type: meta.AclUser, Perm: 7}},
		{{Type: meta.AclMask, Perm: 7}},
		{{Scope: meta.AclDefault, Type: meta.AclOther, Name: "x"}},
	} {
		if _, err := DecodeACL(EncodeACL(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v decoded: %v", bad, err)
		}
	}
	// An inode row whose ACL is corrupt is corrupt.
	n := Inode{Parent: 1, Name: "n", ID: 2, Type: meta.TypeFile, ACL: EncodeACL([]meta.AclEntry{acl[1], acl[0]}), NsQuota: -1, SpaceQuota: -1}
	var out Inode
	if err := DecodeInode(n.Key(), EncodeInode(nil, &n), &out); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("inode with a corrupt ACL: %v", err)
	}
}

func TestXAttrKeys(t *testing.T) {
	k := XAttrKey(7, "user.k")
	id, name, ok := DecodeXAttrKey(k)
	if !ok || id != 7 || name != "user.k" {
		t.Fatalf("DecodeXAttrKey = %d %q %v", id, name, ok)
	}
	start, end := XAttrsRange(7)
	if !inRange(k, start, end) || inRange(XAttrKey(8, "user.k"), start, end) || inRange(XAttrKey(6, "user.z"), start, end) {
		t.Fatal("XAttrsRange covers the wrong keys")
	}
	all0, all1 := AllXAttrsRange()
	if !inRange(k, all0, all1) || inRange(InodeKey(7, "x"), all0, all1) {
		t.Fatal("AllXAttrsRange")
	}
	if got := FormatKey(k); got != `xattr(7,"user.k")` {
		t.Fatalf("FormatKey = %s", got)
	}
	if _, _, ok := DecodeXAttrKey(InodeKey(7, "user.k")); ok {
		t.Fatal("an inode key decoded as an xattr key")
	}
}

func FuzzDecodeACL(f *testing.F) {
	f.Add(EncodeACL([]meta.AclEntry{{Type: meta.AclUser, Name: "bob", Perm: 5}, {Scope: meta.AclDefault, Type: meta.AclOther}}))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		acl, err := DecodeACL(s)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// Only the canonical form decodes.
		if enc := EncodeACL(acl); !bytes.Equal([]byte(enc), []byte(s)) {
			t.Fatalf("%q decodes to %v, which encodes as %q", s, acl, enc)
		}
	})
}
