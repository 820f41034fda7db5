package pebblestore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/store"
)

var bg = context.Background()

func openTest(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	st, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Options){
		func(o *Options) { o.CacheSize = -1 },
		func(o *Options) { o.CacheHoldMargin = -1 },
		func(o *Options) { o.MemTableSize = 10 },
		func(o *Options) { o.LockWaitMax = 0 },
		func(o *Options) { o.LockShards = 6 },
		func(o *Options) { o.IdentityCheckInterval = -time.Second },
	} {
		o := DefaultOptions()
		mut(&o)
		if err := o.Validate(); !errors.Is(err, ErrOptions) {
			t.Errorf("Validate(%+v) = %v, want ErrOptions", o, err)
		}
		if _, err := Open(t.TempDir(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("Open with %+v: %v, want ErrOptions", o, err)
		}
	}
}

// TestIDsDenseAcrossCleanClose: prefetched ids are not lost by a clean
// Close, and a fresh counter starts at FirstID.
func TestIDsDenseAcrossCleanClose(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.IDPrefetch = 100
	st := openTest(t, dir, opts)
	var got []uint64
	for range 3 {
		id, err := st.AllocateIDs(bg, "x", 5)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openTest(t, dir, opts)
	id, err := st.AllocateIDs(bg, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, id)
	if want := []uint64{FirstID, FirstID + 5, FirstID + 10, FirstID + 15}; !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	// A request larger than the prefetch is served too.
	if id, err := st.AllocateIDs(bg, "x", 1000); err != nil || id != FirstID+16 {
		t.Fatalf("AllocateIDs(1000) = %d, %v", id, err)
	}
	if id, err := st.AllocateIDs(bg, "x", 1); err != nil || id != FirstID+1016 {
		t.Fatalf("after a big request: %d, %v", id, err)
	}
}

// TestCommitSyncsWAL: a lone commit costs one WAL fsync (it is durable), and
// a read-only transaction none.
func TestCommitSyncsWAL(t *testing.T) {
	st := openTest(t, t.TempDir(), DefaultOptions())
	before := st.Stats()
	for range 5 {
		txn, _ := st.Begin(bg)
		txn.Put([]byte("k"), []byte("v"))
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	mid := st.Stats()
	if mid.Commits-before.Commits != 5 || mid.WALSyncs-before.WALSyncs < 5 {
		t.Fatalf("5 serial commits: %d commits, %d WAL syncs; want 5 and >= 5", mid.Commits-before.Commits, mid.WALSyncs-before.WALSyncs)
	}
	txn, _ := st.Begin(bg)
	if _, err := txn.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if after := st.Stats(); after.WALSyncs != mid.WALSyncs || after.Commits != mid.Commits {
		t.Fatalf("a read-only commit synced: %+v -> %+v", mid, after)
	}
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := DefaultOptions()
	opts.Registerer = reg
	dir := t.TempDir()
	st := openTest(t, dir, opts)
	txn, _ := st.Begin(bg)
	txn.Put([]byte("k"), []byte("v"))
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			names[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	for _, want := range []string{
		"nimbus_pebblestore_commits_total", "nimbus_pebblestore_wal_syncs_total", "nimbus_pebblestore_wal_bytes_written_total",
		"nimbus_pebblestore_compactions_total", "nimbus_pebblestore_block_cache_hits_total", "nimbus_pebblestore_disk_usage_bytes",
		"nimbus_pebblestore_commit_seconds", "nimbus_lockmgr_waits_total", "nimbus_lockmgr_wait_seconds", "nimbus_lockmgr_timeouts_total",
	} {
		if _, ok := names[want]; !ok {
			t.Errorf("metric %s not registered (have %v)", want, names)
		}
	}
	if names["nimbus_pebblestore_commits_total"] != 1 || names["nimbus_pebblestore_wal_syncs_total"] < 1 {
		t.Errorf("after one commit: commits %v, syncs %v", names["nimbus_pebblestore_commits_total"], names["nimbus_pebblestore_wal_syncs_total"])
	}
	// A second store on the same registry must fail cleanly, not panic ...
	if _, err := Open(t.TempDir(), opts); err == nil {
		t.Error("two stores registered on one registry")
	}
	// ... and a store reopened after Close registers again.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen on the same registry: %v", err)
	}
	st2.Close()
}

func TestDirLockedByOneProcess(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, DefaultOptions())
	if st, err := Open(dir, DefaultOptions()); err == nil {
		st.Close()
		t.Fatal("a second Open of a live directory succeeded")
	}
}
