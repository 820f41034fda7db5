package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// guard is a guard lock request (store.ReadReq.Guard) for key.
func guard(key string, mode store.Mode, noWait bool) []store.ReadReq {
	return []store.ReadReq{{Key: []byte(key), Mode: mode, NoWait: noWait, Guard: true}}
}

// testGuards: guard locks exclude as locks do, among guard lockers; a
// sharer waiting behind the exclusive holder reads what it committed.
func testGuards(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "g", "1")
	a, b := begin(t, st), begin(t, st)
	defer a.Rollback()
	defer b.Rollback()
	for _, txn := range []store.Txn{a, b} {
		vals, err := txn.Read(bg, guard("g", store.Shared, true))
		if err != nil {
			t.Fatalf("shared guard: %v", err)
		}
		wantValues(t, vals, "1")
	}
	c := begin(t, st)
	defer c.Rollback()
	if _, err := c.Read(bg, guard("g", store.Exclusive, true)); !errors.Is(err, store.ErrLockBusy) || !store.IsRetryable(err) {
		t.Fatalf("exclusive guard over two shared: %v, want retryable ErrLockBusy", err)
	}
	c.Rollback()
	a.Rollback()
	b.Rollback()

	// The writer holds the guard exclusive and changes the value.
	w := begin(t, st)
	vals, err := w.Read(bg, guard("g", store.Exclusive, false))
	if err != nil {
		t.Fatalf("exclusive guard: %v", err)
	}
	wantValues(t, vals, "1")
	r := begin(t, st)
	if _, err := r.Read(bg, append(guard("g", store.Shared, true), store.ReadReq{Key: []byte("other")})); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("shared guard, NoWait, over an exclusive one: %v, want ErrLockBusy", err)
	}
	r.Rollback()
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := st.Begin(bg)
		if err != nil {
			errc <- err
			return
		}
		defer r.Rollback()
		vals, err := r.Read(bg, guard("g", store.Shared, false))
		if err != nil {
			errc <- err
			return
		}
		got <- vals[0]
	}()
	time.Sleep(20 * time.Millisecond) // let the sharer queue; if it has not, it reads 2 anyway
	w.Put([]byte("g"), []byte("2"))
	commit(t, w)
	select {
	case v := <-got:
		if string(v) != "2" {
			t.Fatalf("a sharer that waited read %q, want the committed 2", v)
		}
	case err := <-errc:
		t.Fatal(err)
	}

	// A guard on a key without a row locks too, and reads nothing.
	m := begin(t, st)
	defer m.Rollback()
	vals, err = m.Read(bg, guard("missing", store.Exclusive, false))
	if err != nil || vals[0] != nil {
		t.Fatalf("guard of a missing key: %q, %v", vals, err)
	}
	n := begin(t, st)
	defer n.Rollback()
	if _, err := n.Read(bg, guard("missing", store.Shared, true)); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("shared guard over an exclusive one on a missing key: %v, want ErrLockBusy", err)
	}
}

// testExpectations: a store.Expecter's commit writes only while its
// expectations hold, under the keys' guards (stores without the
// capability skip it).
func testExpectations(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "floor", "\x05", "fence", "\x00")
	expect := func(txn store.Txn, key, max string, failed func()) {
		t.Helper()
		e, ok := txn.(store.Expecter)
		if !ok {
			t.Skip("the store has no commit expectations (store.Expecter)")
		}
		e.Expect([]byte(key), []byte(max), failed)
	}
	// Both hold: the write commits.
	txn := begin(t, st)
	txn.Put([]byte("x"), []byte("1"))
	expect(txn, "floor", "\x05", nil)
	expect(txn, "fence", "\x00", nil)
	commit(t, txn)
	wantValues(t, get(t, st, "x"), "1")

	// The floor above the bound: nothing is written, the error is
	// retryable, and only its failed is called.
	var floorFailed, fenceFailed bool
	txn = begin(t, st)
	txn.Put([]byte("x"), []byte("2"))
	expect(txn, "fence", "\x00", func() { fenceFailed = true })
	expect(txn, "floor", "\x04", func() { floorFailed = true })
	if err := txn.Commit(bg); !errors.Is(err, store.ErrExpectation) || !store.IsRetryable(err) {
		t.Fatalf("commit with the floor above its bound: %v, want retryable ErrExpectation", err)
	}
	if !floorFailed || fenceFailed {
		t.Errorf("failed callbacks: floor %v fence %v, want the floor's only", floorFailed, fenceFailed)
	}
	wantValues(t, get(t, st, "x"), "1")

	// A missing row never holds.
	txn = begin(t, st)
	txn.Put([]byte("x"), []byte("3"))
	expect(txn, "missing", "\xff", nil)
	if err := txn.Commit(bg); !errors.Is(err, store.ErrExpectation) {
		t.Fatalf("commit expecting a missing row: %v, want ErrExpectation", err)
	}

	// A guard held exclusive: busy, nothing written; once its holder
	// committed a new value, the commit judges that value.
	w := begin(t, st)
	if _, err := w.Read(bg, guard("floor", store.Exclusive, false)); err != nil {
		t.Fatal(err)
	}
	txn = begin(t, st)
	txn.Put([]byte("x"), []byte("4"))
	expect(txn, "floor", "\x05", nil)
	if err := txn.Commit(bg); !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("commit while the guard is held exclusive: %v, want ErrLockBusy", err)
	}
	w.Put([]byte("floor"), []byte("\x06"))
	commit(t, w)
	txn = begin(t, st)
	txn.Put([]byte("x"), []byte("5"))
	expect(txn, "floor", "\x05", nil)
	if err := txn.Commit(bg); !errors.Is(err, store.ErrExpectation) {
		t.Fatalf("commit after the floor was raised past its bound: %v, want ErrExpectation", err)
	}
	wantValues(t, get(t, st, "x"), "1")
}
