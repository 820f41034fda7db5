package server

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// Fail-stop. A store that meets a storage error it cannot recover from (a
// failed sync of its log, its directory removed) fails for good and says so
// through store.Failer (store/pebblestore/failstop.go). The server then stops
// rather than serve on: /readyz fails at once, the cause is logged at ERROR,
// Wait returns it (so `nimbus serve` exits non-zero) and Stop gives requests
// stuck on the store Config.FailStopTimeout, not forever. A restart on the
// same data recovers every acknowledged operation from the log.

// fatal is the store's failure as the server sees it.
type fatal struct {
	ch      chan struct{} // closed once the store failed
	err     error         // set before ch is closed
	stopped chan struct{} // closed by Stop: the watcher returns
}

func newFatal() fatal {
	return fatal{ch: make(chan struct{}), stopped: make(chan struct{})}
}

func (f *fatal) failed() bool {
	select {
	case <-f.ch:
		return true
	default:
		return false
	}
}

// watchStore waits for the store to fail (if it can) until Stop.
func (s *Server) watchStore() {
	var st any = s.store
	f, ok := st.(store.Failer)
	if !ok {
		return
	}
	select {
	case <-f.Failed():
	case <-s.fatal.stopped:
		return
	}
	s.ready.Store(false)
	s.fatal.err = fmt.Errorf("server: %w", f.Err())
	s.log.Error("the metadata store failed: stopping the server", "err", f.Err(), "data", s.cfg.DataDir,
		"timeout", s.cfg.FailStopTimeout)
	close(s.fatal.ch)
}

// stopBounded runs shutdown, but bounds it by Config.FailStopTimeout once
// the store has failed (before or during the stop), or once ctx is done
// while shutdown still waits (a store stuck without failing, on a hung
// disk): past that, the connections of requests stuck on the store are
// closed, and what still has not returned is abandoned, as the process is
// about to exit (a restart recovers the store as after a crash).
func (s *Server) stopBounded(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.shutdown(sctx) }()
	var why error
	select {
	case err := <-done:
		return err
	case <-s.fatal.ch:
		why = s.fatal.err
	case <-ctx.Done():
		why = fmt.Errorf("server: stop: %w", ctx.Err())
	}
	timer := time.NewTimer(s.cfg.FailStopTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	cancel()
	if s.ln != nil {
		_ = s.http.Close()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
	}
	err := fmt.Errorf("server: stop: gave up after %v waiting for requests stuck on the store: %w", s.cfg.FailStopTimeout, why)
	s.log.Error("nimbus stopped, abandoning requests stuck on the store", "err", err)
	return err
}
