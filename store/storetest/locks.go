package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

func testExclusiveExcludes(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k", "v")
	a := begin(t, st)
	defer a.Rollback()
	read(t, a, store.Exclusive, "k")
	for _, mode := range []store.Mode{store.Shared, store.Exclusive} {
		if err := tryLock(t, st, "k", mode); !errors.Is(err, store.ErrLockBusy) {
			t.Errorf("%s lock over an exclusive one: %v, want ErrLockBusy", mode, err)
		}
	}
	// A read-committed read takes no lock and sees the committed value.
	wantValues(t, get(t, st, "k"), "v")
	// Other keys are unaffected.
	if err := tryLock(t, st, "other", store.Exclusive); err != nil {
		t.Errorf("unrelated key: %v", err)
	}
}

func testSharedAdmitsShared(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k", "v")
	a, b := begin(t, st), begin(t, st)
	defer a.Rollback()
	defer b.Rollback()
	read(t, a, store.Shared, "k")
	if _, err := b.Read(bg, reqs(store.Shared, true, "k")); err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	if err := tryLock(t, st, "k", store.Exclusive); !errors.Is(err, store.ErrLockBusy) {
		t.Errorf("exclusive over two shared: %v, want ErrLockBusy", err)
	}
	a.Rollback()
	if err := tryLock(t, st, "k", store.Exclusive); !errors.Is(err, store.ErrLockBusy) {
		t.Errorf("exclusive over one shared: %v, want ErrLockBusy", err)
	}
	b.Rollback()
	if err := tryLock(t, st, "k", store.Exclusive); err != nil {
		t.Errorf("exclusive after every reader left: %v", err)
	}
}

func testNoWaitBusy(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "a", "1", "b", "2")
	a := begin(t, st)
	defer a.Rollback()
	read(t, a, store.Exclusive, "b")
	b := begin(t, st)
	defer b.Rollback()
	// Batch: "a" is free, "b" is busy; NoWait on "b" fails the whole Read
	// at once, and the error is retryable.
	_, err := b.Read(bg, []store.ReadReq{
		{Key: []byte("a"), Mode: store.Exclusive},
		{Key: []byte("b"), Mode: store.Shared, NoWait: true},
	})
	if !errors.Is(err, store.ErrLockBusy) || !store.IsRetryable(err) {
		t.Fatalf("NoWait on a held key: %v, want retryable ErrLockBusy", err)
	}
}

func testLockWaitContext(t *testing.T, h *harness) {
	st := h.store()
	a := begin(t, st)
	defer a.Rollback()
	read(t, a, store.Exclusive, "k")

	b := begin(t, st)
	defer b.Rollback()
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := b.Read(ctx, reqs(store.Shared, false, "k")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v, want context.DeadlineExceeded", err)
	}
	c := begin(t, st)
	defer c.Rollback()
	ctx, cancel = context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(ctx, reqs(store.Exclusive, false, "k"))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it queue; the outcome does not depend on it
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	// The holder is unaffected; after it leaves the key is free.
	a.Rollback()
	if err := tryLock(t, st, "k", store.Exclusive); err != nil {
		t.Fatalf("after the waiters gave up and the holder left: %v", err)
	}
}

func testLocksReleasedOnCommit(t *testing.T, h *harness) {
	st := h.store()
	a := begin(t, st)
	read(t, a, store.Exclusive, "x")
	read(t, a, store.Shared, "s")
	a.Put([]byte("x"), []byte("1"))
	commit(t, a)
	for _, k := range []string{"x", "s"} {
		if err := tryLock(t, st, k, store.Exclusive); err != nil {
			t.Errorf("%q still locked after Commit: %v", k, err)
		}
	}
}

func testLocksReleasedOnRollback(t *testing.T, h *harness) {
	st := h.store()
	a := begin(t, st)
	read(t, a, store.Exclusive, "x")
	read(t, a, store.Shared, "s")
	a.Put([]byte("x"), []byte("1"))
	a.Rollback()
	for _, k := range []string{"x", "s"} {
		if err := tryLock(t, st, k, store.Exclusive); err != nil {
			t.Errorf("%q still locked after Rollback: %v", k, err)
		}
	}
}

// testWaiterReadsCommitted: a transaction that waited for a lock reads the
// value committed by the holder it waited for (lock, then read).
func testWaiterReadsCommitted(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "k", "v1")
	a := begin(t, st)
	read(t, a, store.Exclusive, "k")
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		b, err := st.Begin(bg)
		if err != nil {
			errc <- err
			return
		}
		defer b.Rollback()
		vals, err := b.Read(bg, reqs(store.Exclusive, false, "k"))
		if err != nil {
			errc <- err
			return
		}
		got <- vals[0]
	}()
	time.Sleep(20 * time.Millisecond) // let b queue; if it has not, it reads v2 anyway
	a.Put([]byte("k"), []byte("v2"))
	commit(t, a)
	select {
	case v := <-got:
		if string(v) != "v2" {
			t.Fatalf("waiter read %q, want the committed v2", v)
		}
	case err := <-errc:
		t.Fatal(err)
	}
}

func testFinishedTxn(t *testing.T, h *harness) {
	st := h.store()
	a := begin(t, st)
	a.Put([]byte("k"), []byte("v"))
	commit(t, a)
	if err := a.Commit(bg); !errors.Is(err, store.ErrTxnDone) {
		t.Errorf("Commit after Commit: %v, want ErrTxnDone", err)
	}
	a.Rollback() // no-op
	wantValues(t, get(t, st, "k"), "v")
	if _, err := a.Read(bg, reqs(store.Shared, false, "k")); !errors.Is(err, store.ErrTxnDone) {
		t.Errorf("Read after Commit: %v, want ErrTxnDone", err)
	}
	if err := tryLock(t, st, "k", store.Exclusive); err != nil {
		t.Errorf("a finished transaction holds a lock: %v", err)
	}
	b := begin(t, st)
	b.Put([]byte("k"), []byte("rolled back"))
	b.Rollback()
	b.Rollback()
	if err := b.Commit(bg); !errors.Is(err, store.ErrTxnDone) {
		t.Errorf("Commit after Rollback: %v, want ErrTxnDone", err)
	}
	wantValues(t, get(t, st, "k"), "v")
}

func testClosed(t *testing.T, h *harness) {
	st := h.store()
	open := begin(t, st)
	open.Put([]byte("k"), []byte("v"))
	closeStore(t, st)
	if _, err := open.Read(bg, reqs(store.Shared, false, "k")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Read of a transaction begun before Close: %v, want ErrClosed", err)
	}
	if err := open.Commit(bg); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Commit of a transaction begun before Close: %v, want ErrClosed", err)
	}
	open.Rollback()
	if _, err := st.Begin(bg); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Begin after Close: %v, want ErrClosed", err)
	}
	if _, err := st.AllocateIDs(bg, "c", 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AllocateIDs after Close: %v, want ErrClosed", err)
	}
}

// testUnlockedReadAfterLocks: in a batch that waits for a lock, the keys read
// without one are read once every lock is granted, not before the wait. The
// namespace reads a path's ancestors unlocked with the locks of its last
// components; read before a wait, an ancestor would miss what was committed
// while the batch waited (a subtree operation's flag).
func testUnlockedReadAfterLocks(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "a", "old", "b", "x")
	holder := begin(t, st)
	read(t, holder, store.Exclusive, "b")
	got := make(chan [][]byte, 1)
	errc := make(chan error, 1)
	go func() {
		w, err := st.Begin(bg)
		if err != nil {
			errc <- err
			return
		}
		defer w.Rollback()
		vals, err := w.Read(bg, []store.ReadReq{
			{Key: []byte("a"), Mode: store.ReadCommitted},
			{Key: []byte("b"), Mode: store.Exclusive},
		})
		if err != nil {
			errc <- err
			return
		}
		got <- vals
	}()
	time.Sleep(50 * time.Millisecond) // let the batch queue behind the holder
	put(t, st, "a", "new")            // committed while the batch waits
	holder.Put([]byte("b"), []byte("y"))
	commit(t, holder)
	select {
	case vals := <-got:
		if string(vals[0]) != "new" || string(vals[1]) != "y" {
			t.Fatalf("batch read a=%q b=%q, want a=new (committed during its wait) and b=y", vals[0], vals[1])
		}
	case err := <-errc:
		t.Fatal(err)
	}
}

// testMissingKeyReadAfterLocks: a key without a row, locked in a batch
// before a key whose lock the batch waits for, is read once every lock is
// granted. A missing key's lock need not keep out an inserter that holds
// the parent's row instead (the seam allows it: SQL cannot lock a missing
// row); the namespace's inserters hold the parent, and a batch that locks a
// new child before its parent (their keys can sort that way) must see the
// child that the parent's holder inserted while it waited.
func testMissingKeyReadAfterLocks(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "b", "x")
	holder := begin(t, st)
	read(t, holder, store.Exclusive, "b")
	got := make(chan [][]byte, 1)
	errc := make(chan error, 1)
	go func() {
		w, err := st.Begin(bg)
		if err != nil {
			errc <- err
			return
		}
		defer w.Rollback()
		vals, err := w.Read(bg, []store.ReadReq{
			{Key: []byte("a"), Mode: store.Shared},
			{Key: []byte("b"), Mode: store.Exclusive},
		})
		if err != nil {
			errc <- err
			return
		}
		got <- vals
	}()
	time.Sleep(50 * time.Millisecond) // let the batch queue behind the holder
	holder.Put([]byte("a"), []byte("new"))
	holder.Put([]byte("b"), []byte("y"))
	commit(t, holder)
	select {
	case vals := <-got:
		if string(vals[0]) != "new" || string(vals[1]) != "y" {
			t.Fatalf("batch read a=%q b=%q, want a=new (inserted by b's holder during the wait) and b=y", vals[0], vals[1])
		}
	case err := <-errc:
		t.Fatal(err)
	}
}

// testLockOnlyLocks: a LockOnly request takes its lock as a read would, on
// a key with a row and on one without, and a later reader of the key,
// after the holder's commit, sees what it wrote.
func testLockOnlyLocks(t *testing.T, h *harness) {
	st := h.store()
	put(t, st, "a", "1")
	a := begin(t, st)
	defer a.Rollback()
	if _, err := a.Read(bg, []store.ReadReq{
		{Key: []byte("a"), Mode: store.Exclusive, LockOnly: true},
		{Key: []byte("missing"), Mode: store.Exclusive, LockOnly: true},
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "missing"} {
		b := begin(t, st)
		_, err := b.Read(bg, []store.ReadReq{{Key: []byte(k), Mode: store.Shared, NoWait: true}})
		b.Rollback()
		if !errors.Is(err, store.ErrLockBusy) {
			t.Fatalf("NoWait on %q held by a LockOnly request: %v, want ErrLockBusy", k, err)
		}
	}
	a.Put([]byte("missing"), []byte("now"))
	commit(t, a)
	c := begin(t, st)
	defer c.Rollback()
	vals, err := c.Read(bg, []store.ReadReq{{Key: []byte("missing"), Mode: store.Exclusive}})
	if err != nil || string(vals[0]) != "now" {
		t.Fatalf("after the holder's commit: %q, %v", vals[0], err)
	}
}
