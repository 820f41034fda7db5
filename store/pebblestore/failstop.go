package pebblestore

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/nimbus-fs/nimbus/store"
)

// Fail-stop. Some storage errors leave the store unable to say what is
// durable, or Pebble unable to go on:
//
//   - A failed write, sync or creation of the write-ahead log. Pebble's log
//     writer would keep the error (after a failed fsync the kernel may have
//     dropped the dirty pages: a retry could "succeed" over lost bytes), and
//     panic on the next commit or log rotation. walfs.go keeps such errors
//     from Pebble: it fails the store and tells Pebble the write succeeded.
//   - A flush or compaction that failed for want of space (events.go). Pebble
//     retries it for ever, and once its memtables are full every commit
//     waits in a write stall for a flush that cannot succeed.
//   - Pebble's Fatalf (a failed MANIFEST write, a fatal commit error).
//   - The data directory removed, replaced or moved under the running store
//     (identity.go, identity_linux.go): writes go on "succeeding" into
//     unlinked files.
//
// So the first such error fails the store for good: it is recorded once,
// Failed is closed, and every later operation returns it (wrapping
// store.ErrFailed) without entering Pebble. Every acknowledgement (a commit,
// waitDurable, an id reservation) checks the failure after Pebble's sync
// returned, so nothing Pebble was told succeeded after the failure is
// acknowledged. Nothing recovers a panic of Pebble: Pebble panics holding
// its locks, and some of its panics unlock a mutex twice, which no recover
// stops; the errors that would make it panic are kept from it instead, and a
// Pebble goroutine that calls Fatalf, or meets a background error once the
// store has failed, is parked for good (logger.go, events.go). The owner
// (server/failstop.go) then stops the process; a restart replays the WAL up
// to its last synced record, which covers every acknowledged commit.
type failure struct {
	once sync.Once
	ch   chan struct{}
	err  atomic.Pointer[error] // nil until failed: loaded by every operation
}

// failed returns the store's fatal error, or nil. One atomic load: it runs on
// every operation.
func (s *Store) failed() error {
	if p := s.fail.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Failed is closed once the store has failed (store.Failer).
func (s *Store) Failed() <-chan struct{} { return s.fail.ch }

// Err returns the fatal error once the store has failed, nil before
// (store.Failer). It wraps store.ErrFailed and the cause.
func (s *Store) Err() error { return s.failed() }

var _ store.Failer = (*Store)(nil)

// failStop fails the store with the cause of op (the first call wins) and
// returns the error to give the caller: the store's fatal error, naming the
// first cause, with this op's own error when it is another one.
func (s *Store) failStop(op string, cause error) error {
	s.fail.once.Do(func() {
		// A failing commit may be the first sign that the directory is gone:
		// name that, the real cause, rather than what it led to.
		if !errors.Is(cause, errDataDir) {
			if idErr := s.id.check(); errors.Is(idErr, errDataDir) {
				cause = fmt.Errorf("%w (after %v)", idErr, cause)
			}
		}
		err := fmt.Errorf("%w: %s in %s: %w", store.ErrFailed, op, s.dir, cause)
		s.fail.err.Store(&err)
		close(s.fail.ch)
		s.log.Error("store failed: refusing every further operation; restart once the disk is fixed",
			"dir", s.dir, "op", op, "err", cause.Error()) // the text: slog would print a stack Pebble attached
		if s.metrics != nil {
			s.metrics.failed.Set(1)
		}
	})
	err := s.failed()
	if !errors.Is(err, cause) {
		err = fmt.Errorf("%w (then %s: %w)", err, op, cause)
	}
	return err
}

// applyBatch commits the batch, in the early-release mode (ApplyNoSyncWait)
// or not.
func (t *txn) applyBatch(early bool) error {
	if early {
		return t.s.db.ApplyNoSyncWait(t.batch, pebble.Sync)
	}
	return t.batch.Commit(pebble.Sync)
}

// logSync writes the empty log record of waitDurable; a nil error is an
// acknowledgement only with the store's failure checked after it.
func (s *Store) logSync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	return s.failed()
}

// setSync writes one row durably (the id counters), as logSync.
func (s *Store) setSync(k, v []byte) error {
	if err := s.db.Set(k, v, pebble.Sync); err != nil {
		return err
	}
	return s.failed()
}

// park blocks the calling goroutine for good: a goroutine of Pebble's that
// must not go on (it would panic, or retry a flush in a loop) once the store
// has failed. The process is about to exit.
func park() { select {} }

// onStorePath reports whether the calling goroutine came through this
// package: Pebble reported a background error under a store operation (a
// commit, Open), not on one of its own background goroutines (flushes,
// compactions), which alone may be parked. Only called on an error, so
// walking the stack is cheap enough.
func onStorePath() bool {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, pkgPath+".") && !strings.HasPrefix(f.Function, pkgPath+".pebbleLogger") {
			return true
		}
		if !more {
			return false
		}
	}
}

// pkgPath is this package's import path, as runtime frames name functions.
var pkgPath = reflect.TypeOf(Store{}).PkgPath()
