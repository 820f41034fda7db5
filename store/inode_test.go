package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func sampleInodes() []Inode {
	return []Inode{
		{Parent: RootParentID, Name: "", ID: RootID, Type: meta.TypeDir, Perm: 0o755, Owner: "hdfs", Group: "supergroup",
			Mtime: 1_760_000_000_000, Atime: 1_760_000_000_000, Children: 3, NsQuota: -1, SpaceQuota: -1},
		{Parent: 17, Name: "part-00000.parquet", ID: 99, Type: meta.TypeFile, Perm: 0o644, Owner: "alice", Group: "users",
			Mtime: 1_760_000_000_123, Atime: 1_760_000_000_000, Length: 4096, Written: 4096, Replication: 3, BlockSize: 128 << 20,
			NsQuota: -1, SpaceQuota: -1},
		{Parent: 17, Name: "writing", ID: 100, Type: meta.TypeFile, Perm: 0o600, Owner: "bob", Group: "users",
			Mtime: 5, Atime: -5, Length: 10, Replication: 1, BlockSize: 1 << 20, LeaseHolder: "client-7", LeaseRenewed: 77,
			Written: 123, NsQuota: -1, SpaceQuota: -1},
		{Parent: 1, Name: "link", ID: 101, Type: meta.TypeSymlink, Perm: 0o777, Owner: "carol", Group: "g",
			Symlink: "/a/b/c", NsQuota: -1, SpaceQuota: -1},
		{Parent: 1, Name: "quota", ID: 102, Type: meta.TypeDir, Perm: meta.PermMask, Owner: "", Group: "",
			Children: 1 << 40, NsQuota: 1000, SpaceQuota: -1, NsUsed: 12, SpaceUsed: 1 << 33},
		{Parent: 1, Name: "space", ID: 103, Type: meta.TypeDir, Perm: 0, NsQuota: -1, SpaceQuota: 0, NsUsed: 1},
		{Parent: 1, Name: "acl", ID: 104, Type: meta.TypeDir, Perm: 0o1750, Owner: "alice", Group: "staff",
			NsQuota: -1, SpaceQuota: -1, XAttrs: true, ACL: EncodeACL([]meta.AclEntry{
				{Type: meta.AclUser, Name: "bob", Perm: 5}, {Type: meta.AclGroup, Perm: 4},
				{Scope: meta.AclDefault, Type: meta.AclUser, Perm: 7}, {Scope: meta.AclDefault, Type: meta.AclGroup, Perm: 5},
				{Scope: meta.AclDefault, Type: meta.AclOther}})},
		{Parent: 1, Name: "xattrs", ID: 105, Type: meta.TypeFile, Perm: 0o644, XAttrs: true, NsQuota: -1, SpaceQuota: -1},
	}
}

func TestInodeRoundTrip(t *testing.T) {
	for _, in := range sampleInodes() {
		v := EncodeInode(nil, &in)
		var out Inode
		if err := DecodeInode(in.Key(), v, &out); err != nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
		if out != in {
			t.Errorf("round trip of %q:\n got %+v\nwant %+v", in.Name, out, in)
		}
		// Appending to a non-empty buffer keeps its prefix.
		v2 := EncodeInode([]byte("prefix"), &in)
		if !bytes.Equal(v2[:6], []byte("prefix")) || !bytes.Equal(v2[6:], v) {
			t.Errorf("EncodeInode does not append")
		}
		// Every truncation is refused as corrupt, never a panic.
		for i := range len(v) {
			if err := DecodeInode(in.Key(), v[:i], &out); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%q truncated to %d bytes: %v, want ErrCorrupt", in.Name, i, err)
			}
		}
		if err := DecodeInode(in.Key(), append(v, 0), &out); !errors.Is(err, ErrCorrupt) {
			t.Errorf("trailing byte accepted: %v", err)
		}
	}
}

func TestDecodeInodeRejects(t *testing.T) {
	in := sampleInodes()[1]
	v := EncodeInode(nil, &in)
	var out Inode
	if err := DecodeInode(DataKey(1, 0), v, &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("non-inode key: %v", err)
	}
	bad := bytes.Clone(v)
	bad[0] = 9
	if err := DecodeInode(in.Key(), bad, &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown format: %v", err)
	}
	bad = bytes.Clone(v)
	bad[2] = 200
	if err := DecodeInode(in.Key(), bad, &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad type: %v", err)
	}
	in.Perm = 0o10000
	if err := DecodeInode(in.Key(), EncodeInode(nil, &in), &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad permission: %v", err)
	}
}

func TestInodeHelpers(t *testing.T) {
	s := sampleInodes()
	if !s[2].UnderConstruction() || s[1].UnderConstruction() {
		t.Error("UnderConstruction")
	}
	if !s[4].HasQuota() || !s[5].HasQuota() || s[0].HasQuota() {
		t.Error("HasQuota")
	}
}

func FuzzDecodeInode(f *testing.F) {
	for _, in := range sampleInodes() {
		f.Add(in.Key(), EncodeInode(nil, &in))
	}
	f.Add([]byte("i"), []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		var n, view Inode
		err := DecodeInode(key, value, &n)
		// The view decoder agrees with the copying one, error for error.
		if verr := DecodeInodeView(key, value, &view); (verr == nil) != (err == nil) || (err == nil && view != n) {
			t.Fatalf("DecodeInodeView = %+v, %v; DecodeInode = %+v, %v", view, verr, n, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// decode -> encode -> decode is stable.
		v2 := EncodeInode(nil, &n)
		var n2 Inode
		if err := DecodeInode(n.Key(), v2, &n2); err != nil {
			t.Fatalf("re-decoding an encoded inode: %v", err)
		}
		if n2 != n {
			t.Fatalf("unstable round trip:\n%+v\n%+v", n, n2)
		}
		if v3 := EncodeInode(nil, &n2); !bytes.Equal(v2, v3) {
			t.Fatalf("re-encoding differs")
		}
	})
}
