package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// Opener opens (creating if needed) a store persisted in dir.
type Opener func(t *testing.T, dir string) store.Store

// Run runs every conformance test as a subtest of t.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"PutGetDelete", testPutGetDelete},
		{"ReadOrderAndMissing", testReadOrderAndMissing},
		{"ReadsSeeCommittedOnly", testReadsSeeCommittedOnly},
		{"RollbackDiscards", testRollbackDiscards},
		{"EmptyCommit", testEmptyCommit},
		{"AtomicMultiKeyCommit", testAtomicMultiKeyCommit},
		{"Persistence", testPersistence},
		{"ScanOrderLimitsRanges", testScanOrderLimitsRanges},
		{"ScanSnapshotWhileCommitting", testScanSnapshot},
		{"ExclusiveExcludes", testExclusiveExcludes},
		{"SharedAdmitsShared", testSharedAdmitsShared},
		{"NoWaitBusy", testNoWaitBusy},
		{"LockOnlyLocks", testLockOnlyLocks},
		{"Guards", testGuards},
		{"Expectations", testExpectations},
		{"LockWaitHonoursContext", testLockWaitContext},
		{"LocksReleasedOnCommit", testLocksReleasedOnCommit},
		{"LocksReleasedOnRollback", testLocksReleasedOnRollback},
		{"WaiterReadsCommittedValue", testWaiterReadsCommitted},
		{"UnlockedReadAfterLocks", testUnlockedReadAfterLocks},
		{"MissingKeyReadAfterLocks", testMissingKeyReadAfterLocks},
		{"FinishedTxn", testFinishedTxn},
		{"AllocateIDs", testAllocateIDs},
		{"AllocateIDsAcrossReopen", testAllocateIDsReopen},
		{"Closed", testClosed},
		{"BankInvariant", testBank},
		{"DeleteRange", testDeleteRange}, // stores with store.RangeDeleter only
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, &harness{t: t, open: open, dir: t.TempDir()})
		})
	}
}

// harness opens stores on one dir and closes them when the test ends.
type harness struct {
	t    *testing.T
	open Opener
	dir  string
}

// store opens the harness's dir; close with closeStore or leave it to cleanup.
func (h *harness) store() store.Store {
	h.t.Helper()
	st := h.open(h.t, h.dir)
	if st == nil {
		h.t.Fatal("open returned a nil store")
	}
	var once sync.Once
	closeFn := func() error {
		var err error
		once.Do(func() { err = st.Close() })
		return err
	}
	closers.Store(st, closeFn)
	h.t.Cleanup(func() { _ = closeFn() })
	return st
}

var closers sync.Map // store.Store -> func() error

// closeStore closes st once, failing the test on error.
func closeStore(t *testing.T, st store.Store) {
	t.Helper()
	fn, ok := closers.Load(st)
	if !ok {
		t.Fatal("closeStore: not opened by the harness")
	}
	if err := fn.(func() error)(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

var bg = context.Background()

func begin(t testing.TB, st store.Store) store.Txn {
	t.Helper()
	txn, err := st.Begin(bg)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return txn
}

func commit(t testing.TB, txn store.Txn) {
	t.Helper()
	if err := txn.Commit(bg); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// put commits key=value pairs (nil value: delete) in one transaction.
func put(t testing.TB, st store.Store, kv ...string) {
	t.Helper()
	txn := begin(t, st)
	for i := 0; i+1 < len(kv); i += 2 {
		txn.Put([]byte(kv[i]), []byte(kv[i+1]))
	}
	commit(t, txn)
}

// get reads keys read-committed in a fresh transaction; missing keys are nil.
func get(t testing.TB, st store.Store, keys ...string) [][]byte {
	t.Helper()
	txn := begin(t, st)
	defer txn.Rollback()
	return read(t, txn, store.ReadCommitted, keys...)
}

func read(t testing.TB, txn store.Txn, mode store.Mode, keys ...string) [][]byte {
	t.Helper()
	vals, err := txn.Read(bg, reqs(mode, false, keys...))
	if err != nil {
		t.Fatalf("Read %s %q: %v", mode, keys, err)
	}
	if len(vals) != len(keys) {
		t.Fatalf("Read of %d keys returned %d values", len(keys), len(vals))
	}
	return vals
}

func reqs(mode store.Mode, noWait bool, keys ...string) []store.ReadReq {
	rs := make([]store.ReadReq, len(keys))
	for i, k := range keys {
		rs[i] = store.ReadReq{Key: []byte(k), Mode: mode, NoWait: noWait}
	}
	return rs
}

// tryLock takes key in mode with NoWait in a fresh transaction and reports
// the result; the transaction is rolled back.
func tryLock(t testing.TB, st store.Store, key string, mode store.Mode) error {
	t.Helper()
	txn := begin(t, st)
	defer txn.Rollback()
	_, err := txn.Read(bg, reqs(mode, true, key))
	if err != nil && !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("NoWait %s lock of %q: unexpected error %v", mode, key, err)
	}
	return err
}

func wantValues(t testing.TB, got [][]byte, want ...string) {
	t.Helper()
	for i, w := range want {
		switch {
		case w == "" && got[i] != nil:
			t.Errorf("value %d = %q, want no row", i, got[i])
		case w != "" && string(got[i]) != w:
			t.Errorf("value %d = %q, want %q", i, got[i], w)
		}
	}
}
