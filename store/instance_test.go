package store

import (
	"errors"
	"testing"
)

func TestInstanceRoundTrip(t *testing.T) {
	in := Instance{Started: 1764000000000, Beat: 1 << 40, Host: "nn-3/4242"}
	k := InstanceKey(77)
	var out Instance
	if err := DecodeInstance(k, EncodeInstance(nil, &in), &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	if id, ok := DecodeInstanceKey(k); !ok || id != 77 {
		t.Fatalf("key decodes to %d %v", id, ok)
	}
	start, end := AllInstancesRange()
	if string(k) < string(start) || string(k) >= string(end) {
		t.Fatalf("%x is outside the instance table [%x, %x)", k, start, end)
	}
	v := EncodeInstance(nil, &in)
	for _, bad := range [][]byte{nil, {9}, v[:len(v)-1], append(v, 0)} {
		if err := DecodeInstance(k, bad, &out); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %x: %v, want ErrCorrupt", bad, err)
		}
	}
	if err := DecodeInstance(SubtreeOpKey(77), v, &out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("decode under a subtree key: %v, want ErrCorrupt", err)
	}
}
