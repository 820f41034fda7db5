package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
)

type row struct{ k, v string }

func scanAll(t testing.TB, st store.Store, start, end []byte, limit int) []row {
	t.Helper()
	txn := begin(t, st)
	defer txn.Rollback()
	var rows []row
	if err := txn.Scan(bg, start, end, limit, func(k, v []byte) bool {
		rows = append(rows, row{string(k), string(v)})
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rows
}

func testScanOrderLimitsRanges(t *testing.T, h *harness) {
	st := h.store()
	// Inserted out of order, in two transactions, with inode keys whose
	// byte order differs from insertion and from naive string order of ids.
	var want []row
	txn := begin(t, st)
	for _, parent := range []uint64{300, 2, 1 << 40} {
		for _, name := range []string{"b", "a", "ab", "", "Z", "\xff"} {
			k := store.InodeKey(parent, name)
			txn.Put(k, []byte(name+"!"))
			want = append(want, row{string(k), name + "!"})
		}
	}
	commit(t, txn)
	put(t, st, "zzz-other-table", "x")
	slices.SortFunc(want, func(a, b row) int { return bytes.Compare([]byte(a.k), []byte(b.k)) })

	start, end := store.AllInodesRange()
	if got := scanAll(t, st, start, end, 0); !slices.Equal(got, want) {
		t.Fatalf("full scan:\n got %q\nwant %q", got, want)
	}
	for _, limit := range []int{1, 5, len(want), len(want) + 3, -1} {
		got := scanAll(t, st, start, end, limit)
		n := len(want)
		if limit > 0 && limit < n {
			n = limit
		}
		if !slices.Equal(got, want[:n]) {
			t.Errorf("limit %d: got %d rows %q", limit, len(got), got)
		}
	}
	// One directory's children, with and without a start-after cursor.
	cs, ce := store.ChildrenRange(300, "")
	got := scanAll(t, st, cs, ce, 0)
	if len(got) != 6 || got[0].v != "!" || got[5].v != "\xff!" {
		t.Errorf("children of 300: %q", got)
	}
	cs, ce = store.ChildrenRange(300, "a")
	got = scanAll(t, st, cs, ce, 2)
	if len(got) != 2 || got[0].v != "ab!" || got[1].v != "b!" {
		t.Errorf("children of 300 after \"a\", limit 2: %q", got)
	}
	// start is inclusive, end exclusive; empty and inverted ranges are empty.
	k := []byte(want[3].k)
	if got := scanAll(t, st, k, []byte(want[5].k), 0); !slices.Equal(got, want[3:5]) {
		t.Errorf("[3,5): %q", got)
	}
	if got := scanAll(t, st, k, k, 0); len(got) != 0 {
		t.Errorf("empty range returned %q", got)
	}
	if got := scanAll(t, st, []byte(want[5].k), k, 0); len(got) != 0 {
		t.Errorf("inverted range returned %q", got)
	}
	// fn returning false stops the scan.
	txn = begin(t, st)
	defer txn.Rollback()
	n := 0
	if err := txn.Scan(bg, start, end, 0, func(k, v []byte) bool { n++; return n < 3 }); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("scan went on after fn returned false: %d calls", n)
	}
}

// testScanSnapshot: rows committed, changed and deleted while a scan is
// under way do not show in it.
func testScanSnapshot(t *testing.T, h *harness) {
	st := h.store()
	const n = 600
	key := func(i int) []byte { return fmt.Appendf(nil, "s%05d", i) }
	txn := begin(t, st)
	for i := 0; i < n; i += 2 {
		txn.Put(key(i), []byte("v0"))
	}
	commit(t, txn)

	scanner := begin(t, st)
	defer scanner.Rollback()
	seen := 0
	var bad []string
	err := scanner.Scan(bg, []byte("s"), []byte("t"), 0, func(k, v []byte) bool {
		if seen%50 == 0 {
			// Another transaction changes the whole range mid-scan: it
			// rewrites every old row, deletes some, and fills the gaps.
			w := begin(t, st)
			for i := range n {
				switch {
				case i%2 == 1:
					w.Put(key(i), []byte("new"))
				case i%6 == 0:
					w.Delete(key(i))
				default:
					w.Put(key(i), fmt.Appendf(nil, "v%d", seen+1))
				}
			}
			commit(t, w)
		}
		if string(v) != "v0" {
			bad = append(bad, string(k)+"="+string(v))
		}
		seen++
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != n/2 || len(bad) != 0 {
		t.Fatalf("scan from one snapshot: saw %d rows (want %d), %d from later commits, e.g. %q",
			seen, n/2, len(bad), bad[:min(len(bad), 3)])
	}
}
