package pgstore

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nimbus-fs/nimbus/store"
)

// ErrCommitUnknown is wrapped by Commit's error when the connection broke
// after COMMIT was sent and before its answer came: the transaction may or
// may not have committed. It is not retryable (store.IsRetryable is false):
// running the operation again could apply it twice, and reporting it as not
// done could be a wrong answer. The caller must look before it acts again.
var ErrCommitUnknown = store.ErrCommitUnknown

// connLost reports whether err means the database could not be reached or
// the connection under a statement broke (the server restarting, shutting
// down, failing over, or the network), rather than the statement failing on
// a working connection. A lost connection ends its transaction on the
// server, which rolls it back unless COMMIT was already under way: callers
// decide from where it broke whether anything may have committed.
func connLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", // admin_shutdown: the server is stopping, or terminated the backend
			"57P02", // crash_shutdown: another backend crashed, the server restarts
			"57P03": // cannot_connect_now: starting up, recovering, or shutting down
			return true
		}
		// Class 08, connection exception.
		return len(pe.Code) == 5 && pe.Code[:2] == "08"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	if pgconn.SafeToRetry(err) {
		// Failed before anything was sent ("conn closed": a connection the
		// pool had not yet found broken).
		return true
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		(errors.As(err, &ne) && !ne.Timeout())
}

// connBroken reports whether err came from a connection that was
// established and then broke (as opposed to a failed attempt to connect):
// the server probably restarted, and every pooled connection to it is dead.
func connBroken(err error) bool {
	var ce *pgconn.ConnectError
	return connLost(err) && !errors.As(err, &ce)
}

// notSent reports whether err is known to have happened before any byte of
// the statements was written to the server.
func notSent(err error) bool {
	var ce *pgconn.ConnectError
	return pgconn.SafeToRetry(err) || errors.As(err, &ce)
}
