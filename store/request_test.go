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
		{At: 6, Op: "delete", Err: &meta.OpError{Op: "delete", Path: "/x/y", Err: meta.ErrNotEmpty, Detail: "3 entries"}},
		{At: 7, Op: "mkdirs", Err: &meta.OpError{Op: "mkdirs", Err: meta.ErrPermission}},
	} {
		v := EncodeRequest(nil, &r)
		var back RequestRecord
		if err := DecodeRequest(key, v, &back); err != nil {
			t.Fatal(err)
		}
		if back.At != r.At || back.Op != r.Op || (back.Status == nil) != (r.Status == nil) || r.Status != nil && *back.Status != *r.Status ||
			(back.Err == nil) != (r.Err == nil) || r.Err != nil && *back.Err != *r.Err {
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

// FuzzDecodeRequest: any value decodes to a record or ErrCorrupt, never a
// panic, and a record decoded survives its own round trip.
func FuzzDecodeRequest(f *testing.F) {
	key := RequestKey(7, "c")
	f.Add(EncodeRequest(nil, &RequestRecord{At: 1, Op: "rename"}))
	f.Add(EncodeRequest(nil, &RequestRecord{At: 2, Op: "create", Status: &meta.FileStatus{Path: "/a", Owner: "o"}}))
	f.Add(EncodeRequest(nil, &RequestRecord{At: 3, Op: "delete", Err: &meta.OpError{Op: "delete", Err: meta.ErrNotFound, Detail: "d"}}))
	f.Fuzz(func(t *testing.T, v []byte) {
		var r RequestRecord
		if err := DecodeRequest(key, v, &r); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		var back RequestRecord
		if err := DecodeRequest(key, EncodeRequest(nil, &r), &back); err != nil {
			t.Fatalf("a decoded record re-encoded does not decode: %v", err)
		}
		if back.At != r.At || back.Op != r.Op || (back.Status == nil) != (r.Status == nil) || r.Status != nil && *back.Status != *r.Status ||
			(back.Err == nil) != (r.Err == nil) || r.Err != nil && *back.Err != *r.Err {
			t.Fatalf("round trip of a decoded record: %+v, want %+v", back, r)
		}
	})
}
