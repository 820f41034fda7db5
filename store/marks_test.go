package store

import (
	"testing"
	"time"
)

// TestKeyMarks: a marked key is marked, another is not, and a mark older
// than keep is forgotten when a later mark prunes.
func TestKeyMarks(t *testing.T) {
	var k KeyMarks
	t0 := time.Unix(1000, 0)
	if k.Marked([]byte("a")) {
		t.Fatal("empty marks: a is marked")
	}
	k.Mark([]byte("a"), t0, time.Minute)
	if !k.Marked([]byte("a")) || k.Marked([]byte("b")) {
		t.Fatal("after marking a: want a marked, b not")
	}
	k.Mark([]byte("b"), t0.Add(2*time.Minute), time.Minute)
	if k.Marked([]byte("a")) || !k.Marked([]byte("b")) {
		t.Fatal("a mark older than keep survived a later mark's prune, or b was lost")
	}
}
