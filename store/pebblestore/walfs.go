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
// It also reports the first failed write or sync of a log to onError, which
// fails the store (failstop.go) before Pebble's log writer has recorded the
// error: no commit that starts after it enters Pebble's dead log.
type walCountingFS struct {
	vfs.FS
	syncs   *atomic.Uint64
	prefill int64
	onError func(op string, err error)
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs walCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	return walFile{File: f, syncs: fs.syncs, onError: fs.onError, name: name}, nil
}

// wrapForWrite wraps a file about to be written from its start: a log is
// prefilled (when prefill > 0) under the sync counting of wrap.
func (fs walCountingFS) wrapForWrite(name string, f vfs.File, err error) (vfs.File, error) {
	if err == nil && fs.prefill > 0 && isWAL(name) {
		var size int64 // what the file already holds (a recycled log)
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		f = newPrefillFile(f, size, fs.prefill)
	}
	return fs.wrap(name, f, err)
}

func (fs walCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrapForWrite(name, f, err)
}

func (fs walCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrapForWrite(newname, f, err)
}

func (fs walCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs walCountingFS) Unwrap() vfs.FS { return fs.FS }

type walFile struct {
	vfs.File
	syncs   *atomic.Uint64
	onError func(op string, err error)
	name    string
}

// failed reports a failed write or sync of the log.
func (f walFile) failed(op string, err error) {
	if f.onError != nil {
		f.onError("wal "+op+" "+f.name, err)
	}
}

func (f walFile) Write(b []byte) (int, error) {
	n, err := f.File.Write(b)
	if err != nil {
		f.failed("write", err)
	}
	return n, err
}

// walSyncHook, when set (tests only), runs before every WAL sync: a test
// holds syncs back with it to look at what happens in between.
var walSyncHook func()

func beforeWALSync() {
	if h := walSyncHook; h != nil {
		h()
	}
}

func (f walFile) Sync() error {
	beforeWALSync()
	err := f.File.Sync()
	if err == nil {
		f.syncs.Add(1)
	} else {
		f.failed("sync", err)
	}
	return err
}

func (f walFile) SyncData() error {
	beforeWALSync()
	err := f.File.SyncData()
	if err == nil {
		f.syncs.Add(1)
	} else {
		f.failed("sync", err)
	}
	return err
}

func (f walFile) SyncTo(length int64) (bool, error) {
	beforeWALSync()
	full, err := f.File.SyncTo(length)
	if err == nil {
		f.syncs.Add(1)
	} else {
		f.failed("sync", err)
	}
	return full, err
}
