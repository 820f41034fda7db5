package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/store"
)

// failingFS is the operating system's file system, whose write-ahead log
// writes and syncs fail with ENOSPC once fail is set (a disk filling up).
func failingFS() (vfs.FS, *atomic.Bool) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !fail.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	return fs, &fail
}

func failTestOptions(fs vfs.FS) Options {
	o := DefaultOptions()
	o.CacheSize, o.RowCacheEntries, o.ScanCacheBytes = 8<<20, 1024, 1<<20
	o.MemTableSize = 4 << 20
	o.FS = fs
	return o
}

// within fails the test unless fn returns within d: a hang is the bug.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func putRow(st *Store, key string, val []byte) error {
	txn, err := st.Begin(bg)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	if _, err := txn.Read(bg, []store.ReadReq{{Key: []byte(key), Mode: store.Exclusive}}); err != nil {
		return err
	}
	txn.Put([]byte(key), val)
	return txn.Commit(bg)
}

func assertFailed(t *testing.T, st *Store, cause error) {
	t.Helper()
	select {
	case <-st.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("Failed() not closed within 5 s")
	}
	err := st.Err()
	if !errors.Is(err, store.ErrFailed) || !errors.Is(err, cause) {
		t.Fatalf("Err() = %v, want store.ErrFailed and %v", err, cause)
	}
	if _, err := st.Begin(bg); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("Begin on a failed store: %v, want store.ErrFailed", err)
	}
	if _, err := st.AllocateIDs(bg, "inode", 1); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("AllocateIDs on a failed store: %v, want store.ErrFailed", err)
	}
}

// assertUnlocked checks that no row lock of keys is still held.
func assertUnlocked(t *testing.T, st *Store, keys []string) {
	t.Helper()
	o := st.locks.Owner()
	defer o.Release()
	for _, k := range keys {
		if err := o.Lock(bg, []byte(k), store.Exclusive, true); err != nil {
			t.Fatalf("lock of %q still held after the failure: %v", k, err)
		}
	}
}

// TestFailStopOnWALFailure: once the log's writes and syncs fail, the commit
// that meets it returns the error, the store fails (Failed, Err, a log line
// and the gauge), every later operation fails at once, no lock stays held,
// and Close returns at once. Before fail-stop the commit after the first
// failed sync panicked in Pebble and the next ones hung.
func TestFailStopOnWALFailure(t *testing.T) {
	fs, fail := failingFS()
	dir := t.TempDir()
	var logBuf testproc.Log
	opts := failTestOptions(fs)
	opts.Logger = newTextLogger(&logBuf)
	st, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := putRow(st, fmt.Sprintf("k%02d", i), []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	fail.Store(true)
	within(t, 10*time.Second, "commits on a failing log", func() {
		for i := range 10 {
			err := putRow(st, fmt.Sprintf("k%02d", i), bytes.Repeat([]byte("x"), 40<<10))
			if !errors.Is(err, store.ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("commit %d on a failing log: %v, want store.ErrFailed and ENOSPC", i, err)
			}
		}
	})
	assertFailed(t, st, syscall.ENOSPC)
	assertUnlocked(t, st, []string{"k00", "k05", "k09"})
	if got := testutilGauge(st.metrics.failed); got != 1 {
		t.Errorf("nimbus_pebblestore_failed = %v, want 1", got)
	}
	if !strings.Contains(logBuf.String(), "store failed") || !strings.Contains(logBuf.String(), "no space left on device") {
		t.Errorf("log does not name the failure:\n%s", logBuf.String())
	}
	within(t, 5*time.Second, "Close of a failed store", func() {
		if err := st.Close(); !errors.Is(err, store.ErrFailed) {
			t.Errorf("Close of a failed store: %v, want store.ErrFailed", err)
		}
	})

	// The restart (what the server's next start does): every acknowledged
	// commit is there. The failed store keeps its files locked, so the
	// directory is copied as it is on disk.
	st2 := openTest(t, copyDir(t, dir), failTestOptions(nil))
	vals := readRows(t, st2, 10)
	for i, v := range vals {
		if string(v) != "before" {
			t.Errorf("k%02d after restart = %.10q, want \"before\"", i, v)
		}
	}
}

// TestFailStopConcurrent: committers racing on shared rows when the log
// fails all return an error within a bound, none hangs, and every lock is
// free afterwards.
func TestFailStopConcurrent(t *testing.T) {
	fs, fail := failingFS()
	st := openTest(t, t.TempDir(), failTestOptions(fs))
	const workers = 8
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if err := putRow(st, fmt.Sprintf("row%d", (w+i)%4), []byte(fmt.Sprint(i))); err != nil {
					errs[w] = err
					return
				}
				acked.Add(1)
			}
		}()
	}
	for acked.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	fail.Store(true)
	within(t, 15*time.Second, "concurrent committers on a failing log", wg.Wait)
	for w, err := range errs {
		if !errors.Is(err, store.ErrFailed) {
			t.Errorf("worker %d: %v, want store.ErrFailed", w, err)
		}
	}
	assertFailed(t, st, syscall.ENOSPC)
	assertUnlocked(t, st, []string{"row0", "row1", "row2", "row3"})
}

// TestNoPebblePanicAfterLogFailure: commits that raced past the store's
// check into Pebble after its log failed (here: sent straight into Pebble)
// neither panic nor hang, though they write records bigger than a log block
// and rotate the memtable and the log: the log's error never reaches Pebble,
// whose log writer panicked on the next record and, in a rotation, unlocked
// a mutex twice (a fatal error of the runtime that killed the process). The
// store is failed and acknowledges nothing of them.
func TestNoPebblePanicAfterLogFailure(t *testing.T) {
	fs, fail := failingFS()
	st := openTest(t, t.TempDir(), smallMemtables(fs))
	if err := putRow(st, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := putRow(st, "a", bytes.Repeat([]byte("y"), 33<<10)); !errors.Is(err, store.ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a failing log: %v, want store.ErrFailed and ENOSPC", err)
	}
	// 3 MiB through a 1 MiB memtable: records over a block, rotations.
	within(t, 30*time.Second, "commits straight into Pebble after the log failed", func() {
		for i := range 48 {
			tx := &txn{s: st, owner: st.locks.Owner()}
			if err := tx.owner.Lock(bg, []byte("b"), store.Exclusive, false); err != nil {
				t.Fatal(err)
			}
			tx.Put([]byte("b"), bytes.Repeat([]byte("z"), 64<<10))
			if err := tx.applyBatch(i%2 == 0); err != nil {
				t.Errorf("commit %d straight into Pebble: %v", i, err)
			}
			if i%2 == 0 {
				if err := tx.batch.SyncWait(); err != nil {
					t.Errorf("sync of commit %d straight into Pebble: %v", i, err)
				}
			}
			tx.releaseLocks()
		}
	})
	assertFailed(t, st, syscall.ENOSPC)
	assertUnlocked(t, st, []string{"a", "b"})
}

// TestFailStopOnManifestFailure: a failed MANIFEST write in a background
// flush is a Fatalf of Pebble on its own goroutine. It fails the store,
// and does not panic there (which would kill the process before the server
// could log the cause and stop).
func TestFailStopOnManifestFailure(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.Contains(op.Path, "MANIFEST") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.EIO}
		}
		return nil
	}))
	st := openTest(t, t.TempDir(), failTestOptions(fs))
	if err := putRow(st, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if _, err := st.db.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	assertFailed(t, st, store.ErrFailed)
	if !strings.Contains(st.Err().Error(), "MANIFEST") {
		t.Fatalf("Err() = %v, want the MANIFEST failure named", st.Err())
	}
}

// TestFailStopRemovedDir: the data directory removed (rm -rf) or replaced
// under a running store fails it within the check interval; before, commits
// went on succeeding into unlinked files and were lost.
func TestFailStopRemovedDir(t *testing.T) {
	for _, replace := range []bool{false, true} {
		t.Run(fmt.Sprintf("replace=%v", replace), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "meta")
			opts := failTestOptions(nil)
			opts.IdentityCheckInterval = 20 * time.Millisecond
			st := openTest(t, dir, opts)
			if err := putRow(st, "a", []byte("1")); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if replace {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			assertFailed(t, st, errDataDir)
			if err := putRow(st, "a", []byte("2")); !errors.Is(err, store.ErrFailed) {
				t.Fatalf("commit after the directory was removed: %v, want store.ErrFailed", err)
			}
		})
	}
}

// TestFailStopRemovedDirAtOnce: with the periodic check off, removing the
// directory fails the store at once through the kernel's notification
// (identity_linux.go), well before any check interval.
func TestFailStopRemovedDirAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("inotify is Linux's")
	}
	dir := filepath.Join(t.TempDir(), "meta")
	opts := failTestOptions(nil)
	opts.IdentityCheckInterval = 0
	st := openTest(t, dir, opts)
	if err := putRow(st, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	select {
	case <-st.Failed():
	case <-time.After(time.Second):
		t.Fatal("the store did not fail within 1 s of its directory's removal")
	}
	t.Logf("failed %v after the removal: %v", time.Since(removed), st.Err())
	assertFailed(t, st, errDataDir)
}

// TestIdentityKept: the identity file is written once and a reopened store
// finds its own; a store whose identity file was swapped fails.
func TestIdentityKept(t *testing.T) {
	dir := t.TempDir()
	opts := failTestOptions(nil)
	opts.IdentityCheckInterval = 10 * time.Millisecond
	st, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	id := append([]byte(nil), st.id.id...)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openTest(t, dir, opts)
	if !bytes.Equal(st.id.id, id) {
		t.Fatalf("identity after reopen %q, want %q", st.id.id, id)
	}
	time.Sleep(50 * time.Millisecond)
	if err := st.Err(); err != nil {
		t.Fatalf("healthy store failed: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("someone-else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	assertFailed(t, st, errDataDir)
}

// TestIdentityCheckInconclusive: a check that cannot read the identity for a
// reason that says nothing of the directory (out of file descriptors under
// load) does not fail a healthy store.
func TestIdentityCheckInconclusive(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpOpen && strings.HasSuffix(op.Path, IdentityFile) {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EMFILE}
		}
		return nil
	}))
	opts := failTestOptions(fs)
	opts.IdentityCheckInterval = 5 * time.Millisecond
	st := openTest(t, t.TempDir(), opts)
	fail.Store(true)
	time.Sleep(100 * time.Millisecond)
	if err := st.Err(); err != nil {
		t.Fatalf("a store failed on EMFILE reading its identity: %v", err)
	}
	if err := putRow(st, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
}

func readRows(t *testing.T, st *Store, n int) [][]byte {
	t.Helper()
	txn, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback()
	reqs := make([]store.ReadReq, n)
	for i := range reqs {
		reqs[i] = store.ReadReq{Key: []byte(fmt.Sprintf("k%02d", i))}
	}
	vals, err := txn.Read(bg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// copyDir copies a store's files (not its lock) to a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return dst
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func testutilGauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}

// TestFailedSyncIsNotServed: a commit's rows become visible (and enter the
// row cache) before its WAL sync; when that sync fails, a transaction that
// read them must not end with success (they may not be in the log a restart
// replays), and the row cache must not keep them. The rows used to stay
// cached, and a read-only transaction that saw them could only end with
// Rollback, which dropped the error.
func TestFailedSyncIsNotServed(t *testing.T) {
	fs, fail := failingFS()
	st := openTest(t, t.TempDir(), failTestOptions(fs))
	key := []byte("k")
	if err := putRow(st, "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	gate := holdWALSyncs(t)
	committed := make(chan error, 1)
	go func() { committed <- putRow(st, "k", []byte("new")) }()
	<-gate.entered // visible, cached, locks released; its sync waits

	r, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := r.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if string(vals[0]) != "new" {
		t.Fatalf("read before the sync = %q, want the visible \"new\"", vals[0])
	}
	// Another that only reads under way when the store fails: it read a
	// durable row, but cannot know what else the failure took back.
	other, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Read(bg, []store.ReadReq{{Key: []byte("other")}}); err != nil {
		t.Fatal(err)
	}

	fail.Store(true)
	gate.release()
	if err := <-committed; !errors.Is(err, store.ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit whose sync failed: %v, want store.ErrFailed and ENOSPC", err)
	}
	if err := r.Commit(bg); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("read-only commit after reading a row whose sync failed: %v, want store.ErrFailed", err)
	}
	if err := other.Commit(bg); !errors.Is(err, store.ErrFailed) {
		t.Fatalf("read-only commit under way when the store failed: %v, want store.ErrFailed", err)
	}
	if row, hit, _ := st.rows.get(key); hit && string(row.v) == "new" {
		t.Fatal("the row cache still serves the row whose commit failed")
	}
}
