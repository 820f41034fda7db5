package pebblestore

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walCountingFS counts the syncs of write-ahead log files. The count is
// taken when the sync returns, before Pebble wakes the committers that
// waited for it, so Stats().WALSyncs is exact at every acknowledged commit
// (Pebble's own fsync histogram is updated after the wake-up).
//
// With prefill > 0 it also keeps that many zero bytes written and synced
// ahead of the end of every log it creates (walprefill.go).
//
// It also keeps every error of a log from Pebble (failstop.go). A failed
// write, sync or close of a log, or a log that cannot be created (the
// directory moved or removed, the disk full), fails the store through
// onError, and then Pebble is told that it succeeded: Pebble's log writer
// keeps an error and panics on the next commit or log rotation, and a panic
// in its rotation unlocks a mutex twice, which kills the process with a
// fatal error of the Go runtime before anyone can say why. Once the store
// has failed (failed returns true) nothing more is written to any log: the
// writes and syncs are dropped and a new log lives in memory, so the logs on
// disk stay as they were at the failure, a tail that the next Open replays
// up to its last whole record. No caller is told of a commit that this hides:
// every acknowledgement checks the store's failure after Pebble's sync
// returned (txn.go), and the failure is recorded before Pebble hears of the
// sync.
type walCountingFS struct {
	vfs.FS
	syncs   *atomic.Uint64
	prefill int64
	onError func(op string, err error)
	failed  func() bool
	// watch, when not nil, is told of the store's own removals and renames,
	// and judges the directory's events after every successful sync of a
	// log, before Pebble wakes the commits that waited for it
	// (identity_linux.go).
	watch *dirWatch
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs walCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if !isWAL(name) {
		return f, err
	}
	if err != nil {
		// A new log (Create, ReuseForWrite): Pebble cannot do without it, and
		// panics (rotateWAL) or calls Fatalf (base.MustExist) on this error.
		// Fail the store and give Pebble a log in memory instead.
		fs.onError("create wal "+name, err)
		f = memLog(name)
	}
	return walFile{File: f, fs: fs, name: name}, nil
}

// memLog is a log file that lives in memory: what a log created after the
// store failed is written to.
func memLog(name string) vfs.File {
	mem := vfs.NewMem()
	f, err := mem.Create(mem.PathBase(name), vfs.WriteCategoryUnspecified)
	if err != nil {
		panic(err) // a MemFS creates a file at its root
	}
	return f
}

// wrapForWrite wraps a file about to be written from its start: a log is
// prefilled (when prefill > 0) under the sync counting of wrap.
func (fs walCountingFS) wrapForWrite(name string, f vfs.File, err error) (vfs.File, error) {
	if err == nil && fs.prefill > 0 && isWAL(name) && !fs.failed() {
		var size int64 // what the file already holds (a recycled log)
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		f = newPrefillFile(f, size, fs.prefill)
	}
	return fs.wrap(name, f, err)
}

func (fs walCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if isWAL(name) && fs.failed() {
		return fs.wrap(name, memLog(name), nil)
	}
	f, err := fs.FS.Create(name, c)
	return fs.wrapForWrite(name, f, err)
}

func (fs walCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if isWAL(newname) && fs.failed() {
		return fs.wrap(newname, memLog(newname), nil)
	}
	fs.watch.expect(oldname) // renamed to newname
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		fs.watch.forget(oldname)
	}
	return fs.wrapForWrite(newname, f, err)
}

func (fs walCountingFS) Remove(name string) error {
	fs.watch.expect(name)
	err := fs.FS.Remove(name)
	if err != nil {
		fs.watch.forget(name)
	}
	return err
}

func (fs walCountingFS) RemoveAll(name string) error {
	fs.watch.expect(name)
	err := fs.FS.RemoveAll(name)
	if err != nil {
		fs.watch.forget(name)
	}
	return err
}

func (fs walCountingFS) Rename(oldname, newname string) error {
	fs.watch.expect(oldname)
	err := fs.FS.Rename(oldname, newname)
	if err != nil {
		fs.watch.forget(oldname)
	}
	return err
}

func (fs walCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return f, err // an existing file: Pebble handles the error
	}
	return fs.wrap(name, f, nil)
}

func (fs walCountingFS) Unwrap() vfs.FS { return fs.FS }

// OpenDir wraps directories (the log's, the tables') so that a failed sync
// of one fails the store and is hidden from Pebble, as a log's: a failed
// sync of the log directory while creating a log panics in rotateWAL.
func (fs walCountingFS) OpenDir(name string) (vfs.File, error) {
	d, err := fs.FS.OpenDir(name)
	if err != nil {
		return d, err
	}
	return walDir{File: d, fs: fs, name: name}, nil
}

type walDir struct {
	vfs.File
	fs   walCountingFS
	name string
}

func (d walDir) Sync() error {
	if d.fs.failed() {
		return nil
	}
	if err := d.File.Sync(); err != nil {
		d.fs.onError("sync directory "+d.name, err)
	}
	return nil
}

type walFile struct {
	vfs.File
	fs   walCountingFS
	name string
}

// failed reports a failed operation on the log: the store fails. The error
// is not returned to Pebble (walCountingFS).
func (f walFile) failed(op string, err error) {
	f.fs.onError("wal "+op+" "+f.name, err)
}

func (f walFile) Write(b []byte) (int, error) {
	if f.fs.failed() {
		return len(b), nil
	}
	if _, err := f.File.Write(b); err != nil {
		f.failed("write", err)
	}
	return len(b), nil
}

// walSyncHook, when set (tests only), runs before every WAL sync: a test
// holds syncs back with it to look at what happens in between.
var walSyncHook func()

func beforeWALSync() {
	if h := walSyncHook; h != nil {
		h()
	}
}

// synced counts a sync that returned err, or reports it.
func (f walFile) synced(err error) {
	if err != nil {
		f.failed("sync", err)
		return
	}
	f.fs.syncs.Add(1)
	f.fs.watch.afterSync()
}

func (f walFile) Sync() error {
	beforeWALSync()
	if f.fs.failed() {
		return nil
	}
	f.synced(f.File.Sync())
	return nil
}

func (f walFile) SyncData() error {
	beforeWALSync()
	if f.fs.failed() {
		return nil
	}
	f.synced(f.File.SyncData())
	return nil
}

func (f walFile) SyncTo(length int64) (bool, error) {
	beforeWALSync()
	if f.fs.failed() {
		return true, nil
	}
	full, err := f.File.SyncTo(length)
	f.synced(err)
	return full || err != nil, nil
}

func (f walFile) Close() error {
	if err := f.File.Close(); err != nil && !f.fs.failed() {
		f.failed("close", err)
	}
	return nil
}
