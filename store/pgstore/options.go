package pgstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Store.
type Options struct {
	// PoolSize is the most connections the store opens to the database.
	// Every transaction that holds a lock holds one connection until it
	// ends; when all are taken, Begin's first locking read waits for one
	// (bounded by the caller's context).
	PoolSize int
	// ConnectTimeout bounds the dial and the startup of one connection; Open
	// fails after it when the database cannot be reached.
	ConnectTimeout time.Duration
	// StatementTimeout is PostgreSQL's statement_timeout for the store's
	// sessions: a statement running longer is cancelled by the server, and
	// the operation fails (not retryable). 0: no limit.
	StatementTimeout time.Duration
	// LockTimeout is the store's lock-wait limit (PostgreSQL's lock_timeout):
	// a locking read that waits longer for one row fails with
	// store.ErrLockTimeout, which callers retry.
	LockTimeout time.Duration
	// ReadConcurrency is the most unlocked reads outside a transaction's
	// locks (a stat's path, a listing's directory) sent to the database at
	// once; reads arriving meanwhile wait and then go together, one
	// statement for all of them (coalesce.go). 0: each read is sent at once
	// as its own statement. A lone read goes at once either way.
	ReadConcurrency int
	// NoCreate: Open fails with ErrSchema on a database that holds no
	// Nimbus namespace, instead of creating the schema there (`nimbus
	// fsck --store` reads; it does not make a namespace to check).
	NoCreate bool
	// DeadPeerTimeout bounds how long a connection to a database host that
	// vanished without a word (no FIN, no RST) keeps an operation waiting:
	// TCP keepalive probes and TCP_USER_TIMEOUT (dial.go). 0: the kernel's
	// defaults (hours for an idle connection).
	DeadPeerTimeout time.Duration
	// ScanPage is how many rows one statement of a Scan fetches. A scan that
	// finds no more than that is one statement; a longer one reads its rows
	// through a cursor, ScanPage at a time, from one snapshot.
	ScanPage int
	// Logger receives the store's events. Nil: discarded.
	Logger *slog.Logger
	// Registerer receives the store's metrics (metrics.go). Nil: not
	// registered.
	Registerer prometheus.Registerer
}

// DefaultOptions returns a pool of 32 connections, a 5 s connect timeout, a
// 60 s statement timeout, a 10 s lock timeout (as pebblestore's lock wait
// limit), a 15 s dead-peer timeout, reads not coalesced and scan pages of
// 1,000 rows.
func DefaultOptions() Options {
	return Options{
		PoolSize:         32,
		ConnectTimeout:   5 * time.Second,
		StatementTimeout: 60 * time.Second,
		LockTimeout:      10 * time.Second,
		DeadPeerTimeout:  15 * time.Second,
		ReadConcurrency:  4,
		ScanPage:         1000,
	}
}

// ErrOptions is wrapped by Validate's errors.
var ErrOptions = errors.New("pgstore: invalid options")

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case o.PoolSize < 1:
		return fmt.Errorf("%w: PoolSize = %d, want >= 1", ErrOptions, o.PoolSize)
	case o.ConnectTimeout <= 0:
		return fmt.Errorf("%w: ConnectTimeout = %v, want > 0", ErrOptions, o.ConnectTimeout)
	case o.StatementTimeout < 0:
		return fmt.Errorf("%w: StatementTimeout = %v, want >= 0", ErrOptions, o.StatementTimeout)
	case o.LockTimeout < time.Millisecond:
		// lock_timeout = 0 would mean "wait forever" to PostgreSQL, which
		// the store's contract does not allow.
		return fmt.Errorf("%w: LockTimeout = %v, want >= 1ms", ErrOptions, o.LockTimeout)
	case o.StatementTimeout > 0 && o.StatementTimeout < time.Millisecond:
		return fmt.Errorf("%w: StatementTimeout = %v, want 0 or >= 1ms", ErrOptions, o.StatementTimeout)
	case o.DeadPeerTimeout < 0 || (o.DeadPeerTimeout > 0 && o.DeadPeerTimeout < time.Second):
		return fmt.Errorf("%w: DeadPeerTimeout = %v, want 0 or >= 1s", ErrOptions, o.DeadPeerTimeout)
	case o.ReadConcurrency < 0:
		return fmt.Errorf("%w: ReadConcurrency = %d, want >= 0", ErrOptions, o.ReadConcurrency)
	case o.ScanPage < 1:
		return fmt.Errorf("%w: ScanPage = %d, want >= 1", ErrOptions, o.ScanPage)
	}
	return nil
}
