package store

import (
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestRequestRecordRoundTrip(t *testing.T) {
	key := RequestKey(1<<40|7, "nimbus-0123456789abcdef")
	if id, client, ok := DecodeRequestKey(key); !ok || id != 1<<40|7 || client != "nimbus-0123456789abcdef" {
		t.Fatalf("key round trip: %d %q %v", id, client, ok)
	}
	if got := FormatKey(key); got != `request(nimbus-0123456789abcdef,0x10000000007)` {
		t.Fatalf("FormatKey = %s", got)
	}
	if start, end := AllRequestsRange(); string(key) < string(start) || string(key) >= string(end) {
		t.Fatal("the key is outside the table's range")
	}
	for _, r := range []RequestRecord{
		{At: 1764048000123, Op: "rename"},
		{At: 1764048000123, Op: "create", Status: &meta.FileStatus{Path: "/a/b", FileID: 99, Type: meta.TypeFile, Perm: 0o644,
			Owner: "alice", Group: "staff", Length: 5, Replication: 3, BlockSize: 1 << 27, Mtime: 1, Atime: 2,
			UnderConstruction: true, AclBit: true, NsQuota: -1, SpaceQuota: -1}},
		{At: 5, Op: "create symlink", Status: &meta.FileStatus{Path: "/l", Type: meta.TypeSymlink, Symlink: "/t", ChildrenNum: 3}},
	} {
		v := EncodeRequest(nil, &r)
		var back RequestRecord
		if err := DecodeRequest(key, v, &back); err != nil {
			t.Fatal(err)
		}
		if back.At != r.At || back.Op != r.Op || (back.Status == nil) != (r.Status == nil) || r.Status != nil && *back.Status != *r.Status {
			t.Fatalf("round trip: %+v, want %+v", back, r)
		}
		if at, err := DecodeRequestAt(key, v); err != nil || at != r.At {
			t.Fatalf("DecodeRequestAt: %d, %v", at, err)
		}
		if err := DecodeRequest(key, append(v, 0), &back); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing bytes decoded: %v", err)
		}
		if err := DecodeRequest(key, v[:len(v)-1], &back); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a short record decoded: %v", err)
		}
	}
	if err := DecodeRequest(key, []byte{9, 0}, new(RequestRecord)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an unknown format decoded: %v", err)
	}
}
