package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/store"
)

// tablesFullFS is the operating system's file system on which, once full is
// set, creating or writing a table fails with ENOSPC while the write-ahead
// log goes on: a disk that filled after the store had recycled (or
// preallocated) its logs, whose writes land in blocks the log already has.
// Only flushes meet the full disk.
func tablesFullFS() (vfs.FS, *atomic.Bool) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !full.Load() || !strings.HasSuffix(op.Path, ".sst") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	return fs, &full
}

// smallMemtables: 1 MiB memtables, so that a few MiB of commits flush and
// recycle logs.
func smallMemtables(fs vfs.FS) Options {
	o := failTestOptions(fs)
	o.MemTableSize = 1 << 20
	return o
}

// TestFailStopDiskFullFlush: the disk fills after the store has run a while
// (its logs recycled): the log's writes go on, only flushes fail. The store
// must fail (and its commits return) instead of stalling every commit for
// good behind flushes Pebble retries forever; every acknowledged commit is
// there after a restart. The failure guarded against: the commits waited in a write stall
// ("memtable count limit reached") and the store never failed.
func TestFailStopDiskFullFlush(t *testing.T) {
	fs, full := tablesFullFS()
	dir := t.TempDir()
	var logBuf testproc.Log
	opts := smallMemtables(fs)
	opts.Logger = newTextLogger(&logBuf)
	st, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("v"), 16<<10)
	// ~8 MiB: several flushes, the first logs recycled.
	for i := range 500 {
		if err := putRow(st, fmt.Sprintf("k%04d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	if m := st.db.Metrics(); m.WAL.ObsoleteFiles == 0 && m.Flush.Count == 0 {
		t.Fatalf("no flush yet: %s", m)
	}
	full.Store(true)
	acked := map[string]bool{}
	var last error
	within(t, 30*time.Second, "commits on a disk whose flushes fail", func() {
		for i := 0; ; i++ {
			k := fmt.Sprintf("n%05d", i)
			if last = putRow(st, k, val); last != nil {
				return
			}
			acked[k] = true
		}
	})
	if !errors.Is(last, store.ErrFailed) || !errors.Is(last, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v, want store.ErrFailed and ENOSPC", last)
	}
	assertFailed(t, st, syscall.ENOSPC)
	t.Logf("%d commits acknowledged after the disk filled, then: %v", len(acked), last)
	within(t, 5*time.Second, "Close of a failed store", func() { _ = st.Close() })

	st2 := openTest(t, copyDir(t, dir), smallMemtables(nil))
	tx, err := st2.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for k := range acked {
		v, err := tx.Read(bg, []store.ReadReq{{Key: []byte(k)}})
		if err != nil || !bytes.Equal(v[0], val) {
			t.Fatalf("acknowledged %s after restart: %d bytes, %v", k, len(v[0]), err)
		}
	}
}

// fillLog commits rows of ~16 KiB until the log holds about n bytes that no
// flush has taken (the memtable is big enough not to flush them), and
// closes nothing: the caller copies the directory as a crash leaves it.
func fillLog(t *testing.T, st *Store, n int) {
	t.Helper()
	val := bytes.Repeat([]byte("w"), 16<<10)
	for i := 0; i*len(val) < n; i++ {
		if err := putRow(st, fmt.Sprintf("w%04d", i), val); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenOnFullDisk: a start on a disk with no room for the flush of the
// replayed log fails with the reason, within a bound. The failure guarded against: Pebble's open
// retried the flush forever: the start never finished, burned a core and
// logged an error per retry.
func TestOpenOnFullDisk(t *testing.T) {
	src := t.TempDir()
	opts := failTestOptions(nil)
	st := openTest(t, src, opts)
	fillLog(t, st, 1<<20)
	dir := copyDir(t, src) // as a crash leaves it: the log not flushed

	fs, full := tablesFullFS()
	full.Store(true)
	o := failTestOptions(fs)
	var logBuf testproc.Log
	o.Logger = newTextLogger(&logBuf)
	var err error
	within(t, 30*time.Second, "Open on a full disk", func() { _, err = Open(dir, o) })
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open on a full disk: %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("Open's error does not name the directory: %v", err)
	}
	t.Logf("Open: %v", err)
}

// TestOpenContextCancelled: Open gives up when its context ends while
// Pebble's open waits on a disk that does not answer (SIGTERM of a server
// that is starting).
func TestOpenContextCancelled(t *testing.T) {
	src := t.TempDir()
	st := openTest(t, src, failTestOptions(nil))
	fillLog(t, st, 1<<20)
	dir := copyDir(t, src)

	// Never released: the abandoned open stays blocked, and writes nothing
	// into the directory while the test removes it.
	hang := make(chan struct{})
	var entered sync.Once
	blocked := make(chan struct{})
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpCreate {
			entered.Do(func() { close(blocked) })
			<-hang
		}
		return nil
	}))
	ctx, cancel := context.WithCancel(bg)
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err = OpenContext(ctx, dir, failTestOptions(fs))
	}()
	<-blocked
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("OpenContext did not return within 10 s of its context's end")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("OpenContext after cancel: %v, want context.Canceled naming %s", err, dir)
	}
}

// TestMovedDataDir: the data directory's parent renamed under a running
// store (mv of the data directory): the files stay open and linked, so
// commits go on durably, until Pebble must create its next log at the old
// path. That must fail the store with the cause, and every commit after it
// must return an error; without the fail-stop it is a panic in Pebble's log rotation that
// unlocked a mutex twice, a fatal error of the Go runtime (exit 2) that no
// recover stops: this test binary would die.
func TestMovedDataDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "data")
	dir := filepath.Join(parent, "meta")
	opts := smallMemtables(nil)
	opts.IdentityCheckInterval = 0 // the commits must meet it, not the check
	st := openTest(t, dir, opts)
	val := bytes.Repeat([]byte("m"), 16<<10)
	if err := putRow(st, "before", val); err != nil {
		t.Fatal(err)
	}
	moved := parent + ".moved"
	if err := os.Rename(parent, moved); err != nil {
		t.Fatal(err)
	}
	var last error
	acked := 0
	within(t, 30*time.Second, "commits into a moved directory", func() {
		for i := 0; ; i++ {
			if last = putRow(st, fmt.Sprintf("m%05d", i), val); last != nil {
				return
			}
			acked++
		}
	})
	t.Logf("%d commits acknowledged into the moved directory, then: %v", acked, last)
	assertFailed(t, st, errDataDir)
}

// TestRemovedDirLedger: writers commit while the store's directory is
// removed file by file, as rm -rf does. A ledger keeps each commit's start
// and outcome. Once the first file is gone the directory is being lost, so
// no commit that started after that may be acknowledged: its rows would go
// with the directory. The failure guarded against: the identity check failed the store only when
// the removal reached the identity file or the directory, and commits in
// between were acknowledged and lost.
func TestRemovedDirLedger(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the directory watch is Linux's")
	}
	dir := filepath.Join(t.TempDir(), "meta")
	opts := failTestOptions(nil)
	opts.IdentityCheckInterval = 0
	st := openTest(t, dir, opts)
	type entry struct {
		start time.Time
		err   error
	}
	const writers = 8
	ledgers := make([][]entry, writers)
	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				err := putRow(st, fmt.Sprintf("w%d-%06d", w, i), []byte("x"))
				ledgers[w] = append(ledgers[w], entry{start, err})
				if err != nil {
					return
				}
				acked.Add(1)
			}
		}()
	}
	for acked.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	// The first file rm -rf removes is whichever the directory lists
	// first; here one the store neither holds open nor checks.
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for _, e := range names {
		if strings.HasPrefix(e.Name(), "OPTIONS-") {
			first = filepath.Join(dir, e.Name())
		}
	}
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// Writers go on for a while before the rest goes.
	for acked.Load() < 300 && time.Since(began) < time.Second {
		time.Sleep(time.Millisecond)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	within(t, 10*time.Second, "writers on a removed directory", wg.Wait)
	close(stop)
	lost := 0
	for w := range ledgers {
		for _, e := range ledgers[w] {
			if e.err == nil && e.start.After(began) {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d commits that started after the removal began (%s removed) were acknowledged", lost, filepath.Base(first))
	}
	assertFailed(t, st, errDataDir)
	t.Logf("failed with: %v", st.Err())
}

// TestOwnRemovalsNotFatal: the store's own removals and renames (obsolete
// logs and tables after flushes and compactions, recycled logs, rewritten
// OPTIONS and MANIFEST markers) do not fail it, though the watch fails it on
// any other removal in its directory.
func TestOwnRemovalsNotFatal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the directory watch is Linux's")
	}
	dir := t.TempDir()
	st := openTest(t, dir, smallMemtables(nil))
	if st.dirWatch == nil {
		t.Fatal("no directory watch")
	}
	val := bytes.Repeat([]byte("o"), 8<<10)
	for round := range 3 {
		for i := range 1000 { // ~8 MiB a round through 1 MiB memtables
			if err := putRow(st, fmt.Sprintf("r%04d", i), val); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := st.Compact(bg); err != nil {
			t.Fatal(err)
		}
	}
	m := st.db.Metrics()
	if m.WAL.ObsoleteFiles+m.Compact.Count == 0 {
		t.Fatalf("nothing recycled or compacted: %s", m)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close after the store's own removals: %v", err)
	}
	st2 := openTest(t, dir, smallMemtables(nil))
	if err := putRow(st2, "after", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := st2.Err(); err != nil {
		t.Fatal(err)
	}
}
