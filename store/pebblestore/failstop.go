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
// durable, and Pebble unable to go on:
//
//   - A failed write or sync of the write-ahead log. Pebble's log writer
//     keeps the error (after a failed fsync the kernel may have dropped the
//     dirty pages: a retry could "succeed" over lost bytes), so every later
//     commit writes into a dead log, and the next one to do so panics in
//     Pebble's commitWrite while holding its commit pipeline's mutex. From
//     then on every committer blocks in Pebble forever, with its row locks.
//   - Pebble's Fatalf (a failed MANIFEST write, a fatal commit error).
//   - The data directory removed or replaced under the running store
//     (identity.go): writes go on "succeeding" into unlinked files.
//
// So the first such error fails the store for good: it is recorded once,
// Failed is closed, and every later operation returns it (wrapping
// store.ErrFailed) without entering Pebble, whose commit pipeline may be
// wedged. A panic of Pebble on a commit path is recovered where the store
// calls Pebble, so the caller gets an error and its locks are released. The
// owner (server/failstop.go) then stops the process; a restart replays the
// WAL up to its last synced record, which covers every acknowledged commit.
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
			"dir", s.dir, "op", op, "err", cause)
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

// pebblePanic is what a panic of Pebble recovered on a commit path becomes.
type pebblePanic struct{ v any }

func (p pebblePanic) Error() string { return fmt.Sprintf("pebble panicked: %v", p.v) }

// Unwrap lets errors.Is see the error Pebble panicked with (the log's
// "no space left on device").
func (p pebblePanic) Unwrap() error {
	if err, ok := p.v.(error); ok {
		return err
	}
	return nil
}

// applyBatch commits the batch, in the early-release mode (ApplyNoSyncWait)
// or not, turning a panic of Pebble into an error. A function of its own so
// that the deferred recover costs the commit path one open-coded defer and no
// closure.
func (t *txn) applyBatch(early bool) (err error) {
	defer recoverPebble(&err)
	if early {
		return t.s.db.ApplyNoSyncWait(t.batch, pebble.Sync)
	}
	return t.batch.Commit(pebble.Sync)
}

// logSync writes the empty log record of waitDurable, as applyBatch.
func (s *Store) logSync() (err error) {
	defer recoverPebble(&err)
	return s.db.LogData(nil, pebble.Sync)
}

// setSync writes one row durably (the id counters), as applyBatch.
func (s *Store) setSync(k, v []byte) (err error) {
	defer recoverPebble(&err)
	return s.db.Set(k, v, pebble.Sync)
}

// recoverPebble, deferred by the functions above (and only called that way),
// turns a panic into *errp.
func recoverPebble(errp *error) {
	if r := recover(); r != nil {
		*errp = pebblePanic{r}
	}
}

// onStorePath reports whether the calling goroutine came through this
// package: Pebble's Fatalf was called under a store operation (a commit, a
// read), not on one of Pebble's own background goroutines (flushes,
// compactions). Only called on a fatal error, so walking the stack is cheap
// enough.
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
var pkgPath = reflect.TypeOf(pebblePanic{}).PkgPath()
