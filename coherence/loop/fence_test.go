package loop

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openPG(t *testing.T) store.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgtest.DB(t), pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestFenceAndFloor on PostgreSQL: a write's check passes while its
// incarnation is live and its view at or above the floor; a fence and a
// floor raise wait for a write transaction holding the rows shared, and
// the checks after them refuse.
func TestFenceAndFloor(t *testing.T) {
	ctx := context.Background()
	st := openPG(t)
	begin := func() store.Txn {
		txn, err := st.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return txn
	}
	// Before the rows exist, every check refuses.
	txn := begin()
	if err := check(ctx, txn, "w", 1); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("check without rows: %v", err)
	}
	txn.Rollback()
	if err := ensureFloor(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := createFence(ctx, st, "w"); err != nil {
		t.Fatal(err)
	}
	if err := createFence(ctx, st, "w"); !errors.Is(err, errIDTaken) {
		t.Fatalf("second createFence: %v, want errIDTaken", err)
	}
	if err := raiseFloor(ctx, st, 5); err != nil {
		t.Fatal(err)
	}
	txn = begin()
	if err := check(ctx, txn, "w", 4); !errors.Is(err, ErrBelowFloor) {
		t.Fatalf("view 4 under floor 5: %v", err)
	}
	txn.Rollback()

	// A write that checked (view 5) holds the rows shared: the raise and
	// the fence wait for it.
	txn = begin()
	if err := check(ctx, txn, "w", 5); err != nil {
		t.Fatal(err)
	}
	raised, fenced := make(chan error, 1), make(chan error, 1)
	go func() { raised <- raiseFloor(ctx, st, 9) }()
	go func() { fenced <- fence(ctx, st, "w") }()
	select {
	case err := <-raised:
		t.Fatalf("the floor was raised under a write holding it shared: %v", err)
	case err := <-fenced:
		t.Fatalf("the writer was fenced under its write holding its row shared: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	txn.Put(store.MetaKey("test-row"), []byte("x"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	if err := <-fenced; err != nil {
		t.Fatal(err)
	}
	txn = begin()
	defer txn.Rollback()
	if err := check(ctx, txn, "w", 9); !errors.Is(err, ErrFenced) {
		t.Fatalf("check after the fence: %v, want ErrFenced", err)
	}
	if err := createFence(ctx, st, "never-wrote"); err != nil {
		t.Fatal(err)
	}
	// Fencing an incarnation that never created its row creates it fenced.
	if err := fence(ctx, st, "gone-early"); err != nil {
		t.Fatal(err)
	}
	if err := createFence(ctx, st, "gone-early"); !errors.Is(err, errIDTaken) {
		t.Fatalf("createFence after the fence: %v, want errIDTaken", err)
	}
}
