package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nimbus-fs/nimbus/store"
)

// txn is a store.Txn. Until its first locking read it is nothing on the
// server: reads without locks and scans are autocommit statements on any
// pooled connection, which see the latest committed rows, as READ
// COMMITTED statements inside a transaction would. The first locking read
// takes a connection and sends BEGIN in the same batch; the connection and
// its locks are held until Commit or Rollback.
//
// Writes are buffered here, never sent before Commit: reads must not see
// them (the store's contract), and Commit sends them with COMMIT in one
// round trip.
type txn struct {
	s *Store
	// mu orders Close's ending of the transaction after an operation in
	// flight; the transaction itself is used by one goroutine at a time.
	mu   sync.Mutex
	conn *pgxpool.Conn // nil until the first locking read
	done bool
	ops  []write
	// ranges are the buffered range deletions (DeleteRange), each with the
	// number of ops buffered before it: those it deletes.
	ranges []rangeDel
	// cursorOpen: a long scan's cursor is open on conn (scanCursor).
	cursorOpen bool
	// expects are the commit's conditions (Expect, guard.go).
	expects []expectation
}

type write struct {
	key, value []byte // value nil: delete
	insert     bool   // the row must not exist (Insert)
}

// The statements of a read. A batch of several keys is one statement over
// an array; locking reads go through nimbus_lock (schema.go), which locks
// in the order given and locks keys that have no row too, and returns each
// row's position. An unlocked batch returns its rows' keys instead, matched
// to their positions here: `key = ANY($1)` is one index scan that
// PostgreSQL plans in microseconds, where a join of unnest($1) to the table
// (the positions coming from WITH ORDINALITY) was planned again on every
// execution (the planner prefers a custom plan that knows the array's
// length) and took the server about 2x the CPU per stat (docs/STORE.md,
// "Speed").
const (
	readOne  = "SELECT value FROM nimbus_kv WHERE key = $1"
	readMany = "SELECT key, value FROM nimbus_kv WHERE key = ANY($1::bytea[])"
	lockMany = "SELECT ord, value FROM nimbus_lock($1::bytea[], $2::int8[], $3, $4)"
)

const (
	upsertOne  = "INSERT INTO nimbus_kv (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
	upsertMany = "INSERT INTO nimbus_kv (key, value) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
	// insertOne and insertMany write rows that must be new (Insert): a row
	// that exists fails the statement (unique_violation), and so the commit.
	insertOne  = "INSERT INTO nimbus_kv (key, value) VALUES ($1, $2)"
	insertMany = "INSERT INTO nimbus_kv (key, value) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v)"
	deleteOne  = "DELETE FROM nimbus_kv WHERE key = $1"
	deleteMany = "DELETE FROM nimbus_kv WHERE key = ANY($1::bytea[])"
	// deleteRange is one range deletion (DeleteRange); several in a
	// transaction are several statements in its commit's one batch.
	deleteRange = "DELETE FROM nimbus_kv WHERE key >= $1 AND key < $2"

	scanBounded   = "SELECT key, value FROM nimbus_kv WHERE key >= $1 AND key < $2 ORDER BY key LIMIT $3"
	scanUnbounded = "SELECT key, value FROM nimbus_kv WHERE key >= $1 ORDER BY key LIMIT $2"
	// scanAfter pages on past the last key returned.
	scanAfterBounded   = "SELECT key, value FROM nimbus_kv WHERE key > $1 AND key < $2 ORDER BY key LIMIT $3"
	scanAfterUnbounded = "SELECT key, value FROM nimbus_kv WHERE key > $1 ORDER BY key LIMIT $2"
)

// check reports why the transaction cannot be used; t.mu is held.
func (t *txn) check(op string) error {
	if t.s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w", op, store.ErrClosed)
	}
	if t.done {
		return fmt.Errorf("pgstore: %s: %w", op, store.ErrTxnDone)
	}
	return nil
}

// run is a stretch of consecutive requests with one mode and NoWait: one
// statement.
type run struct {
	from, to int
	mode     store.Mode
	noWait   bool
}

func (r run) sql() string {
	switch {
	case r.mode != store.ReadCommitted:
		return lockMany
	case r.to-r.from == 1:
		return readOne
	}
	return readMany
}

// one reports whether the run's statement returns bare values (readOne).
func (r run) one() bool { return r.mode == store.ReadCommitted && r.to-r.from == 1 }

func (t *txn) Read(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.check("read"); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	// Guard keys are locked first, as advisory locks on their hashes
	// (guard.go), and then read as unlocked keys: after the locks, in the
	// statements of the unlocked rows below.
	var guards []guardRun
	reqs, guards = splitGuards(reqs)
	// Split the batch where the mode changes, keeping the order given: a
	// caller locks in key order, and so must the statements.
	var runsBuf [4]run
	runs := runsBuf[:0]
	locking := len(guards) > 0
	for i, r := range reqs {
		if r.Mode > store.Exclusive {
			return nil, fmt.Errorf("pgstore: read %s: unknown mode %d", store.FormatKey(r.Key), r.Mode)
		}
		noWait := r.NoWait && r.Mode != store.ReadCommitted
		locking = locking || r.Mode != store.ReadCommitted
		if n := len(runs); n > 0 && runs[n-1].mode == r.Mode && runs[n-1].noWait == noWait {
			runs[n-1].to = i + 1
			continue
		}
		runs = append(runs, run{from: i, to: i + 1, mode: r.Mode, noWait: noWait})
	}
	vals := make([][]byte, len(reqs))
	if !locking && t.conn == nil && len(runs) == 1 {
		// The common case of a stat: one autocommit statement, perhaps
		// shared with other reads waiting at the same time.
		return t.s.reads.read(ctx, reqs)
	}
	var q querier = t.s.pool
	b := &pgx.Batch{}
	if locking && t.conn == nil {
		if err := t.acquire(ctx); err != nil {
			return nil, err
		}
		b.Queue("BEGIN")
		t.s.metrics.statements[kindBegin].Inc()
	}
	if t.conn != nil {
		q = t.conn
	}
	// The unlocked rows are read after every lock is granted, in a statement
	// of their own (READ COMMITTED takes its snapshot at the statement's
	// start): read before a lock wait, an ancestor would be as it was
	// before the holder waited for committed, and a subtree flag set
	// meanwhile would go unseen. The seam asks for the values once the
	// locks are held; the order of the statements, not a round trip, gives it.
	slices.SortStableFunc(runs, func(a, b run) int {
		return cmp.Compare(boolInt(a.mode == store.ReadCommitted), boolInt(b.mode == store.ReadCommitted))
	})
	for _, g := range guards {
		b.Queue(g.sql(), g.hashes)
		t.s.metrics.statements[kindLock].Inc()
	}
	for _, r := range runs {
		queueRun(b, r, reqs)
		if r.mode == store.ReadCommitted {
			t.s.metrics.statements[kindRead].Inc()
		} else {
			t.s.metrics.statements[kindLock].Inc()
		}
	}
	t.s.metrics.roundTrips.Inc()
	br := q.SendBatch(ctx, b)
	err := func() error {
		if b.Len() > len(runs)+len(guards) { // BEGIN
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for _, g := range guards {
			if err := g.take(br); err != nil {
				return err
			}
		}
		for _, r := range runs {
			rows, err := br.Query()
			if err != nil {
				return runErr{r, err}
			}
			if err := scanRun(rows, r, reqs, vals); err != nil {
				return runErr{r, err}
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		noWait, first := false, reqs[0].Key
		switch e := err.(type) {
		case runErr:
			noWait, first, err = e.r.noWait, reqs[e.r.from].Key, e.err
		case guardErr:
			if e.busy {
				t.s.metrics.retryable.Inc()
				return nil, fmt.Errorf("pgstore: read %s: %w (its guard is held)", store.FormatKey(e.key), store.ErrLockBusy)
			}
			noWait, first, err = e.g.noWait, e.key, e.err
		}
		return nil, t.s.mapErr(ctx, "read "+store.FormatKey(first), err, noWait)
	}
	if err := t.rereadMissing(ctx, runs, reqs, vals); err != nil {
		return nil, err
	}
	if t.s.closed.Load() {
		// Close ended the transaction while the read was under way: it may
		// have been granted a lock its holder lost when Close ended it.
		return nil, fmt.Errorf("pgstore: read %s: %w", store.FormatKey(reqs[0].Key), store.ErrClosed)
	}
	return vals, nil
}

// rereadMissing reads again, after every lock of the batch is granted, the
// keys found without a row by a lock run that a later lock run followed.
// The seam returns the values once all the locks are held: an existing row
// locked in an early run cannot change while it is held, but a missing
// key's advisory lock does not keep out an inserter that holds the parent's
// row instead (as the namespace's inserters do), and the later run may have
// waited for just that inserter to commit. Seen with two NameNodes: a
// directory's key sorting after its new child's (ids from two NameNodes'
// ranges), mkdirs of the child on both, the second locked the missing
// child, waited for the directory's row, and created the child again.
//
// A key that has a row now is locked again, in its mode, as a row: the
// advisory lock taken while it was missing excludes only those who also
// found it missing, not a writer that locks the row itself (one that came
// after the inserter), so a row returned under the advisory lock alone
// would be a row two transactions hold "exclusive" at once. That was the
// corruption seen with read coalescing (docs/STORE.md): a directory created
// by one mkdirs -p, found missing and then present by two others, each of
// which added an entry to it from the same count, or created the same child
// again. The row lock is taken NOWAIT, out of key order as it is: a holder
// makes the read fail with ErrLockBusy and the operation start again, where
// waiting could deadlock with a holder waiting for this batch's later keys.
// A second round trip, only when such a key is missing.
func (t *txn) rereadMissing(ctx context.Context, runs []run, reqs []store.ReadReq, vals [][]byte) error {
	last := -1
	for i, r := range runs {
		if r.mode != store.ReadCommitted {
			last = i
		}
	}
	var again []store.ReadReq
	var at []int
	for _, r := range runs[:max(last, 0)] {
		if r.mode == store.ReadCommitted {
			continue
		}
		for i := r.from; i < r.to; i++ {
			// A LockOnly value is unspecified; an OwnLock value read
			// under its own lock is final.
			if vals[i] == nil && !reqs[i].LockOnly && !reqs[i].OwnLock {
				again = append(again, store.ReadReq{Key: reqs[i].Key, Mode: r.mode, NoWait: true})
				at = append(at, i)
			}
		}
	}
	if len(again) == 0 {
		return nil
	}
	// One statement per stretch of one mode, in one batch.
	b := &pgx.Batch{}
	var rr []run
	for i, r := range again {
		if n := len(rr); n > 0 && rr[n-1].mode == r.Mode {
			rr[n-1].to = i + 1
			continue
		}
		rr = append(rr, run{from: i, to: i + 1, mode: r.Mode, noWait: true})
	}
	for _, r := range rr {
		queueRun(b, r, again)
		t.s.metrics.statements[kindLock].Inc()
	}
	t.s.metrics.roundTrips.Inc()
	got := make([][]byte, len(again))
	br := t.conn.SendBatch(ctx, b)
	var err error
	for _, r := range rr {
		var rows pgx.Rows
		if rows, err = br.Query(); err != nil {
			break
		}
		if err = scanRun(rows, r, again, got); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.s.mapErr(ctx, "read "+store.FormatKey(again[0].Key), err, true)
	}
	for j, i := range at {
		vals[i] = got[j]
	}
	return nil
}

type runErr struct {
	r   run
	err error
}

func (e runErr) Error() string { return e.err.Error() }

// querier is a pool or a held connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func runArgs(r run, reqs []store.ReadReq) []any {
	if r.one() {
		return []any{reqs[r.from].Key}
	}
	keys := make([][]byte, r.to-r.from)
	for i := range keys {
		keys[i] = reqs[r.from+i].Key
	}
	if r.mode == store.ReadCommitted {
		return []any{keys}
	}
	hashes := make([]int64, len(keys))
	for i, k := range keys {
		hashes[i] = keyHash(k)
	}
	return []any{keys, hashes, r.mode == store.Exclusive, r.noWait}
}

// keyHash is the advisory lock of a key without a row: FNV-1a, 64 bits. Two
// keys with one hash only make their lockers wait for each other.
func keyHash(k []byte) int64 {
	h := uint64(14695981039346656037)
	for _, c := range k {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int64(h)
}

func queueRun(b *pgx.Batch, r run, reqs []store.ReadReq) {
	b.Queue(r.sql(), runArgs(r, reqs)...)
}

func readRun(ctx context.Context, q querier, r run, reqs []store.ReadReq, vals [][]byte) error {
	rows, err := q.Query(ctx, r.sql(), runArgs(r, reqs)...)
	if err != nil {
		return err
	}
	return scanRun(rows, r, reqs, vals)
}

// scanRun fills vals[r.from:r.to] from a run's rows and closes them.
func scanRun(rows pgx.Rows, r run, reqs []store.ReadReq, vals [][]byte) error {
	defer rows.Close()
	one := r.one()
	var pos keyPositions
	if r.mode == store.ReadCommitted && !one {
		pos = newKeyPositions(reqs[r.from:r.to])
	}
	for rows.Next() {
		raw := rows.RawValues()
		if one {
			vals[r.from] = append([]byte{}, raw[0]...)
			continue
		}
		if r.mode == store.ReadCommitted {
			found := false
			for i := range pos.of(raw[0]) {
				vals[r.from+i] = append([]byte{}, raw[1]...)
				found = true
			}
			if !found {
				return fmt.Errorf("row of key %s not asked for", store.FormatKey(raw[0]))
			}
			continue
		}
		if len(raw[0]) != 8 {
			return fmt.Errorf("ordinal of %d bytes", len(raw[0]))
		}
		i := r.from + int(binary.BigEndian.Uint64(raw[0])) - 1
		if i < r.from || i >= r.to {
			return fmt.Errorf("ordinal %d out of the batch", i-r.from+1)
		}
		vals[i] = append([]byte{}, raw[1]...)
	}
	return rows.Err()
}

// acquire takes a connection for the transaction's locks; t.mu is held.
func (t *txn) acquire(ctx context.Context) error {
	c, err := t.s.pool.Acquire(ctx)
	if err != nil {
		return t.s.mapErr(ctx, "begin", err, false)
	}
	t.s.mu.Lock()
	if t.s.closed.Load() {
		t.s.mu.Unlock()
		c.Release()
		return fmt.Errorf("pgstore: begin: %w", store.ErrClosed)
	}
	t.s.held[t] = c.Conn().PgConn()
	t.s.mu.Unlock()
	t.conn = c
	return nil
}

// releaseConn returns the held connection to the pool; t.mu is held. A
// connection still inside a transaction (an end that failed) is closed by
// the pool instead of reused.
func (t *txn) releaseConn() {
	t.s.mu.Lock()
	delete(t.s.held, t)
	t.s.mu.Unlock()
	t.conn.Release()
	t.conn = nil
}

func (t *txn) Scan(ctx context.Context, start, end []byte, limit int, fn func(k, v []byte) bool) error {
	if start == nil {
		start = []byte{} // nil would be NULL
	}
	op := "scan " + store.FormatKey(start)
	page := t.s.opts.ScanPage
	// First one statement: a scan that finds at most a page (a directory
	// listing, a file's blocks) is one round trip and one snapshot. A
	// transaction that holds a connection uses it: were it to take a second
	// one, transactions holding every connection of the pool could wait for
	// each other's.
	n := page + 1
	if limit > 0 && limit <= page {
		n = limit
	}
	t.mu.Lock()
	if err := t.check("scan"); err != nil {
		t.mu.Unlock()
		return err
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		t.mu.Unlock()
		return nil
	}
	var q querier = t.s.pool
	held := t.conn != nil
	if held {
		q = t.conn
	}
	t.s.count(kindScan)
	rows, err := scanPage(ctx, q, scanBounded, scanUnbounded, start, end, n)
	t.mu.Unlock()
	if err != nil {
		return t.s.mapErr(ctx, op, err, false)
	}
	if len(rows.keys) < n || n == limit {
		rows.each(fn)
		return nil
	}
	// A longer range: read it again, page by page, from one snapshot.
	t.mu.Lock()
	cursor := held && !t.cursorOpen
	t.cursorOpen = t.cursorOpen || cursor
	t.mu.Unlock()
	if cursor {
		defer func() {
			t.mu.Lock()
			t.cursorOpen = false
			t.mu.Unlock()
		}()
		return t.scanCursor(ctx, op, start, end, limit, fn)
	}
	return t.s.scanSnapshot(ctx, start, end, limit, fn)
}

// The cursor of a long scan in a transaction holding a connection. One name:
// the statements are prepared once per connection. A scan started by fn
// while one is open reads through scanSnapshot instead.
const (
	declareBounded   = "DECLARE nimbus_scan NO SCROLL CURSOR FOR SELECT key, value FROM nimbus_kv WHERE key >= $1 AND key < $2 ORDER BY key"
	declareUnbounded = "DECLARE nimbus_scan NO SCROLL CURSOR FOR SELECT key, value FROM nimbus_kv WHERE key >= $1 ORDER BY key"
	closeCursor      = "CLOSE nimbus_scan"
)

// scanCursor pages through a range with a cursor on the transaction's own
// connection: a cursor reads from the snapshot taken when it is declared,
// where each READ COMMITTED statement would take a new one.
func (t *txn) scanCursor(ctx context.Context, op string, start, end []byte, limit int, fn func(k, v []byte) bool) error {
	decl, args := declareBounded, []any{start, end}
	if end == nil {
		decl, args = declareUnbounded, args[:1]
	}
	page := t.s.opts.ScanPage
	fetch := "FETCH " + strconv.Itoa(page) + " FROM nimbus_scan"
	done := 0
	for first := true; ; first = false {
		t.mu.Lock()
		if err := t.check("scan"); err != nil {
			t.mu.Unlock()
			return err
		}
		if t.conn == nil { // fn ended the transaction
			t.mu.Unlock()
			return fmt.Errorf("pgstore: %s: %w", op, store.ErrTxnDone)
		}
		var rows pageRows
		var err error
		t.s.count(kindScan)
		if first {
			b := &pgx.Batch{}
			b.Queue(decl, args...)
			b.Queue(fetch)
			br := t.conn.SendBatch(ctx, b)
			if _, err = br.Exec(); err == nil {
				var r pgx.Rows
				if r, err = br.Query(); err == nil {
					rows, err = collect(r)
				}
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
		} else {
			var r pgx.Rows
			if r, err = t.conn.Query(ctx, fetch); err == nil {
				rows, err = collect(r)
			}
		}
		t.mu.Unlock()
		if err != nil {
			return t.s.mapErr(ctx, op, err, false)
		}
		got := len(rows.keys)
		if limit > 0 && done+got > limit {
			rows.keys, rows.vals = rows.keys[:limit-done], rows.vals[:limit-done]
		}
		if !rows.each(fn) {
			break
		}
		done += len(rows.keys)
		if got < page || (limit > 0 && done >= limit) {
			break
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn == nil || t.s.closed.Load() {
		return nil // the cursor ended with its transaction
	}
	t.s.count(kindScan)
	if _, err := t.conn.Exec(ctx, closeCursor); err != nil {
		return t.s.mapErr(ctx, op, err, false)
	}
	return nil
}

func (s *Store) scanSnapshot(ctx context.Context, start, end []byte, limit int, fn func(k, v []byte) bool) error {
	op := "scan " + store.FormatKey(start)
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.mapErr(ctx, op, err, false)
	}
	defer c.Release() // closed instead of reused if still in the transaction
	page := s.opts.ScanPage
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	s.metrics.statements[kindBegin].Inc()
	first := true
	after := start
	done := 0
	for {
		n := page
		if limit > 0 && limit-done < n {
			n = limit - done
		}
		var rows pageRows
		if first {
			s.metrics.statements[kindScan].Inc()
			s.metrics.roundTrips.Inc()
			b.Queue(pickScan(end, scanBounded, scanUnbounded), scanArgs(after, end, n)...)
			br := c.SendBatch(ctx, b)
			_, err = br.Exec()
			if err == nil {
				var r pgx.Rows
				r, err = br.Query()
				if err == nil {
					rows, err = collect(r)
				}
			}
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			first = false
		} else {
			if s.closed.Load() {
				return fmt.Errorf("pgstore: %s: %w", op, store.ErrClosed)
			}
			s.count(kindScan)
			rows, err = scanPage(ctx, c, scanAfterBounded, scanAfterUnbounded, after, end, n)
		}
		if err != nil {
			return s.mapErr(ctx, op, err, false)
		}
		if !rows.each(fn) {
			break
		}
		done += len(rows.keys)
		if len(rows.keys) < n || (limit > 0 && done >= limit) {
			break
		}
		after = bytes.Clone(rows.keys[len(rows.keys)-1])
	}
	s.count(kindCommit)
	if _, err := c.Exec(ctx, "COMMIT"); err != nil {
		return s.mapErr(ctx, op, err, false)
	}
	return nil
}

func pickScan(end []byte, bounded, unbounded string) string {
	if end == nil {
		return unbounded
	}
	return bounded
}

func scanArgs(from, end []byte, n int) []any {
	if end == nil {
		return []any{from, n}
	}
	return []any{from, end, n}
}

func scanPage(ctx context.Context, q querier, bounded, unbounded string, from, end []byte, n int) (pageRows, error) {
	r, err := q.Query(ctx, pickScan(end, bounded, unbounded), scanArgs(from, end, n)...)
	if err != nil {
		return pageRows{}, err
	}
	return collect(r)
}

// pageRows are one page of a scan, copied out of the connection's buffer
// into one slab, so that fn may use the transaction while it runs.
type pageRows struct {
	keys, vals [][]byte
}

func collect(r pgx.Rows) (pageRows, error) {
	defer r.Close()
	var p pageRows
	var slab []byte
	// A FETCH's columns are not known when pgx prepares it, so they come
	// back as text (bytea in hex): decode those.
	text := false
	for _, f := range r.FieldDescriptions() {
		text = text || f.Format == pgx.TextFormatCode
	}
	var kv [2][]byte
	for r.Next() {
		raw := r.RawValues()
		if text {
			if err := r.Scan(&kv[0], &kv[1]); err != nil {
				return p, err
			}
			raw = kv[:]
		}
		if len(slab)+len(raw[0])+len(raw[1]) > cap(slab) {
			slab = make([]byte, 0, max(64<<10, len(raw[0])+len(raw[1])))
		}
		kAt := len(slab)
		slab = append(slab, raw[0]...)
		vAt := len(slab)
		slab = append(slab, raw[1]...)
		p.keys = append(p.keys, slab[kAt:vAt:vAt])
		p.vals = append(p.vals, slab[vAt:len(slab):len(slab)])
	}
	return p, r.Err()
}

// each calls fn for every row; false when fn stopped.
func (p pageRows) each(fn func(k, v []byte) bool) bool {
	for i := range p.keys {
		if !fn(p.keys[i], p.vals[i]) {
			return false
		}
	}
	return true
}

func (t *txn) Put(key, value []byte) {
	t.ops = append(t.ops, write{key: bytes.Clone(key), value: append([]byte{}, value...)})
}

func (t *txn) Delete(key []byte) {
	t.ops = append(t.ops, write{key: bytes.Clone(key)})
}

var _ store.Inserter = (*txn)(nil)

// Insert implements store.Inserter: the row goes in a plain INSERT, which
// fails the commit if a row has the key. The namespace inserts the rows of
// the inodes it creates: its lock on the parent's row is what keeps a
// second creator out, and should that ever not hold, the second creation
// fails and is retried instead of overwriting the first (and orphaning what
// was created below it).
func (t *txn) Insert(key, value []byte) {
	t.ops = append(t.ops, write{key: bytes.Clone(key), value: append([]byte{}, value...), insert: true})
}

var _ store.RangeDeleter = (*txn)(nil)

// rangeDel is a buffered DeleteRange: [start, end), after the first
// before ops.
type rangeDel struct {
	start, end []byte
	before     int
}

// DeleteRange buffers one DELETE of the key range, sent with the other
// writes at Commit: one statement however many rows it removes (a
// directory's entries are one contiguous range of the primary key's
// B-tree). pgstore caches no rows, so nothing is listed at the call.
func (t *txn) DeleteRange(ctx context.Context, start, end []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.check("delete range"); err != nil {
		return err
	}
	if bytes.Compare(end, start) <= 0 {
		return nil
	}
	t.ranges = append(t.ranges, rangeDel{start: bytes.Clone(start), end: bytes.Clone(end), before: len(t.ops)})
	return nil
}

// dropDeletedByRange removes the buffered writes that a later range
// deletion covers: the range's statement, sent before the point writes,
// removes their rows. The writes left were made after every range that
// covers them, and so are applied after it.
func (t *txn) dropDeletedByRange() {
	if len(t.ranges) == 0 {
		return
	}
	kept := t.ops[:0]
	for i, w := range t.ops {
		deleted := false
		// ranges are in the order buffered, so those buffered after op i
		// (before > i) are a suffix: only they can delete it.
		first := sort.Search(len(t.ranges), func(j int) bool { return t.ranges[j].before > i })
		for _, r := range t.ranges[first:] {
			if bytes.Compare(w.key, r.start) >= 0 && bytes.Compare(w.key, r.end) < 0 {
				deleted = true
				break
			}
		}
		if !deleted {
			kept = append(kept, w)
		}
	}
	t.ops = kept
}

// Commit sends the buffered writes and COMMIT (and BEGIN, if no locking read
// sent it) in one batch: one round trip. PostgreSQL acknowledges COMMIT once
// its WAL record is flushed (synchronous_commit, checked at Open), and makes
// the transaction visible to others only after that, so a transaction that
// read this one's rows reads durable rows.
func (t *txn) Commit(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.check("commit"); err != nil {
		return err
	}
	t.done = true
	if len(t.ops) == 0 && len(t.ranges) == 0 {
		if t.conn == nil {
			return nil
		}
		// Nothing written: only locks (a read under a shared lock, a
		// listing under its directory's). A row lock gives the transaction
		// an id and WAL records, and COMMIT would wait for them to be
		// flushed: a WAL flush per uncached read, which made reads of files
		// over PostgreSQL as slow as creates. ROLLBACK releases the same
		// locks and flushes nothing; what was read stays read.
		t.s.count(kindAbort)
		_, err := t.conn.Exec(ctx, "ROLLBACK")
		t.endConn(err)
		if err != nil {
			return t.s.mapErr(ctx, "commit", err, false)
		}
		return nil
	}
	start := time.Now()
	b := &pgx.Batch{}
	if t.conn == nil {
		if err := t.acquire(ctx); err != nil {
			return err
		}
		b.Queue("BEGIN")
		t.s.metrics.statements[kindBegin].Inc()
	}
	expectAt := -1
	if len(t.expects) > 0 {
		expectAt = b.Len()
		queueExpects(b, t.expects)
		t.s.metrics.statements[kindLock].Inc()
	}
	first := t.queueWrites(b)
	b.Queue("COMMIT")
	t.s.metrics.statements[kindCommit].Inc()
	t.s.metrics.roundTrips.Inc()
	br := t.conn.SendBatch(ctx, b)
	var err error
	failedAt := b.Len() // the statement whose result was an error; Len: none
	for i := range b.Len() {
		if _, err = br.Exec(); err != nil {
			failedAt = i
			break
		}
	}
	cerr := br.Close()
	if err == nil && cerr != nil {
		// COMMIT's own result came back: committed, whatever broke after.
		t.s.log.Warn("connection broke after a commit was acknowledged; dropping it", "err", cerr)
		t.endConn(cerr)
		t.s.metrics.commitSeconds.Observe(time.Since(start).Seconds())
		return nil
	}
	t.endConn(err)
	if err != nil {
		op := "commit " + store.FormatKey(first)
		if commitUnknown(err, failedAt, b.Len()-1) && ctx.Err() == nil && !t.s.closed.Load() {
			t.s.metrics.commitUnknown.Inc()
			t.s.log.Error("connection lost during COMMIT: the transaction may or may not have committed", "op", op, "db", t.s.target, "err", err)
			return fmt.Errorf("pgstore: %s: %w: the connection to %s broke after COMMIT was sent (%w)", op, ErrCommitUnknown, t.s.target, err)
		}
		if failedAt == expectAt {
			return t.s.expectErr(ctx, op, err, t.expects)
		}
		return t.s.mapErr(ctx, op, err, false)
	}
	t.s.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// commitUnknown reports whether a commit batch that failed with err, at the
// result of statement failedAt, may have committed (commitAt is COMMIT's
// place). Nothing sent: no. An error answered by the server for a statement
// before COMMIT: no, the server rolls back what follows an error, and a
// backend that ended (FATAL) never read COMMIT. An ERROR for COMMIT itself:
// no. A FATAL for COMMIT (the server terminating the backend while it waits
// for a synchronous standby, after its local commit) or a broken connection
// once the batch was sent: yes, the server may have committed and lost only
// the answer.
func commitUnknown(err error, failedAt, commitAt int) bool {
	if notSent(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return failedAt >= commitAt && pe.Severity != "ERROR"
	}
	return connLost(err)
}

// queueWrites queues the buffered writes, the last of each key winning, in
// key order (so that concurrent commits that write the same rows without
// having locked them take the rows' locks in one order); it returns the
// first key, for errors.
func (t *txn) queueWrites(b *pgx.Batch) []byte {
	t.dropDeletedByRange()
	for _, r := range t.ranges {
		b.Queue(deleteRange, r.start, r.end)
		t.s.metrics.statements[kindRange].Inc()
	}
	if len(t.ops) == 0 {
		return t.ranges[0].start
	}
	slices.SortStableFunc(t.ops, func(a, b write) int { return bytes.Compare(a.key, b.key) })
	var putK, putV, insK, insV, delK [][]byte
	deleted := false // an earlier write of this key deleted it
	for i, w := range t.ops {
		if i+1 < len(t.ops) && bytes.Equal(w.key, t.ops[i+1].key) {
			deleted = deleted || w.value == nil
			continue // a later write of the key wins
		}
		again := deleted // an insert of a row this transaction deleted: the row is there until the commit
		deleted = false
		switch {
		case w.value == nil:
			delK = append(delK, w.key)
		case w.insert && !again:
			insK, insV = append(insK, w.key), append(insV, w.value)
		default:
			putK, putV = append(putK, w.key), append(putV, w.value)
		}
	}
	switch len(insK) {
	case 0:
	case 1:
		b.Queue(insertOne, insK[0], insV[0])
	default:
		b.Queue(insertMany, insK, insV)
	}
	switch len(putK) {
	case 0:
	case 1:
		b.Queue(upsertOne, putK[0], putV[0])
	default:
		b.Queue(upsertMany, putK, putV)
	}
	switch len(delK) {
	case 0:
	case 1:
		b.Queue(deleteOne, delK[0])
	default:
		b.Queue(deleteMany, delK)
	}
	if len(insK) > 0 {
		t.s.metrics.statements[kindWrite].Inc()
	}
	if len(putK) > 0 {
		t.s.metrics.statements[kindWrite].Inc()
	}
	if len(delK) > 0 {
		t.s.metrics.statements[kindWrite].Inc()
	}
	return t.ops[0].key
}

// endConn gives the connection back after COMMIT or ROLLBACK; after an
// error the server may still be inside the (failed) transaction, so it is
// rolled back first, or the pool drops the connection.
func (t *txn) endConn(err error) {
	if t.conn == nil {
		return
	}
	if err != nil && !t.conn.Conn().IsClosed() && connLost(err) {
		// Nothing to roll back on a broken connection, and a ROLLBACK
		// could wait on a dead socket: close it, which the pool then drops.
		ctx, cancel := context.WithTimeout(context.Background(), t.s.opts.ConnectTimeout)
		_ = t.conn.Conn().Close(ctx)
		cancel()
	}
	if err != nil && !t.conn.Conn().IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), t.s.opts.ConnectTimeout)
		t.s.count(kindAbort)
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	t.releaseConn()
}

// Rollback ends the transaction on the server if it began there (one round
// trip) and drops the buffered writes.
func (t *txn) Rollback() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.done = true
	t.ops, t.ranges = nil, nil
	if t.conn == nil {
		return
	}
	if t.conn.Conn().IsClosed() {
		// The connection broke (its error was the operation's); the
		// server ended the transaction with it.
		t.releaseConn()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.s.opts.ConnectTimeout)
	defer cancel()
	t.s.count(kindAbort)
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		// The pool closes a connection left inside a transaction.
		t.s.log.Warn("rollback failed; dropping the connection", "err", err)
	}
	t.releaseConn()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keyPositions finds the positions of a returned row's key among a run's
// requests: by comparing with each of a short run (a path of a few
// components, the common case), through a map for a long one.
type keyPositions struct {
	reqs []store.ReadReq
	m    map[string][]int
}

// keyPositionsMap is the run length from which keyPositions builds a map.
const keyPositionsMap = 32

func newKeyPositions(reqs []store.ReadReq) keyPositions {
	p := keyPositions{reqs: reqs}
	if len(reqs) >= keyPositionsMap {
		p.m = make(map[string][]int, len(reqs))
		for i, r := range reqs {
			p.m[string(r.Key)] = append(p.m[string(r.Key)], i)
		}
	}
	return p
}

// of yields every position in the run whose key is k (a key asked for twice
// gets its value twice).
func (p keyPositions) of(k []byte) iter.Seq[int] {
	return func(yield func(int) bool) {
		if p.m != nil {
			for _, i := range p.m[string(k)] {
				if !yield(i) {
					return
				}
			}
			return
		}
		for i, r := range p.reqs {
			if bytes.Equal(r.Key, k) && !yield(i) {
				return
			}
		}
	}
}
