package loop

import (
	"reflect"
	"testing"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
)

func TestWireRoundTrip(t *testing.T) {
	for _, ms := range [][]coherence.Message{
		nil,
		{{Type: coherence.MsgAck, From: "a", To: "b", Since: 7, Op: coherence.OpID{Writer: "b", Seq: 3}}},
		{
			{Type: coherence.MsgInv, From: "w", To: "h.2", Since: 1 << 40, Deployment: 3, Op: coherence.OpID{Writer: "w", Seq: 1<<64 - 1},
				Targets: []cache.Target{cache.Key(9, "név"), cache.ListingOf(9), cache.AttrsOf(12), cache.Subtree(1), cache.InodeID(5)}},
			{Type: coherence.MsgRelease, From: "w", To: "h.2", Op: coherence.OpID{Writer: "w", Seq: 2}},
		},
	} {
		got, err := decodeBatch(appendBatch(nil, ms))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, ms) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, ms)
		}
	}
}

func TestWireRejectsGarbage(t *testing.T) {
	b := appendBatch(nil, []coherence.Message{{Type: coherence.MsgInv, From: "a", To: "b", Targets: []cache.Target{cache.Key(1, "x")}}})
	for i := range len(b) {
		if _, err := decodeBatch(b[:i]); err == nil {
			t.Fatalf("a batch cut at %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeBatch(append(b, 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
	if _, err := decodeBatch([]byte{9}); err == nil {
		t.Fatal("unknown version accepted")
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendBatch(nil, []coherence.Message{{Type: coherence.MsgInv, From: "a", To: "b", Targets: []cache.Target{cache.Key(1, "x")}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeBatch(b)
		if err != nil {
			return
		}
		if _, err := decodeBatch(appendBatch(nil, ms)); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
	})
}
