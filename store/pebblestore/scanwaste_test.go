package pebblestore

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/store"
)

func counterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

// churn writes rows 0..n-1 of dir, then deletes and rewrites them rounds
// times, one commit per step, and adds ~1.2 MB of other rows so that a
// flush is worth starting.
func churn(t *testing.T, st *Store, dir uint64, n, rounds int) {
	t.Helper()
	commit := func(f func(txn store.Txn)) {
		txn, err := st.Begin(bg)
		if err != nil {
			t.Fatal(err)
		}
		f(txn)
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	put := func(txn store.Txn) {
		for i := range n {
			txn.Put(store.InodeKey(dir, fmt.Sprintf("f%04d", i)), []byte("row"))
		}
	}
	commit(put)
	for range rounds {
		commit(func(txn store.Txn) {
			for i := range n {
				txn.Delete(store.InodeKey(dir, fmt.Sprintf("f%04d", i)))
			}
		})
		commit(put)
	}
	big := bytes.Repeat([]byte("x"), 1000)
	for b := range 12 {
		commit(func(txn store.Txn) {
			for i := range 100 {
				txn.Put(store.InodeKey(dir+1, fmt.Sprintf("g%02d-%03d", b, i)), big)
			}
		})
	}
}

// scanDir lists dir and returns its rows and how many dead entries the
// scan stepped over.
func scanDir(t *testing.T, st *Store, dir uint64) (rows int, skipped float64) {
	t.Helper()
	before := counterValue(st.metrics.scanSkipped)
	txn, _ := st.Begin(bg)
	defer txn.Rollback()
	lo, hi := store.InodeKey(dir, ""), store.InodeKey(dir+1, "")
	if err := txn.Scan(bg, lo, hi, 0, func(k, v []byte) bool { rows++; return true }); err != nil {
		t.Fatal(err)
	}
	return rows, counterValue(st.metrics.scanSkipped) - before
}

func TestScanOverChurnFlushesMemtable(t *testing.T) {
	opts := DefaultOptions()
	opts.ScanFlushTrigger = 500
	st := openTest(t, t.TempDir(), opts)
	churn(t, st, 100, 100, 20) // 100 live rows, 40 dead versions behind each
	flushes := st.db.Metrics().Flush.Count

	rows, skipped := scanDir(t, st, 100)
	if rows != 100 || skipped < 100*40 {
		t.Fatalf("scan over churn: %d rows, %v dead entries stepped over; want 100 and >= 4000", rows, skipped)
	}
	deadline := time.Now().Add(20 * time.Second)
	for st.db.Metrics().Flush.Count == flushes {
		if time.Now().After(deadline) {
			t.Fatalf("no memtable flush 20 s after a scan stepped over %v dead entries (scan flushes asked: %v)",
				skipped, counterValue(st.metrics.scanFlushes))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := counterValue(st.metrics.scanFlushes); got != 1 {
		t.Fatalf("scan flushes = %v, want 1", got)
	}
	rows, skipped = scanDir(t, st, 100)
	if rows != 100 || skipped != 0 {
		t.Fatalf("scan after the flush: %d rows, %v dead entries stepped over; want 100 and 0", rows, skipped)
	}
}

func TestScanFlushTriggerOff(t *testing.T) {
	opts := DefaultOptions()
	opts.ScanFlushTrigger = 0
	st := openTest(t, t.TempDir(), opts)
	churn(t, st, 100, 100, 20)
	flushes := st.db.Metrics().Flush.Count
	if rows, skipped := scanDir(t, st, 100); rows != 100 || skipped < 4000 {
		t.Fatalf("scan over churn: %d rows, %v dead entries; want 100 and >= 4000", rows, skipped)
	}
	time.Sleep(200 * time.Millisecond)
	if got := counterValue(st.metrics.scanFlushes); got != 0 || st.db.Metrics().Flush.Count != flushes {
		t.Fatalf("trigger off: %v scan flushes, %d pebble flushes (want 0 and %d)", got, st.db.Metrics().Flush.Count, flushes)
	}
}
