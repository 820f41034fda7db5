package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

// rangeDeleter returns txn's store.RangeDeleter; the test is skipped, with
// the reason, for a store without the capability (it is optional).
func rangeDeleter(t *testing.T, txn store.Txn) store.RangeDeleter {
	t.Helper()
	rd, ok := txn.(store.RangeDeleter)
	if !ok {
		txn.Rollback()
		t.Skip("the store's transactions do not implement store.RangeDeleter (optional)")
	}
	return rd
}

// testDeleteRange: DeleteRange removes exactly [start, end) (start
// included, end excluded), nothing of other directories or tables, at
// commit and atomically with the transaction's other writes, in the order
// they were made; a rollback drops it, a reopen keeps it, and the rows read
// (and perhaps cached) before are gone to every reader after the commit.
func testDeleteRange(t *testing.T, h *harness) {
	st := h.store()
	names := func(dir uint64) []string {
		var out []string
		start, end := store.ChildrenRange(dir, "")
		for _, r := range scanAll(t, st, start, end, 0) {
			_, n, _ := store.DecodeInodeKey([]byte(r.k))
			out = append(out, n)
		}
		return out
	}
	txn := begin(t, st)
	for _, dir := range []uint64{6, 7, 8} {
		for i := range 10 {
			txn.Put(store.InodeKey(dir, fmt.Sprintf("e%d", i)), []byte("v"))
		}
	}
	txn.Put(store.DataKey(7, 0), []byte("content of inode 7"))
	commit(t, txn)
	// Read them all first: a store with caches has them cached now.
	all := [][]byte{store.InodeKey(7, "e0"), store.InodeKey(7, "e5"), store.InodeKey(7, "e9")}
	if v := getKeys(t, st, all...); v[0] == nil || v[1] == nil || v[2] == nil {
		t.Fatal("rows written are missing")
	}
	_ = names(7)
	dir7Start, dir7End := store.ChildrenRange(7, "")

	// A rollback drops the deletion.
	txn = begin(t, st)
	if err := rangeDeleter(t, txn).DeleteRange(bg, dir7Start, dir7End); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	txn.Rollback()
	if got := names(7); len(got) != 10 {
		t.Fatalf("after a rolled back DeleteRange the directory has %q", got)
	}

	// [e2, e7) of directory 7, with a put before in the range (deleted)
	// and one after (kept), and a write outside it in the same commit.
	txn = begin(t, st)
	rd := rangeDeleter(t, txn)
	txn.Put(store.InodeKey(7, "e3x"), []byte("put before"))
	if err := rd.DeleteRange(bg, store.InodeKey(7, "e2"), store.InodeKey(7, "e7")); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	txn.Put(store.InodeKey(7, "e4x"), []byte("put after"))
	txn.Put(store.InodeKey(9, "other"), []byte("same commit"))
	if err := rd.DeleteRange(bg, store.InodeKey(7, "z"), store.InodeKey(7, "a")); err != nil {
		t.Fatalf("DeleteRange of an empty range: %v", err)
	}
	if got := names(7); len(got) != 10 {
		t.Fatalf("before commit the directory has %q: a reader saw the deletion early", got)
	}
	commit(t, txn)
	want := []string{"e0", "e1", "e4x", "e7", "e8", "e9"}
	if got := names(7); !slices.Equal(got, want) {
		t.Fatalf("after DeleteRange [e2, e7): %q, want %q", got, want)
	}
	wantValues(t, getKeys(t, st, store.InodeKey(7, "e2"), store.InodeKey(7, "e3x"), store.InodeKey(7, "e4x"),
		store.InodeKey(7, "e6"), store.InodeKey(7, "e7"), store.InodeKey(9, "other")),
		"", "", "put after", "", "v", "same commit")
	for _, dir := range []uint64{6, 8} {
		if got := names(dir); len(got) != 10 {
			t.Fatalf("directory %d lost rows to a range of directory 7: %q", dir, got)
		}
	}

	// A whole directory, read under the parent's lock first, as the
	// recursive delete does; the other tables keep their rows.
	txn = begin(t, st)
	read(t, txn, store.Exclusive, string(store.InodeKey(1, "dir7")))
	if err := rangeDeleter(t, txn).DeleteRange(bg, dir7Start, dir7End); err != nil {
		t.Fatalf("DeleteRange: %v", err)
	}
	commit(t, txn)
	if got := names(7); len(got) != 0 {
		t.Fatalf("after deleting the whole directory: %q", got)
	}
	wantValues(t, getKeys(t, st, all...), "", "", "")
	wantValues(t, getKeys(t, st, store.DataKey(7, 0)), "content of inode 7")

	txn = begin(t, st)
	commit(t, txn)
	if err := rangeDeleter(t, txn).DeleteRange(bg, dir7Start, dir7End); !errors.Is(err, store.ErrTxnDone) {
		t.Fatalf("DeleteRange after Commit: %v, want ErrTxnDone", err)
	}

	closeStore(t, st)
	st = h.store()
	if got := names(7); len(got) != 0 {
		t.Fatalf("after a reopen the deleted rows are back: %q", got)
	}
	if got := names(8); len(got) != 10 {
		t.Fatalf("after a reopen directory 8 has %q", got)
	}
}

// getKeys is get for byte keys.
func getKeys(t testing.TB, st store.Store, keys ...[]byte) [][]byte {
	t.Helper()
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = string(k)
	}
	return get(t, st, s...)
}
