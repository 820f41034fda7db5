package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/nimbus-fs/nimbus/blocks"
)

// Store is one DataNode's replicas on local disk. It implements blocks.Store
// and blocks.Corrupter. Safe for concurrent use.
type Store struct {
	dir  string
	cfg  Config
	log  *slog.Logger
	m    *metrics
	bufs sync.Pool // *[]byte of cfg.BufferSize

	lock *os.File // dir/LOCK, flocked while open

	dirsMu sync.Mutex
	dirs   map[string]bool // finalized sub-directories known to exist durably

	mu struct {
		sync.Mutex
		closed   bool
		replicas map[uint64]*replica
	}
}

var (
	_ blocks.Store     = (*Store)(nil)
	_ blocks.Corrupter = (*Store)(nil)
)

// replica is the in-memory record of one replica.
//
// mu serializes every change to the replica: each Writer call, Recover,
// OpenAppend, Truncate, Delete and the opening of a read stream (which must
// not see files half moved). Lock order: replica.mu before Store.mu.
// The published fields below are written with both held, so they can be read
// with either.
type replica struct {
	mu sync.Mutex

	id     blocks.ID
	state  blocks.State
	length int64 // finalized length, or synced (visible) length when being written
	// tailCRC is the CRC32C of the partial chunk at the end of [0, length)
	// when length%512 != 0 and tailKnown; the meta file's last checksum may
	// already cover bytes appended since, so readers use this one.
	tailCRC   uint32
	tailKnown bool
	writer    *writer // the open writer, if any
	gone      bool    // removed from the map (deleted or aborted)
}

// relDir is the directory of the replica's files, relative to the store.
func (r *replica) relDir() string {
	if r.state == blocks.Finalized {
		return subdirs(r.id.Block)
	}
	return rbwDir
}

// ErrLocked: another Store (in this or another process) has the directory open.
var ErrLocked = errors.New("blocks/local: directory in use")

// lockDir takes an exclusive flock on dir/LOCK (released by Close, or by
// the kernel when the process dies).
func (s *Store) lockDir() error {
	if s.cfg.ReadOnly {
		return s.lockDirShared()
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%w: %v", ErrLocked, err)
	}
	s.lock = f
	return nil
}

// lockDirShared is lockDir for Config.ReadOnly: a shared flock, which
// conflicts with a writer's exclusive one, on LOCK opened read-only. Without
// a LOCK file no writer has used the directory; the directory itself is
// then what is held open.
func (s *Store) lockDirShared() error {
	f, err := os.Open(filepath.Join(s.dir, "LOCK"))
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.Open(s.dir)
	}
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%w: %v", ErrLocked, err)
	}
	s.lock = f
	return nil
}

// Open opens (creating if needed) the store in dir. It scans rbw and
// finalized, finishes renames a crash cut short, removes half-written file
// pairs, and verifies every being-written replica to learn its length.
// The directory is locked (ErrLocked) until Close.
func Open(dir string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, cfg: cfg, log: log, m: m, dirs: map[string]bool{}}
	s.bufs.New = func() any { b := make([]byte, cfg.BufferSize); return &b }
	s.mu.replicas = map[uint64]*replica{}
	if err := s.lockDir(); err != nil {
		m.unregister()
		return nil, fmt.Errorf("blocks/local: open %s: %w", dir, err)
	}
	if err := s.scan(); err != nil {
		m.unregister()
		s.lock.Close()
		return nil, fmt.Errorf("blocks/local: open %s: %w", dir, err)
	}
	return s, nil
}

func opErr(op string, id blocks.ID, err error) error {
	return fmt.Errorf("blocks/local: %s %s: %w", op, id, err)
}

// lockReplica finds the replica named id and returns it with r.mu held.
func (s *Store) lockReplica(id blocks.ID) (*replica, error) {
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, blocks.ErrClosed
		}
		r := s.mu.replicas[id.Block]
		s.mu.Unlock()
		if r == nil {
			return nil, blocks.ErrNotFound
		}
		r.mu.Lock()
		if r.gone {
			r.mu.Unlock()
			continue // replaced meanwhile: look again
		}
		if r.id != id {
			have := r.id.GenStamp
			r.mu.Unlock()
			return nil, fmt.Errorf("%w (the block has generation stamp %d)", blocks.ErrNotFound, have)
		}
		return r, nil
	}
}

// publish applies fn to r's published fields under Store.mu; r.mu is held.
func (s *Store) publish(fn func()) {
	s.mu.Lock()
	fn()
	s.mu.Unlock()
}

// snapshot returns a copy of r's published fields and whether it is named id.
func (s *Store) snapshot(id blocks.ID) (blocks.Replica, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return blocks.Replica{}, blocks.ErrClosed
	}
	r := s.mu.replicas[id.Block]
	if r == nil {
		return blocks.Replica{}, blocks.ErrNotFound
	}
	if r.id != id {
		return blocks.Replica{}, fmt.Errorf("%w (the block has generation stamp %d)", blocks.ErrNotFound, r.id.GenStamp)
	}
	return blocks.Replica{ID: r.id, State: r.state, Length: r.length}, nil
}

// describe fills in DiskBytes.
func (s *Store) describe(rep blocks.Replica) blocks.Replica {
	rep.DiskBytes = rep.Length + metaSize(rep.Length)
	if rep.State == blocks.BeingWritten { // unsynced bytes take space too
		var n int64
		for _, name := range []string{dataName(rep.ID.Block), metaName(rep.ID)} {
			if fi, err := os.Stat(filepath.Join(s.dir, rbwDir, name)); err == nil {
				n += fi.Size()
			}
		}
		if n > 0 {
			rep.DiskBytes = n
		}
	}
	return rep
}

// Stat implements blocks.Store.
func (s *Store) Stat(ctx context.Context, id blocks.ID) (blocks.Replica, error) {
	if err := ctx.Err(); err != nil {
		return blocks.Replica{}, err
	}
	r, err := s.snapshot(id)
	if err != nil {
		return blocks.Replica{}, opErr("stat", id, err)
	}
	return s.describe(r), nil
}

// Report implements blocks.Store.
func (s *Store) Report(ctx context.Context, fn func(blocks.Replica) error) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return fmt.Errorf("blocks/local: report: %w", blocks.ErrClosed)
	}
	snap := make([]blocks.Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		snap = append(snap, blocks.Replica{ID: r.id, State: r.state, Length: r.length})
	}
	s.mu.Unlock()
	slices.SortFunc(snap, func(a, b blocks.Replica) int { return cmp.Compare(a.ID.Block, b.ID.Block) })
	for _, r := range snap {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(s.describe(r)); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements blocks.Store.
func (s *Store) Delete(ctx context.Context, id blocks.ID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := s.lockReplica(id)
	if errors.Is(err, blocks.ErrNotFound) {
		return nil
	}
	if err != nil {
		return opErr("delete", id, err)
	}
	defer r.mu.Unlock()
	if w := r.writer; w != nil {
		w.stop(fmt.Errorf("%w: replica deleted", blocks.ErrBadState))
	}
	dir := filepath.Join(s.dir, r.relDir())
	for _, name := range []string{metaName(r.id), dataName(r.id.Block)} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return opErr("delete", id, err)
		}
	}
	s.publish(func() {
		r.gone = true
		delete(s.mu.replicas, id.Block)
	})
	return nil
}

// Corrupt implements blocks.Corrupter: it flips every bit of the data byte
// at offset (which must be below the replica's file length).
func (s *Store) Corrupt(ctx context.Context, id blocks.ID, offset int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return opErr("corrupt", id, err)
	}
	defer r.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, r.relDir(), dataName(id.Block)), os.O_RDWR, 0)
	if err != nil {
		return opErr("corrupt", id, err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], offset); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: offset %d beyond the data", blocks.ErrRange, offset)
		}
		return opErr("corrupt", id, err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], offset); err != nil {
		return opErr("corrupt", id, err)
	}
	return nil
}

// Close implements blocks.Store: open writers write out their buffers
// (without syncing) and stop; their replicas stay being written.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	var open []*replica
	for _, r := range s.mu.replicas {
		if r.writer != nil {
			open = append(open, r)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, r := range open {
		r.mu.Lock()
		if w := r.writer; w != nil {
			if err := w.flush(); err != nil {
				errs = append(errs, opErr("close writer", r.id, err))
			}
			w.stop(fmt.Errorf("%w: store closed", blocks.ErrClosed))
		}
		r.mu.Unlock()
	}
	s.m.unregister()
	errs = append(errs, s.lock.Close()) // releases the flock
	return errors.Join(errs...)
}

func (s *Store) getBuf() *[]byte  { return s.bufs.Get().(*[]byte) }
func (s *Store) putBuf(b *[]byte) { s.bufs.Put(b) }
