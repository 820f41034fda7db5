package namespace

import (
	"fmt"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// TestRowTable checks the table against a map model on both sides of the
// switch from a scanned list to an index.
func TestRowTable(t *testing.T) {
	var r rowTable
	rows := map[hintKey]*store.Inode{}
	modes := map[hintKey]store.Mode{}
	key := func(i int) hintKey { return hintKey{uint64(i % 7), fmt.Sprintf("n%d", i%40)} }
	for i := 0; i < 200; i++ {
		hk := key(i * 13)
		switch i % 3 {
		case 0:
			n := &store.Inode{ID: uint64(i)}
			r.set(hk, n)
			rows[hk] = n
		case 1:
			r.set(hk, nil)
			rows[hk] = nil
		case 2:
			m := store.Mode(1 + i%2)
			r.setMode(hk, m)
			modes[hk] = m
		}
		for j := 0; j < 60; j++ {
			k := key(j)
			if got, want := r.get(k), rows[k]; got != want {
				t.Fatalf("step %d: get(%v) = %v, want %v", i, k, got, want)
			}
			if got, want := r.mode(k), modes[k]; got != want {
				t.Fatalf("step %d: mode(%v) = %v, want %v", i, k, got, want)
			}
		}
	}
	if r.idx == nil {
		t.Fatalf("%d rows and no index", len(r.list))
	}
	if len(r.list) != len(r.idx) {
		t.Fatalf("index of %d entries over %d rows", len(r.idx), len(r.list))
	}
}
