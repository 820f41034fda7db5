package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5"

	"github.com/nimbus-fs/nimbus/store"
)

// Guard locks (store.ReadReq.Guard). A row lock shared by many
// transactions at once is PostgreSQL's costliest lock: each FOR SHARE of a
// row already share-locked writes a new multixact holding every locker
// into the row, and WAL-logs it. The coherence layer's write floor is
// such a row: every write of every NameNode locks it shared. A guard is
// instead a transaction-scoped advisory lock on the key's hash (keyHash,
// the lock nimbus_lock takes for a key without a row), taken in the lock
// manager's memory; the key's value is then read by an unlocked statement
// of its own after every lock of the batch, so that it sees what a holder
// committed before it let go. The row is never locked: every locker of a
// guard key asks Guard (the seam's rule), and its writers hold the guard
// exclusive.

// guardRun is one statement of guard locks: every guard key of a batch
// with one mode and NoWait, in the order given.
type guardRun struct {
	excl, noWait bool
	hashes       []int64
	keys         [][]byte
}

// splitGuards returns reqs with every guard key turned into an unlocked
// read (a copy, when there is one), and the guard lock statements to run
// before them.
func splitGuards(reqs []store.ReadReq) ([]store.ReadReq, []guardRun) {
	if !slices.ContainsFunc(reqs, isGuard) {
		return reqs, nil
	}
	reqs = slices.Clone(reqs)
	var gs []guardRun
	for i, r := range reqs {
		if !isGuard(r) {
			continue
		}
		excl := r.Mode == store.Exclusive
		if n := len(gs); n == 0 || gs[n-1].excl != excl || gs[n-1].noWait != r.NoWait {
			gs = append(gs, guardRun{excl: excl, noWait: r.NoWait})
		}
		g := &gs[len(gs)-1]
		g.hashes = append(g.hashes, keyHash(r.Key))
		g.keys = append(g.keys, r.Key)
		reqs[i] = store.ReadReq{Key: r.Key}
	}
	return reqs, gs
}

func isGuard(r store.ReadReq) bool { return r.Guard && r.Mode != store.ReadCommitted }

// sql is the run's statement: one row per key, in order; the NoWait
// forms return whether each lock was had.
func (g guardRun) sql() string {
	switch {
	case g.excl && g.noWait:
		return "SELECT pg_try_advisory_xact_lock(h) FROM unnest($1::int8[]) AS u(h)"
	case g.excl:
		return "SELECT pg_advisory_xact_lock(h) FROM unnest($1::int8[]) AS u(h)"
	case g.noWait:
		return "SELECT pg_try_advisory_xact_lock_shared(h) FROM unnest($1::int8[]) AS u(h)"
	}
	return "SELECT pg_advisory_xact_lock_shared(h) FROM unnest($1::int8[]) AS u(h)"
}

// guardErr is a guard statement's failure: busy (a NoWait lock not had)
// or err.
type guardErr struct {
	g    guardRun
	key  []byte
	busy bool
	err  error
}

func (e guardErr) Error() string {
	if e.busy {
		return "guard busy"
	}
	return e.err.Error()
}

// take reads the run's result from the batch.
func (g guardRun) take(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return guardErr{g: g, key: g.keys[0], err: err}
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		if g.noWait {
			raw := rows.RawValues()
			// A bool in the binary format is one byte; text is "t" or "f".
			if len(raw) != 1 || len(raw[0]) != 1 || (raw[0][0] != 1 && raw[0][0] != 't') {
				key := g.keys[min(i, len(g.keys)-1)]
				rows.Close()
				return guardErr{g: g, key: key, busy: true}
			}
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return guardErr{g: g, key: g.keys[min(i, len(g.keys)-1)], err: err}
	}
	return nil
}

// An expectation of the commit (store.Expecter): nimbus_expect (schemaV2)
// checks them all in one statement at the head of the commit's batch, in
// the round trip of the writes, and an unmet one aborts the transaction.
type expectation struct {
	key, max []byte
	failed   func()
}

// Expect implements store.Expecter.
func (t *txn) Expect(key, max []byte, failed func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expects = append(t.expects, expectation{key: slices.Clone(key), max: slices.Clone(max), failed: failed})
}

func queueExpects(b *pgx.Batch, es []expectation) {
	keys, hashes, maxes := make([][]byte, len(es)), make([]int64, len(es)), make([][]byte, len(es))
	for i, e := range es {
		keys[i], hashes[i], maxes[i] = e.key, keyHash(e.key), e.max
	}
	b.Queue("SELECT nimbus_expect($1::bytea[], $2::int8[], $3::bytea[])", keys, hashes, maxes)
}

// expectErr maps the failure of nimbus_expect: an unmet expectation
// (NX001, its position in DETAIL) to store.ErrExpectation, after calling
// its failed; a guard held (55P03) to store.ErrLockBusy.
func (s *Store) expectErr(ctx context.Context, op string, err error, es []expectation) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "NX001" {
		i, perr := strconv.Atoi(pe.Detail)
		if perr != nil || i < 1 || i > len(es) {
			return fmt.Errorf("pgstore: %s: nimbus_expect named expectation %q of %d: %w", op, pe.Detail, len(es), err)
		}
		e := es[i-1]
		if e.failed != nil {
			e.failed()
		}
		s.metrics.retryable.Inc()
		return fmt.Errorf("pgstore: %s: %w: %s is missing or above %x", op, store.ErrExpectation, store.FormatKey(e.key), e.max)
	}
	return s.mapErr(ctx, op, err, true)
}
