package store

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func sampleReplicas() []Replica {
	return []Replica{
		{Block: 1, Node: 16, GenStamp: 1001, Length: 128 << 20, State: ReplicaFinalized},
		{Block: 1 << 40, Node: 17, GenStamp: 1, Length: 0, State: ReplicaBeingWritten},
		{Block: math.MaxUint64, Node: math.MaxUint64, GenStamp: math.MaxUint64, Length: math.MaxInt64, State: ReplicaCorrupt},
	}
}

func TestReplicaRoundTrip(t *testing.T) {
	for _, in := range sampleReplicas() {
		v := EncodeReplica(nil, &in)
		for _, k := range [][]byte{ReplicaKey(in.Block, in.Node), NodeReplicaKey(in.Node, in.Block)} {
			var out Replica
			if err := DecodeReplica(k, v, &out); err != nil {
				t.Fatal(err)
			}
			if out != in {
				t.Fatalf("decoded %+v under %s, want %+v", out, FormatKey(k), in)
			}
			for _, bad := range [][]byte{nil, {1}, {2, 1, 0, 0}, {1, 4, 0, 0}, {1, 1, 0, 1}, v[:len(v)-1], append(bytes.Clone(v), 0)} {
				if err := DecodeReplica(k, bad, &out); !errors.Is(err, ErrCorrupt) {
					t.Errorf("decode %x: %v, want ErrCorrupt", bad, err)
				}
			}
		}
		if err := DecodeReplica(DataKey(in.Block, 0)[:9], v, new(Replica)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode under a data key: %v, want ErrCorrupt", err)
		}
		s, e := ReplicasOfBlockRange(in.Block)
		if !inRange(ReplicaKey(in.Block, in.Node), s, e) || !inRange(ReplicaKey(in.Block, 0), s, e) {
			t.Errorf("ReplicasOfBlockRange(%d) misses its rows", in.Block)
		}
		if in.Block < math.MaxUint64 && inRange(ReplicaKey(in.Block+1, 0), s, e) {
			t.Errorf("ReplicasOfBlockRange(%d) holds the next block's rows", in.Block)
		}
		s, e = ReplicasOfNodeRange(in.Node, in.Block)
		if !inRange(NodeReplicaKey(in.Node, in.Block), s, e) || !inRange(NodeReplicaKey(in.Node, math.MaxUint64), s, e) {
			t.Errorf("ReplicasOfNodeRange(%d, %d) misses rows", in.Node, in.Block)
		}
		if in.Block > 0 && inRange(NodeReplicaKey(in.Node, in.Block-1), s, e) {
			t.Errorf("ReplicasOfNodeRange(%d, %d) holds an earlier block", in.Node, in.Block)
		}
		if in.Node < math.MaxUint64 && inRange(NodeReplicaKey(in.Node+1, 0), s, e) {
			t.Errorf("ReplicasOfNodeRange(%d, ...) holds the next node's rows", in.Node)
		}
		a, z := AllReplicasRange()
		if !inRange(ReplicaKey(in.Block, in.Node), a, z) || inRange(NodeReplicaKey(in.Node, in.Block), a, z) {
			t.Errorf("AllReplicasRange is not the by-block table")
		}
	}
}

// The tables of DataNodes and replicas keep apart from each other and
// from the older tables.
func TestDataNodeTablesDisjoint(t *testing.T) {
	keys := map[string][]byte{
		"datanode": DataNodeKey(1), "uuid": DataNodeUUIDKey("x"), "replica": ReplicaKey(1, 1),
		"node-replica": NodeReplicaKey(1, 1), "inode": InodeKey(1, "x"), "block": BlockKey(1, 0),
		"instance": InstanceKey(1), "meta": MetaKey("cluster/id"), "counter": CounterKey(CounterDataNode),
	}
	seen := map[byte]string{}
	for name, k := range keys {
		if other, ok := seen[k[0]]; ok {
			t.Errorf("%s and %s share the table byte %q", name, other, k[0])
		}
		seen[k[0]] = name
	}
}

func FuzzDecodeReplica(f *testing.F) {
	for _, r := range sampleReplicas() {
		f.Add(ReplicaKey(r.Block, r.Node), EncodeReplica(nil, &r))
		f.Add(NodeReplicaKey(r.Node, r.Block), EncodeReplica(nil, &r))
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		var r Replica
		if err := DecodeReplica(key, value, &r); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		v2 := EncodeReplica(nil, &r)
		var r2 Replica
		if err := DecodeReplica(ReplicaKey(r.Block, r.Node), v2, &r2); err != nil || r2 != r {
			t.Fatalf("unstable round trip: %+v, %v; want %+v", r2, err, r)
		}
		if !bytes.Equal(EncodeReplica(nil, &r2), v2) {
			t.Fatal("re-encoding differs")
		}
	})
}
