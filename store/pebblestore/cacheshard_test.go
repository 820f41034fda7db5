package pebblestore

import "testing"

type unit int64

func (u unit) cost() int64 { return int64(u) }

// TestCacheShardRule walks cacheShard through the interleavings its rule is
// about: a fill read before a commit, a fill during one, a written value
// installed at the end, and the budget.
func TestCacheShardRule(t *testing.T) {
	var s cacheShard[unit]
	s.init(16)
	has := func(x uint64) (unit, bool) { v, ok, _ := s.get(x); return v, ok }

	_, _, gen := s.get(1)
	s.fill(1, gen, 10, func() unit { return 1 })
	if v, ok := has(1); !ok || v != 1 {
		t.Fatalf("fill at the current generation not installed: %v %v", v, ok)
	}

	// A read that began before a commit may not install what it read.
	_, _, stale := s.get(2)
	s.begin(1)
	if _, ok := has(1); ok {
		t.Fatal("begin did not drop the slot")
	}
	called := false
	_, _, now := s.get(2)
	s.fill(2, now, 10, func() unit { called = true; return 2 }) // during the commit
	if _, ok := has(2); ok || called {
		t.Fatal("a fill was installed while a commit was pending")
	}
	s.end(1, 5, true, 10)
	if v, ok := has(1); !ok || v != 5 {
		t.Fatalf("end did not install the written value: %v %v", v, ok)
	}
	s.fill(2, stale, 10, func() unit { return 2 })
	if _, ok := has(2); ok {
		t.Fatal("a fill read before the commit was installed after it")
	}

	// end without keep drops whatever holds the slot.
	s.begin(1)
	s.end(1, 7, false, 10)
	if _, ok := has(1); ok {
		t.Fatal("end without keep left the slot filled")
	}

	// The budget: installs evict until the new value fits; a value over the
	// whole budget is not installed.
	for x := uint64(10); x < 20; x++ {
		_, _, g := s.get(x)
		s.fill(x, g, 10, func() unit { return 3 })
		if s.used > 10 {
			t.Fatalf("shard holds %d, over its budget of 10", s.used)
		}
	}
	if _, ok := has(19); !ok || s.t.Len() != 3 || s.used != 9 {
		t.Fatalf("after the fills: last installed %v, %d slots, %d used; want true, 3, 9", ok, s.t.Len(), s.used)
	}
	_, _, g := s.get(30)
	s.fill(30, g, 10, func() unit { return 11 })
	if _, ok := has(30); ok || s.used != 9 {
		t.Fatalf("a value over the budget was installed (used %d)", s.used)
	}
	// A commit's value is installed only in the room the shard has: end
	// evicts nothing.
	s.begin(40)
	s.end(40, 3, true, 10)
	if _, ok := has(40); ok || s.t.Len() != 3 || s.used != 9 {
		t.Fatalf("end installed into a full shard: %d slots, %d used", s.t.Len(), s.used)
	}
	if s.pending != 0 {
		t.Fatalf("pending = %d after every commit ended", s.pending)
	}
}
