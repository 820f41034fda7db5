package pebblestore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// IdentityFile is the file in a store's directory that holds its identity,
// a random id written when the store is first opened.
const IdentityFile = "NIMBUS-STORE-ID"

// errDataDir is wrapped by the errors of a failed identity check.
var errDataDir = errors.New("pebblestore: data directory removed or replaced")

// identity is what the store knows of its directory, to notice it being
// removed or replaced under it (rm -rf of the data directory, a volume
// remounted): Pebble would go on writing into its open, unlinked files, and
// every commit would be acknowledged and lost. Checked every
// Options.IdentityCheckInterval and when the store fails.
type identity struct {
	fs       vfs.FS
	dir      string
	id       []byte
	dev, ino uint64
	haveIno  bool // the file system reports device and inode (not MemFS)
}

// openIdentity reads the directory's identity file, writing a new identity
// first when there is none (a new store, or one made before the file
// existed), and records the directory's device and inode.
func openIdentity(fs vfs.FS, dir string) (*identity, error) {
	path := fs.PathJoin(dir, IdentityFile)
	id, err := readSmall(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		id, err = writeIdentity(fs, dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: identity %s: %w", path, err)
	}
	ident := &identity{fs: fs, dir: dir, id: id}
	fi, err := fs.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: stat %s: %w", dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ident.dev, ident.ino, ident.haveIno = uint64(st.Dev), st.Ino, true
	}
	return ident, nil
}

// writeIdentity writes a new random identity durably: to a temporary file,
// synced, renamed into place, and the directory synced.
func writeIdentity(fs vfs.FS, dir, path string) ([]byte, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	id := []byte(hex.EncodeToString(raw[:]))
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(append(id, '\n')); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return nil, err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return nil, err
	}
	return id, nil
}

// readSmall reads the identity file, trimmed.
func readSmall(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b), nil
}

// check reports, wrapping errDataDir, that the directory is not the one the
// store opened: gone, another inode at its path, or another identity. An
// error that does not say so (out of file descriptors under load, EIO) is
// returned without errDataDir: the caller must not fail a healthy store on
// it. Nil on a nil identity (before Open has read it).
func (id *identity) check() error {
	if id == nil {
		return nil
	}
	fi, err := id.fs.Stat(id.dir)
	if err != nil {
		return dataDirError(id.dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && id.haveIno && (uint64(st.Dev) != id.dev || st.Ino != id.ino) {
		return fmt.Errorf("%w: %s is another directory now (device %d inode %d, opened as device %d inode %d)",
			errDataDir, id.dir, st.Dev, st.Ino, id.dev, id.ino)
	}
	path := id.fs.PathJoin(id.dir, IdentityFile)
	got, err := readSmall(id.fs, path)
	if err != nil {
		return dataDirError(path, err)
	}
	if !bytes.Equal(got, id.id) {
		return fmt.Errorf("%w: %s holds identity %q, opened as %q", errDataDir, path, got, id.id)
	}
	return nil
}

// dataDirError wraps errDataDir around the errors that mean the path is
// gone (or, over NFS, replaced), and only those.
func dataDirError(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ESTALE) {
		return fmt.Errorf("%w: %s: %w", errDataDir, path, err)
	}
	return fmt.Errorf("pebblestore: check data directory %s: %w", path, err)
}

// checkDir runs the identity check and fails the store if the directory is
// gone or another one; it logs an inconclusive check. It reports whether the
// store failed.
func (s *Store) checkDir(why string) bool {
	err := s.id.check()
	switch {
	case err == nil:
		return false
	case errors.Is(err, errDataDir):
		s.failStop(why, err)
		return true
	}
	s.log.Warn("data directory check inconclusive", "dir", s.dir, "err", err)
	return false
}

// watchIdentity checks the directory every interval until the store closes
// or fails; a failed check fails the store.
func (s *Store) watchIdentity(every time.Duration) {
	defer s.bg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.fail.ch:
			return
		case <-t.C:
			if s.checkDir("check data directory") {
				return
			}
		}
	}
}
