package pebblestore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// readOnlyLockFS is the file system of a store opened with
// Options.ReadOnly. Pebble takes its directory lock even then, by creating
// LOCK for writing, which a read-only copy refuses. Here the lock is a
// shared (read) lock on LOCK opened read-only: it still conflicts with a
// server's exclusive lock (EAGAIN, as before), and it needs no write. A
// store without a LOCK file has had no writer that could still hold one.
type readOnlyLockFS struct{ vfs.FS }

func (readOnlyLockFS) Lock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	spec := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &spec); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (fs readOnlyLockFS) Unwrap() vfs.FS { return fs.FS }
