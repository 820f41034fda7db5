package storetest

import (
	"slices"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

type idRange struct{ first, n uint64 }

// allocate runs g goroutines each making calls AllocateIDs calls of 1..7 ids
// and returns every range handed out; each goroutine checks its own ranges
// increase.
func allocate(t *testing.T, st store.Store, counter string, g, calls int) []idRange {
	t.Helper()
	var mu sync.Mutex
	var all []idRange
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			var last uint64
			for i := range calls {
				n := uint64((w+i)%7 + 1)
				first, err := st.AllocateIDs(bg, counter, n)
				if err != nil {
					t.Errorf("AllocateIDs: %v", err)
					return
				}
				if first <= last {
					t.Errorf("AllocateIDs went back: %d after %d", first, last)
				}
				last = first + n - 1
				mu.Lock()
				all = append(all, idRange{first, n})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all
}

// checkDisjoint fails unless the ranges never overlap, and none holds 0 or
// store.RootID; it returns the largest id.
func checkDisjoint(t *testing.T, rs []idRange) uint64 {
	t.Helper()
	slices.SortFunc(rs, func(a, b idRange) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	var hi uint64
	for i, r := range rs {
		if r.first <= store.RootID {
			t.Fatalf("id range %+v includes a reserved id (<= RootID %d)", r, store.RootID)
		}
		if i > 0 && r.first <= hi {
			t.Fatalf("id ranges overlap: %+v starts at or below %d", r, hi)
		}
		hi = r.first + r.n - 1
	}
	return hi
}

func testAllocateIDs(t *testing.T, h *harness) {
	st := h.store()
	rs := allocate(t, st, store.CounterInode, 8, 60)
	checkDisjoint(t, rs)
	// Counters are independent.
	a, err := st.AllocateIDs(bg, "other", 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.AllocateIDs(bg, "other", 1)
	if err != nil || b < a+3 {
		t.Fatalf("second counter: %d then %d (%v)", a, b, err)
	}
	if _, err := st.AllocateIDs(bg, "other", 0); err == nil {
		t.Error("AllocateIDs(0) must fail")
	}
}

func testAllocateIDsReopen(t *testing.T, h *harness) {
	st := h.store()
	all := allocate(t, st, store.CounterInode, 4, 30)
	closeStore(t, st)
	st = h.store()
	all = append(all, allocate(t, st, store.CounterInode, 4, 30)...)
	hi := checkDisjoint(t, all)
	closeStore(t, st)
	st = h.store()
	first, err := st.AllocateIDs(bg, store.CounterInode, 1)
	if err != nil {
		t.Fatal(err)
	}
	if first <= hi {
		t.Fatalf("after reopen AllocateIDs = %d, not above every earlier id (%d)", first, hi)
	}
}
