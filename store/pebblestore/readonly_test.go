package pebblestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// TestReadOnly: a read-only open sees what was committed, creates nothing
// (not even LOCK, which a read-only copy could not take), refuses writes,
// (a writer in another process refuses it: tests/e2e TestNewcomerFsckForms;
// fcntl locks of one process do not conflict with each other).
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	txn, _ := w.Begin(ctx)
	txn.Put([]byte("k"), []byte("v"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ro := DefaultOptions()
	ro.ReadOnly = true
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	st := openTest(t, dir, ro)
	txn, _ = st.Begin(ctx)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: []byte("k"), Mode: store.Shared}})
	if err != nil || string(vals[0]) != "v" {
		t.Fatalf("read: %q, %v", vals, err)
	}
	txn.Put([]byte("k2"), []byte("v"))
	if err := txn.Commit(ctx); err == nil {
		t.Fatal("a read-only store committed a write")
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("read-only open changed the directory: %d entries before, %d after", len(before), len(after))
	}
}
