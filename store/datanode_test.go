package store

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func sampleDataNodes() []DataNode {
	return []DataNode{
		{ID: 16},
		{ID: 17, UUID: "0b6f0c6e-3f4e-4a8e-9f57-0d6f3f3c1a2b", StorageID: "DS-0b6f0c6e", Host: "dn-1", DataAddr: "10.0.0.1:9866",
			HTTPAddr: "10.0.0.1:9864", Zone: "eu-north-1a", Version: "nimbus commit abc", Capacity: 1 << 40, Used: 1 << 30,
			Remaining: 1<<40 - 1<<30, Transfers: 12, Admin: AdminDecommissioning, Full: true, Beat: 1 << 33,
			Started: 1764000000000, Updated: 1764000003000, Replicas: 123456},
		{ID: math.MaxUint64, UUID: strings.Repeat("u", MaxDataNodeString), Admin: AdminDecommissioned, Failed: true,
			Transfers: math.MaxUint32, Started: -1, Updated: math.MaxInt64},
	}
}

func TestDataNodeRoundTrip(t *testing.T) {
	for _, in := range sampleDataNodes() {
		k := DataNodeKey(in.ID)
		v := EncodeDataNode(nil, &in)
		var out DataNode
		if err := DecodeDataNode(k, v, &out); err != nil {
			t.Fatal(err)
		}
		if out != in {
			t.Fatalf("decoded %+v, want %+v", out, in)
		}
		if id, ok := DecodeDataNodeKey(k); !ok || id != in.ID {
			t.Fatalf("key decodes to %d %v", id, ok)
		}
		start, end := AllDataNodesRange()
		if !inRange(k, start, end) {
			t.Fatalf("%s is outside the DataNode table", FormatKey(k))
		}
		for _, bad := range [][]byte{nil, {2}, v[:len(v)-1], append(bytes.Clone(v), 0)} {
			if err := DecodeDataNode(k, bad, &out); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decode %x: %v, want ErrCorrupt", bad, err)
			}
		}
		if err := DecodeDataNode(InstanceKey(in.ID), v, &out); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode under an instance key: %v, want ErrCorrupt", err)
		}
	}
	// Fields out of their domain are refused, not taken.
	dn := sampleDataNodes()[1]
	long := dn
	long.Zone = strings.Repeat("z", MaxDataNodeString+1)
	var out DataNode
	if err := DecodeDataNode(DataNodeKey(1), EncodeDataNode(nil, &long), &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a zone of %d bytes: %v, want ErrCorrupt", len(long.Zone), err)
	}
	neg := dn
	neg.Remaining = -1
	if err := DecodeDataNode(DataNodeKey(1), EncodeDataNode(nil, &neg), &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("negative remaining: %v, want ErrCorrupt", err)
	}
	bad := dn
	bad.Admin = AdminDecommissioned + 1
	if err := DecodeDataNode(DataNodeKey(1), EncodeDataNode(nil, &bad), &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown admin state: %v, want ErrCorrupt", err)
	}
}

func TestDataNodeUUIDRow(t *testing.T) {
	k := DataNodeUUIDKey("0b6f0c6e")
	if u, ok := DecodeDataNodeUUIDKey(k); !ok || u != "0b6f0c6e" {
		t.Fatalf("uuid key decodes to %q %v", u, ok)
	}
	if id, err := DecodeDataNodeID(k, EncodeDataNodeID(1<<50)); err != nil || id != 1<<50 {
		t.Fatalf("id row decodes to %d %v", id, err)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, make([]byte, 9)} {
		if _, err := DecodeDataNodeID(k, bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %x: %v, want ErrCorrupt", bad, err)
		}
	}
	if _, ok := DecodeDataNodeUUIDKey([]byte{tableDataNodeUUID}); ok {
		t.Error("an empty UUID key decoded")
	}
}

func FuzzDecodeDataNode(f *testing.F) {
	for _, dn := range sampleDataNodes() {
		f.Add(DataNodeKey(dn.ID), EncodeDataNode(nil, &dn))
	}
	f.Add([]byte("k"), []byte{1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		var dn DataNode
		if err := DecodeDataNode(key, value, &dn); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		v2 := EncodeDataNode(nil, &dn)
		var dn2 DataNode
		if err := DecodeDataNode(key, v2, &dn2); err != nil || dn2 != dn {
			t.Fatalf("unstable round trip: %+v, %v; want %+v", dn2, err, dn)
		}
		if !bytes.Equal(EncodeDataNode(nil, &dn2), v2) {
			t.Fatal("re-encoding differs")
		}
	})
}
