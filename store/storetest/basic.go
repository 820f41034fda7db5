package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

func testPutGetDelete(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "a", "1", "b", "2")
	wantValues(t, get(t, st, "a", "b", "c"), "1", "2", "")
	put(t, st, "a", "one")
	txn := begin(t, st)
	txn.Delete([]byte("b"))
	txn.Delete([]byte("never-existed"))
	commit(t, txn)
	wantValues(t, get(t, st, "a", "b"), "one", "")
	// An empty value is a row, distinct from no row.
	put(t, st, "empty", "")
	if v := get(t, st, "empty")[0]; v == nil || len(v) != 0 {
		t.Errorf("empty value read back as %q (nil=%v), want a non-nil empty slice", v, v == nil)
	}
	// Put copies its arguments.
	k, v := []byte("copy"), []byte("before")
	txn = begin(t, st)
	txn.Put(k, v)
	copy(k, "XXXX")
	copy(v, "after!")
	commit(t, txn)
	wantValues(t, get(t, st, "copy"), "before")
	// The last write of a key in a transaction wins.
	txn = begin(t, st)
	txn.Put([]byte("multi"), []byte("1"))
	txn.Delete([]byte("multi"))
	txn.Put([]byte("multi"), []byte("3"))
	commit(t, txn)
	wantValues(t, get(t, st, "multi"), "3")
	// Binary keys and values, including 0x00 and 0xff bytes.
	bk, bv := string([]byte{0, 0xff, 0}), string([]byte{0xff, 0, 1})
	put(t, st, bk, bv)
	wantValues(t, get(t, st, bk), bv)
}

func testReadOrderAndMissing(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k1", "v1", "k3", "v3")
	txn := begin(t, st)
	defer txn.Rollback()
	// Out-of-order keys, repeats, and modes mixed in one batch.
	rs := []store.ReadReq{
		{Key: []byte("k3"), Mode: store.Shared},
		{Key: []byte("k2"), Mode: store.Exclusive}, // missing rows may be locked
		{Key: []byte("k1"), Mode: store.ReadCommitted},
		{Key: []byte("k3"), Mode: store.Shared},
	}
	vals, err := txn.Read(bg, rs)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, vals, "v3", "", "v1", "v3")
	if vals, err := txn.Read(bg, nil); err != nil || len(vals) != 0 {
		t.Fatalf("empty Read = %v, %v", vals, err)
	}
	// The caller owns the returned values.
	vals[0][0] = 'X'
	wantValues(t, get(t, st, "k3"), "v3")

	// Unlocked batches, short and long (a backend may match rows to their
	// positions differently by length), with repeats and missing keys,
	// out of order, in a transaction that holds locks and in one that
	// does not (a backend may read them differently).
	fresh := begin(t, st)
	defer fresh.Rollback()
	for _, c := range []struct {
		txn store.Txn
		n   int
	}{{txn, 3}, {txn, 100}, {fresh, 3}, {fresh, 100}} {
		n := c.n
		var keys, want []string
		for i := n - 1; i >= 0; i-- {
			k := fmt.Sprintf("k%d", i)
			keys = append(keys, k, k)
			switch k {
			case "k1":
				want = append(want, "v1", "v1")
			case "k3":
				want = append(want, "v3", "v3")
			default:
				want = append(want, "", "")
			}
		}
		wantValues(t, read(t, c.txn, store.ReadCommitted, keys...), want...)
	}
}

func testReadsSeeCommittedOnly(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k", "old")
	w := begin(t, st)
	defer w.Rollback()
	w.Put([]byte("k"), []byte("new"))
	w.Put([]byte("fresh"), []byte("x"))
	// Not the writer's own buffered writes ...
	wantValues(t, read(t, w, store.Exclusive, "k", "fresh"), "old", "")
	var n int
	if err := w.Scan(bg, []byte("a"), []byte("z"), 0, func(k, v []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("writer's scan saw %d rows, want 1 (its buffered row is invisible)", n)
	}
	// ... nor anyone else's.
	wantValues(t, get(t, st, "k", "fresh"), "old", "")
	commit(t, w)
	wantValues(t, get(t, st, "k", "fresh"), "new", "x")
}

func testRollbackDiscards(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k", "v")
	txn := begin(t, st)
	txn.Put([]byte("k"), []byte("changed"))
	txn.Put([]byte("other"), []byte("x"))
	txn.Delete([]byte("k"))
	txn.Rollback()
	wantValues(t, get(t, st, "k", "other"), "v", "")
}

func testEmptyCommit(t *testing.T, h *harness) {
	st := h.store()
	txn := begin(t, st)
	read(t, txn, store.Exclusive, "k")
	commit(t, txn)
	if err := tryLock(t, st, "k", store.Exclusive); err != nil {
		t.Fatalf("lock kept after a read-only commit: %v", err)
	}
}

// testAtomicMultiKeyCommit: readers never see part of a transaction's writes.
func testAtomicMultiKeyCommit(t *testing.T, h *harness) {
	st := h.store()
	const keys, rounds = 50, 20
	key := func(i int) []byte { return fmt.Appendf(nil, "row%03d", i) }
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				txn, err := st.Begin(bg)
				if err != nil {
					errs <- err
					return
				}
				gens := map[string]int{}
				err = txn.Scan(bg, []byte("row"), []byte("rox"), 0, func(k, v []byte) bool {
					gens[string(v)]++
					return true
				})
				txn.Rollback()
				if err != nil {
					errs <- err
					return
				}
				if len(gens) > 1 || (len(gens) == 1 && sumCounts(gens) != keys) {
					errs <- fmt.Errorf("scan saw a torn commit: generations %v", gens)
					return
				}
			}
		})
	}
	for r := range rounds {
		txn := begin(t, st)
		for i := range keys {
			txn.Put(key(i), fmt.Appendf(nil, "gen%d", r))
		}
		commit(t, txn)
		// Point reads of every key after the commit see the same generation.
		txn = begin(t, st)
		rs := make([]store.ReadReq, keys)
		for i := range rs {
			rs[i] = store.ReadReq{Key: key(i), Mode: store.Shared}
		}
		vals, err := txn.Read(bg, rs)
		txn.Rollback()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if want := fmt.Sprintf("gen%d", r); string(v) != want {
				t.Fatalf("round %d key %d = %q, want %q", r, i, v, want)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

func testPersistence(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "a", "1", "b", "2")
	txn := begin(t, st)
	txn.Delete([]byte("b"))
	commit(t, txn)
	closeStore(t, st)
	st = h.store()
	wantValues(t, get(t, st, "a", "b"), "1", "")
	var keys [][]byte
	txn = begin(t, st)
	defer txn.Rollback()
	if err := txn.Scan(bg, nil, []byte{0xff}, 0, func(k, v []byte) bool {
		keys = append(keys, bytes.Clone(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	// The store may keep its own rows (counters, format) outside the user's
	// keys; the user's must be exactly "a".
	n := 0
	for _, k := range keys {
		if string(k) == "a" || string(k) == "b" {
			n++
			if string(k) != "a" {
				t.Errorf("deleted key %q came back", k)
			}
		}
	}
	if n != 1 {
		t.Errorf("after reopen found %d of the user's keys, want 1", n)
	}
}
