package namespace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// TestRawOnlyTransactionCommits: a transaction that writes only rows other
// than inodes (a lease, a block, a content chunk) commits them. It used to
// return success without committing, since only dirty inodes made it commit.
func TestRawOnlyTransactionCommits(t *testing.T) {
	e, st := newEngine(t)
	ctx := context.Background()
	key := store.LeaseKey(1 << 40)
	err := e.run(ctx, "test", "/", root, func(tx *tx) error {
		tx.putRaw(key, []byte("row"))
		return nil
	})
	must(t, err)
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key}})
	must(t, err)
	if string(vals[0]) != "row" {
		t.Fatalf("row written alone = %q after the operation returned, want \"row\"", vals[0])
	}
}

// commitFailStore fails every Commit once fail is set, after the store's own
// Commit ran: what pebblestore does when the WAL sync that a transaction's
// reads wait for fails (store.ErrFailed).
type commitFailStore struct {
	store.Store
	fail *atomic.Bool
}

var errSyncFailed = fmt.Errorf("%w: wait for the wal sync: no space left on device", store.ErrFailed)

func (s commitFailStore) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return commitFailTxn{Txn: txn, fail: s.fail}, nil
}

type commitFailTxn struct {
	store.Txn
	fail *atomic.Bool
}

func (t commitFailTxn) Commit(ctx context.Context) error {
	if err := t.Txn.Commit(ctx); err != nil {
		return err
	}
	if t.fail.Load() {
		return errSyncFailed
	}
	return nil
}

// TestReadOnlyAnswerWaitsForDurability: an operation that writes nothing
// (a stat, a listing, a create that finds the file there) answers only once
// what it read is durable, and fails when the store says it is not. They
// used to end with Rollback, which cannot report that, and so answered on a
// row whose sync failed.
func TestReadOnlyAnswerWaitsForDurability(t *testing.T) {
	_, inner := newEngine(t)
	var fail atomic.Bool
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	e, err := New(commitFailStore{Store: inner, fail: &fail}, cfg)
	must(t, err)
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/d", 0o755))
	_, err = e.Create(ctx, root, "/d/f", meta.CreateOptions{Client: "c"})
	must(t, err)
	_, err = e.Complete(ctx, root, "/d/f", "c")
	must(t, err)

	fail.Store(true)
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s answered although the durability of what it read failed", what)
		}
		wantKind(t, err, meta.ErrInternal)
		if !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("%s: %v, want the store's durability error", what, err)
		}
	}
	_, err = e.Stat(ctx, root, "/d/f")
	check("stat", err)
	_, err = e.List(ctx, root, "/d", "", 0)
	check("list", err)
	_, err = e.Create(ctx, root, "/d/f", meta.CreateOptions{Client: "c2"})
	if errors.Is(err, meta.ErrExists) {
		t.Fatalf("create of an existing file said %v on a row whose durability failed", err)
	}
	check("create of an existing file", err)
}
