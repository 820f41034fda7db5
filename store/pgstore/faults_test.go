package pgstore

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
)

// TestTerminatedConnectionsRetryable: when the server ends the store's
// connections (as a restart does), the operation under way fails with a
// retryable store.ErrUnavailable, and the next one works at once: the
// broken pooled connections were dropped, not handed out again.
func TestTerminatedConnectionsRetryable(t *testing.T) {
	db := pgtest.DB(t)
	st := open(t, db, nil)
	key := []byte("\x01fault")
	// Fill the pool with idle connections, and hold one in a transaction.
	for i := 0; i < 4; i++ {
		tx, _ := st.Begin(bg)
		if _, err := tx.Read(bg, []store.ReadReq{{Key: key}}); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
	}
	held, _ := st.Begin(bg)
	if _, err := held.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")

	_, err := held.Read(bg, []store.ReadReq{{Key: []byte("\x01other"), Mode: store.Shared}})
	if !errors.Is(err, store.ErrUnavailable) || !store.IsRetryable(err) {
		t.Fatalf("read in a transaction whose connection was terminated: %v, want retryable store.ErrUnavailable", err)
	}
	held.Rollback()

	// One attempt each, as a caller's retry would make: no dead connection
	// may come back from the pool.
	tx, _ := st.Begin(bg)
	if _, err := tx.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
		t.Fatalf("first locking read after the connections were terminated: %v", err)
	}
	tx.Put(key, []byte("v"))
	if err := tx.Commit(bg); err != nil {
		t.Fatalf("first commit after the connections were terminated: %v", err)
	}
	for i := 0; i < 4; i++ {
		tx, _ = st.Begin(bg)
		vals, err := tx.Read(bg, []store.ReadReq{{Key: key}})
		if err != nil || string(vals[0]) != "v" {
			t.Fatalf("read %d after the connections were terminated: %q, %v", i, vals, err)
		}
		tx.Rollback()
	}
	if _, err := st.AllocateIDs(bg, "fault", 1); err != nil {
		t.Fatalf("allocate ids after the connections were terminated: %v", err)
	}
}

// TestCommitOnTerminatedConnection: a commit that takes an idle pooled
// connection the server has already ended reads the server's goodbye
// (FATAL, admin_shutdown) in place of its BEGIN's answer: nothing
// committed, and the error is retryable; the retry commits.
func TestCommitOnTerminatedConnection(t *testing.T) {
	db := pgtest.DB(t)
	st := open(t, db, nil)
	tx, _ := st.Begin(bg)
	if _, err := tx.Read(bg, []store.ReadReq{{Key: []byte("\x01k"), Mode: store.Shared}}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback() // one idle connection in the pool
	pgtest.Exec(t, db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	tx, _ = st.Begin(bg)
	tx.Put([]byte("\x01k"), []byte("v"))
	err := tx.Commit(bg)
	if !store.IsRetryable(err) {
		t.Fatalf("commit on a terminated connection: %v, want a retryable error", err)
	}
	tx, _ = st.Begin(bg)
	tx.Put([]byte("\x01k"), []byte("v"))
	if err := tx.Commit(bg); err != nil {
		t.Fatalf("the retried commit: %v", err)
	}
	tx, _ = st.Begin(bg)
	defer tx.Rollback()
	if vals, err := tx.Read(bg, []store.ReadReq{{Key: []byte("\x01k")}}); err != nil || string(vals[0]) != "v" {
		t.Fatalf("read after the retried commit: %q, %v", vals, err)
	}
}

// TestCommitUnknown: which failures of a commit batch may have committed.
func TestCommitUnknown(t *testing.T) {
	fatal := &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
	errorAt := &pgconn.PgError{Severity: "ERROR", Code: "23505"}
	for _, c := range []struct {
		err                error
		failedAt, commitAt int
		want               bool
	}{
		{&pgconn.ConnectError{}, 0, 2, false}, // never sent
		{errorAt, 1, 2, false},                // a write failed: COMMIT rolls back
		{fatal, 1, 2, false},                  // the backend ended before COMMIT
		{errorAt, 2, 2, false},                // COMMIT itself failed
		{fatal, 2, 2, true},                   // terminated in COMMIT (a synchronous-standby wait)
		{io.ErrUnexpectedEOF, 0, 2, true},     // sent, then the connection broke
		{fmt.Errorf("x: %w", io.EOF), 2, 2, true},
		{errors.New("something else"), 0, 2, false},
	} {
		if got := commitUnknown(c.err, c.failedAt, c.commitAt); got != c.want {
			t.Errorf("commitUnknown(%v, %d, %d) = %v, want %v", c.err, c.failedAt, c.commitAt, got, c.want)
		}
	}
}
