package pebblestore

import (
	"fmt"
	"testing"
)

// TestUnsyncedKeysCountsAndShrinks: a key stays unsynced until every commit
// that wrote it is removed, and a shard's map that a big commit grew is
// replaced once it is empty.
func TestUnsyncedKeysCountsAndShrinks(t *testing.T) {
	u := newUnsyncedKeys()
	big := make([]written, 20000) // some hundreds a shard, well over smallUnsynced
	for i := range big {
		big[i] = newWritten(fmt.Appendf(nil, "k%05d", i), nil, false, false)
	}
	small := big[:1]
	u.add(big)
	u.add(small) // a second commit of k00000
	u.remove(big)
	if !u.has(small[0].key) {
		t.Fatal("k00000 reported synced while a second commit of it is not")
	}
	for _, w := range big[1:] {
		if u.has(w.key) {
			t.Fatalf("%s still unsynced after its commit was removed", w.key)
		}
	}
	u.remove(small)
	if u.has(small[0].key) {
		t.Fatal("k00000 still unsynced after both commits were removed")
	}
	for i := range u.shards {
		if s := &u.shards[i]; len(s.m) != 0 || s.peak != 0 {
			t.Fatalf("shard %d: %d keys, peak %d after all were removed; want an empty new map", i, len(s.m), s.peak)
		}
	}
}
