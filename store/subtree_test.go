package store

import (
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestSubtreeOpRoundTrip(t *testing.T) {
	op := SubtreeOp{Owner: 7, Kind: 2, Parent: 1, Name: "a", Path: "/a", PendingInodes: 3, PendingSpace: 1 << 40, PendingEntries: 2, Started: 1764048000123456789}
	key := SubtreeOpKey(42)
	if id, ok := DecodeSubtreeOpKey(key); !ok || id != 42 {
		t.Fatalf("key round trip: %d %v", id, ok)
	}
	if got := FormatKey(key); got != "subtree(42)" {
		t.Fatalf("FormatKey = %s", got)
	}
	var back SubtreeOp
	if err := DecodeSubtreeOp(key, EncodeSubtreeOp(nil, &op), &back); err != nil || back != op {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	chown := SubtreeOp{Owner: 7, Kind: 7, Parent: 1, Name: "a", Path: "/a", SetPerm: 0o1750, SetUser: "alice", SetGroup: "staff"}
	if err := DecodeSubtreeOp(key, EncodeSubtreeOp(nil, &chown), &back); err != nil || back != chown {
		t.Fatalf("round trip with what a recursive chown sets: %+v, %v", back, err)
	}
	withReq := op
	withReq.ReqClient, withReq.ReqID = "nimbus-0123456789abcdef", 1<<40|5
	if err := DecodeSubtreeOp(key, EncodeSubtreeOp(nil, &withReq), &back); err != nil || back != withReq {
		t.Fatalf("round trip with the request it serves: %+v, %v", back, err)
	}
	for _, c := range []SubtreeOp{op, withReq} {
		c.Checked = true
		if err := DecodeSubtreeOp(key, EncodeSubtreeOp(nil, &c), &back); err != nil || back != c {
			t.Fatalf("round trip of a checked delete: %+v, %v", back, err)
		}
	}
	if EncodeSubtreeOp(nil, &op)[0] != subtreeFormatV3 {
		t.Fatal("a row without a request is not written as format 3, which older servers read")
	}
	// A row written before format 3 (no age) reads as the oldest.
	v1 := []byte{subtreeFormatV1, 2, 7, 1, 1, 'a', 2, '/', 'a', 6, 0, 4}
	if err := DecodeSubtreeOp(key, v1, &back); err != nil || back.Started != 0 || back.PendingInodes != 3 || back.PendingEntries != 2 {
		t.Fatalf("a format 1 row: %+v, %v", back, err)
	}
	bad := EncodeSubtreeOp(nil, &SubtreeOp{Kind: 1, Path: "/x"})
	if err := DecodeSubtreeOp(key, bad, &back); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a row without an owner decoded: %v", err)
	}
	if err := DecodeSubtreeOp(key, append(EncodeSubtreeOp(nil, &op), 0), &back); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing bytes decoded: %v", err)
	}
}

func TestInodeSubtreeFlagRoundTrip(t *testing.T) {
	n := Inode{Parent: 1, Name: "a", ID: 5, Type: meta.TypeDir, Perm: 0o755, Owner: "u", Group: "g",
		NsQuota: -1, SpaceQuota: -1, SubtreeOwner: 1 << 40}
	var back Inode
	if err := DecodeInode(n.Key(), EncodeInode(nil, &n), &back); err != nil {
		t.Fatal(err)
	}
	if back.SubtreeOwner != n.SubtreeOwner {
		t.Fatalf("flag %d read back as %d", n.SubtreeOwner, back.SubtreeOwner)
	}
	n.SubtreeOwner = 0
	if err := DecodeInode(n.Key(), EncodeInode(nil, &n), &back); err != nil || back.SubtreeOwner != 0 {
		t.Fatalf("no flag read back as %d (%v)", back.SubtreeOwner, err)
	}
}
