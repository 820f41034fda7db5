package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
)

var bg = context.Background()

func open(t *testing.T, dbURL string, reg prometheus.Registerer) *Store {
	t.Helper()
	opts := DefaultOptions()
	opts.Registerer = reg
	st, err := Open(bg, dbURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestSchemaVersionRefused(t *testing.T) {
	db := pgtest.DB(t)
	open(t, db, nil).Close()
	open(t, db, nil).Close() // a second start finds version 1
	pgtest.Exec(t, db, "UPDATE nimbus_schema SET version = 7")
	_, err := Open(bg, db, DefaultOptions())
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "schema version 7") {
		t.Fatalf("Open of a database with schema version 7: %v, want ErrSchema naming the version", err)
	}
}

func TestSynchronousCommitOffRefused(t *testing.T) {
	db := pgtest.DB(t)
	sep := "?"
	if strings.Contains(db, "?") {
		sep = "&"
	}
	_, err := Open(bg, db+sep+"options=-c%20synchronous_commit%3Doff", DefaultOptions())
	if !errors.Is(err, ErrSettings) || !strings.Contains(err.Error(), "synchronous_commit = off") {
		t.Fatalf("Open with synchronous_commit off: %v, want ErrSettings", err)
	}
}

// TestOpenErrors: what an operator gets wrong fails Open quickly, with an
// error that says what.
func TestOpenErrors(t *testing.T) {
	db := pgtest.DB(t)
	u, _ := url.Parse(db)
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	refusedAddr := refused.Addr().String()
	refused.Close()

	role := *u
	role.User = url.User("no_such_role")
	cases := []struct {
		name, url, want string
	}{
		{"bad URL", "postgres://x@127.0.0.1:notaport/db", "bad connection string"},
		{"refused", "postgres://postgres@" + refusedAddr + "/db?sslmode=disable", "connect"},
		{"silent", "postgres://postgres@" + silent.Addr().String() + "/db?sslmode=disable", "no connection within"},
		{"missing role", role.String(), `role "no_such_role" does not exist`},
		{"missing database", strings.Replace(db, u.Path, "/no_such_db", 1), `database "no_such_db" does not exist`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.ConnectTimeout = time.Second
			start := time.Now()
			st, err := Open(bg, tc.url, opts)
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Open took %v to fail, want about the connect timeout (1s)", d)
			}
		})
	}
}

func roundTrips(st *Store) float64 { return testutil.ToFloat64(st.metrics.roundTrips) }

// TestRoundTrips: a transaction that only reads without locks is one
// statement per read and nothing else (no BEGIN, no COMMIT); a transaction
// that locks and writes is its locking read (with BEGIN) and its commit
// (the writes with COMMIT): two.
func TestRoundTrips(t *testing.T) {
	st := open(t, pgtest.DB(t), prometheus.NewRegistry())
	ks := func(mode store.Mode, keys ...string) []store.ReadReq {
		rs := make([]store.ReadReq, len(keys))
		for i, k := range keys {
			rs[i] = store.ReadReq{Key: []byte(k), Mode: mode}
		}
		return rs
	}
	txn, _ := st.Begin(bg)
	txn.Put([]byte("a"), []byte("1"))
	txn.Put([]byte("b"), []byte("2"))
	txn.Delete([]byte("c"))
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time, every statement is prepared on every connection used
		before := roundTrips(st)
		txn, _ = st.Begin(bg)
		vals, err := txn.Read(bg, ks(store.ReadCommitted, "a", "b", "c"))
		if err != nil || string(vals[0]) != "1" || vals[1] == nil || vals[2] != nil {
			t.Fatalf("read = %q, %v", vals, err)
		}
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
		if n := roundTrips(st) - before; n != 1 {
			t.Errorf("read-committed transaction: %v round trips, want 1", n)
		}

		before = roundTrips(st)
		txn, _ = st.Begin(bg)
		rs := append(ks(store.ReadCommitted, "a"), ks(store.Exclusive, "b", "new")...)
		if _, err := txn.Read(bg, rs); err != nil {
			t.Fatal(err)
		}
		txn.Put([]byte("new"), []byte("x"))
		txn.Put([]byte("b"), []byte("3"))
		txn.Delete([]byte("gone"))
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
		if n := roundTrips(st) - before; n != 2 {
			t.Errorf("lock-and-write transaction: %v round trips, want 2", n)
		}
	}
	txn, _ = st.Begin(bg)
	defer txn.Rollback()
	vals, err := txn.Read(bg, ks(store.Shared, "b", "new"))
	if err != nil || string(vals[0]) != "3" || string(vals[1]) != "x" {
		t.Fatalf("after the commits: %q, %v", vals, err)
	}
}

// TestLongScanOneSnapshot: a scan longer than a page reads every page from
// the snapshot of its first, in key order, and honours its limit.
func TestLongScanPages(t *testing.T) {
	opts := DefaultOptions()
	opts.ScanPage = 10
	st, err := Open(bg, pgtest.DB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	txn, _ := st.Begin(bg)
	for i := range 95 {
		txn.Put([]byte{'r', byte(i)}, []byte{byte(i)})
	}
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, 10, 11, 50, 95, 200} {
		txn, _ := st.Begin(bg)
		n := 0
		err := txn.Scan(bg, []byte("r"), nil, limit, func(k, v []byte) bool {
			if k[1] != byte(n) || v[0] != byte(n) {
				t.Fatalf("limit %d: row %d is %q=%q", limit, n, k, v)
			}
			n++
			return true
		})
		txn.Rollback()
		want := 95
		if limit > 0 && limit < want {
			want = limit
		}
		if err != nil || n != want {
			t.Errorf("limit %d: %d rows, %v; want %d", limit, n, err, want)
		}
	}
}

// TestScanInLockingTxn: a transaction that holds locks (and so a
// connection) scans on that connection, also past a page (a cursor, one
// snapshot), while other transactions change the range and while fn reads
// through the same transaction; with every connection of the pool held by
// such transactions, their scans still finish.
func TestScanInLockingTxn(t *testing.T) {
	opts := DefaultOptions()
	opts.ScanPage = 10
	opts.PoolSize = 2
	db := pgtest.DB(t)
	st, err := Open(bg, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other := open(t, db, nil) // a second server on the database: the writer
	w, _ := st.Begin(bg)
	for i := range 95 {
		w.Put([]byte{'r', byte(i)}, []byte("v0"))
	}
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	a, _ := st.Begin(ctx)
	defer a.Rollback()
	b, _ := st.Begin(ctx)
	defer b.Rollback()
	for _, txn := range []store.Txn{a, b} { // both connections held
		if _, err := txn.Read(ctx, []store.ReadReq{{Key: []byte("lock"), Mode: store.Shared}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, 25} {
		w, _ := other.Begin(ctx)
		for i := range 95 {
			w.Put([]byte{'r', byte(i)}, []byte("v0"))
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		n := 0
		err := a.Scan(ctx, []byte("r"), []byte("s"), limit, func(k, v []byte) bool {
			if string(v) != "v0" || k[1] != byte(n) {
				t.Errorf("limit %d: row %d = %q=%q, want the snapshot's v0", limit, n, k, v)
			}
			if n == 5 {
				w, _ := other.Begin(ctx)
				for i := range 95 {
					w.Put([]byte{'r', byte(i)}, []byte("v1"))
				}
				if err := w.Commit(ctx); err != nil {
					t.Error(err)
				}
			}
			if n == 15 {
				// fn uses the transaction between pages ...
				if vals, err := a.Read(ctx, []store.ReadReq{{Key: []byte{'r', 90}}}); err != nil || vals[0] == nil {
					t.Errorf("read inside the scan: %q, %v", vals, err)
				}
				// ... and b, holding the other connection, scans too.
				m := 0
				if err := b.Scan(ctx, []byte("r"), []byte("s"), 0, func(k, v []byte) bool { m++; return true }); err != nil || m != 95 {
					t.Errorf("nested scan of the other transaction: %d rows, %v", m, err)
				}
			}
			n++
			return true
		})
		want := 95
		if limit > 0 {
			want = limit
		}
		if err != nil || n != want {
			t.Fatalf("limit %d: %d rows, %v; want %d", limit, n, err, want)
		}
	}
}

// TestAllocateWhilePoolHeld: ids are allocated while operations hold row
// locks (and so connections); with the whole pool held, an allocation
// still gets through.
func TestAllocateWhilePoolHeld(t *testing.T) {
	opts := DefaultOptions()
	opts.PoolSize = 1
	st, err := Open(bg, pgtest.DB(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	txn, _ := st.Begin(bg)
	defer txn.Rollback()
	if _, err := txn.Read(bg, []store.ReadReq{{Key: []byte("p"), Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	first, err := st.AllocateIDs(ctx, store.CounterInode, 10)
	if err != nil || first < FirstID {
		t.Fatalf("AllocateIDs with the pool held: %d, %v", first, err)
	}
	txn.Put([]byte("p"), []byte("x"))
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
}

// lockedAgainst begins a transaction that holds key locked exclusive, and
// returns a second one, whose lock of key will wait for the first; both
// are rolled back when the test ends.
func lockedAgainst(t *testing.T, st *Store, key []byte) store.Txn {
	t.Helper()
	holder, _ := st.Begin(bg)
	t.Cleanup(holder.Rollback)
	if _, err := holder.Read(bg, []store.ReadReq{{Key: key, Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	waiter, _ := st.Begin(bg)
	t.Cleanup(waiter.Rollback)
	return waiter
}

// TestCloseEndsWaits: Close cancels a read waiting for a lock (it fails
// with ErrClosed at once, not after the lock timeout) and ends the
// transactions that hold locks.
func TestCloseEndsWaits(t *testing.T) {
	db := pgtest.DB(t)
	st := open(t, db, nil)
	waiter := lockedAgainst(t, st, []byte("k"))
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Exclusive}})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it wait; if it has not started, it fails with ErrClosed anyway
	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("waiting read after Close: %v, want ErrClosed", err)
	}
	t.Logf("Close and the waiter's end: %v", time.Since(start))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close and the waiter's end took %v (lock timeout %v)", d, DefaultOptions().LockTimeout)
	}
	// The holder's lock went with its connection. The server releases it
	// when the holder's backend exits, which follows the closed connection
	// by a moment: the lock is asked for with a wait (bounded by the lock
	// timeout), not NoWait, which raced that exit (55P03 in CI).
	other := open(t, db, nil)
	txn, _ := other.Begin(bg)
	defer txn.Rollback()
	if _, err := txn.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Exclusive}}); err != nil {
		t.Fatalf("lock after Close: %v", err)
	}
}

// TestDeadlockRetryable: two transactions locking two keys in opposite
// orders (what callers must not do, but NoWait misuse or a bug could): the
// database's deadlock detector aborts one, and its error is retryable;
// the other goes on.
func TestDeadlockRetryable(t *testing.T) {
	st := open(t, pgtest.DB(t), nil)
	txn, _ := st.Begin(bg)
	txn.Put([]byte("k1"), []byte("1"))
	txn.Put([]byte("k2"), []byte("2"))
	if err := txn.Commit(bg); err != nil {
		t.Fatal(err)
	}
	lock := func(txn store.Txn, k string) error {
		_, err := txn.Read(bg, []store.ReadReq{{Key: []byte(k), Mode: store.Exclusive}})
		return err
	}
	a, _ := st.Begin(bg)
	defer a.Rollback()
	b, _ := st.Begin(bg)
	defer b.Rollback()
	if err := lock(a, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := lock(b, "k2"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() {
		err := lock(a, "k2")
		if err != nil {
			a.Rollback()
		}
		errs <- err
	}()
	go func() {
		err := lock(b, "k1")
		if err != nil {
			b.Rollback()
		}
		errs <- err
	}()
	e1, e2 := <-errs, <-errs
	failed := e1
	if failed == nil {
		failed = e2
	}
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("want exactly one of the two to fail: %v, %v", e1, e2)
	}
	if !store.IsRetryable(failed) || !strings.Contains(failed.Error(), "deadlock") {
		t.Fatalf("deadlock victim's error: %v, want retryable and naming the deadlock", failed)
	}
}

// TestInsertOfExistingRowConflicts: a row inserted as new (store.Inserter)
// that another transaction created meanwhile fails the whole commit with
// the retryable store.ErrConflict and writes nothing; it never overwrites.
func TestInsertOfExistingRowConflicts(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := open(t, pgtest.DB(t), reg)
	put := func(k, v string) {
		t.Helper()
		txn, _ := st.Begin(bg)
		txn.Put([]byte(k), []byte(v))
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	get := func(k string) string {
		t.Helper()
		txn, _ := st.Begin(bg)
		defer txn.Rollback()
		v, err := txn.Read(bg, []store.ReadReq{{Key: []byte(k)}})
		if err != nil {
			t.Fatal(err)
		}
		return string(v[0])
	}
	put("parent", "0")

	// Two inserts of one new key, as two creators whose locks failed to
	// exclude each other would send: the second fails.
	a, _ := st.Begin(bg)
	b, _ := st.Begin(bg)
	for _, txn := range []store.Txn{a, b} {
		txn.(store.Inserter).Insert([]byte("child"), []byte("first"))
	}
	a.Put([]byte("parent"), []byte("1"))
	if err := a.Commit(bg); err != nil {
		t.Fatal(err)
	}
	b.(store.Inserter).Insert([]byte("child"), []byte("second"))
	b.Put([]byte("parent"), []byte("2"))
	b.Put([]byte("other"), []byte("x"))
	err := b.Commit(bg)
	if !errors.Is(err, store.ErrConflict) || !store.IsRetryable(err) {
		t.Fatalf("second insert of a key: %v, want a retryable store.ErrConflict", err)
	}
	if got := get("child"); got != "first" {
		t.Fatalf("child = %q after the refused insert, want the first one's", got)
	}
	if got, other := get("parent"), get("other"); got != "1" || other != "" {
		t.Fatalf("parent = %q, other = %q: the refused commit wrote something", got, other)
	}
	if n := testutil.ToFloat64(st.metrics.insertConflicts); n != 1 {
		t.Fatalf("insert_conflicts_total = %v, want 1", n)
	}

	// A key deleted and inserted again in one transaction, and an insert
	// that a later Put of the key replaces, are ordinary writes.
	c, _ := st.Begin(bg)
	c.Delete([]byte("child"))
	c.(store.Inserter).Insert([]byte("child"), []byte("again"))
	c.(store.Inserter).Insert([]byte("parent"), []byte("3"))
	c.Put([]byte("parent"), []byte("4"))
	c.(store.Inserter).Insert([]byte("new1"), []byte("n1"))
	c.(store.Inserter).Insert([]byte("new2"), []byte("n2"))
	if err := c.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if ch, p, n1, n2 := get("child"), get("parent"), get("new1"), get("new2"); ch != "again" || p != "4" || n1 != "n1" || n2 != "n2" {
		t.Fatalf("child, parent, new1, new2 = %q, %q, %q, %q; want again, 4, n1, n2", ch, p, n1, n2)
	}
}

// TestRowFoundAfterItsLockRunIsLocked: a key found missing by an early lock
// run of a batch, and created by a transaction that a later run of the
// batch waited for, is returned locked as a row, not held only by the
// advisory lock taken while it was missing: a writer that then locks the
// row must not get it while the batch's transaction holds it. (Without the
// row lock, two transactions each held a new directory "exclusive" and
// each added an entry from the same count.)
func TestRowFoundAfterItsLockRunIsLocked(t *testing.T) {
	db := pgtest.DB(t)
	st := open(t, db, nil)
	k1, k2 := []byte("k1-created"), []byte("k2-parent")
	put := func(k, v []byte) {
		t.Helper()
		txn, _ := st.Begin(bg)
		txn.Put(k, v)
		if err := txn.Commit(bg); err != nil {
			t.Fatal(err)
		}
	}
	put(k2, []byte("p"))

	// The creator holds k2 and inserts k1.
	c, _ := st.Begin(bg)
	defer c.Rollback()
	if _, err := c.Read(bg, []store.ReadReq{{Key: k2, Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	c.(store.Inserter).Insert(k1, []byte("new"))

	// x locks k1 (missing: advisory) in one run, then k2 shared in the
	// next, which waits for the creator.
	x, _ := st.Begin(bg)
	defer x.Rollback()
	type result struct {
		vals [][]byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		vals, err := x.Read(bg, []store.ReadReq{{Key: k1, Mode: store.Exclusive}, {Key: k2, Mode: store.Shared}})
		done <- result{vals, err}
	}()
	waitForLockWait(t, db)
	if err := c.Commit(bg); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err) // no one else locks k1 here: not even ErrLockBusy
	}
	if string(res.vals[0]) != "new" || string(res.vals[1]) != "p" {
		t.Fatalf("read %q, %q; want the row created meanwhile and the parent", res.vals[0], res.vals[1])
	}
	// x holds k1 as a row now: another writer of the row must wait.
	y, _ := st.Begin(bg)
	defer y.Rollback()
	_, err := y.Read(bg, []store.ReadReq{{Key: k1, Mode: store.Exclusive, NoWait: true}})
	if !errors.Is(err, store.ErrLockBusy) {
		t.Fatalf("locking the row that another transaction read exclusive: %v, want ErrLockBusy", err)
	}
}

// waitForLockWait waits until some backend of the database waits for a
// lock.
func waitForLockWait(t *testing.T, db string) {
	t.Helper()
	conn, err := pgx.Connect(bg, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := conn.QueryRow(bg, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no transaction waited for a lock within 10 s")
}

// TestGenericPlansUseTheKey: with the store's session settings, the generic
// plans of the statements on nimbus_kv, made while the table is nearly
// empty (a new database) and kept as it grows, go by the primary key, not
// by a scan of the table. Without enable_seqscan off the key batch and the
// lock batch's join were sequential scans here.
func TestGenericPlansUseTheKey(t *testing.T) {
	st := open(t, pgtest.DB(t), nil)
	w, err := st.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		w.Put([]byte{byte(i)}, []byte("v"))
	}
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	c, err := st.pool.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	var mode string
	if err := c.QueryRow(bg, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode %q, %v; want the store's force_generic_plan", mode, err)
	}
	for i, q := range []struct{ sql, params, args string }{
		{readOne, "bytea", `'\x01'`},
		{readMany, "bytea[]", `ARRAY['\x01'::bytea]`},
		{"SELECT r.ord, t.value FROM unnest($1::bytea[]) WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key ORDER BY r.ord FOR UPDATE OF t",
			"bytea[]", `ARRAY['\x01'::bytea]`}, // nimbus_lock's batch
		{deleteMany, "bytea[]", `ARRAY['\x01'::bytea]`},
		{scanBounded, "bytea, bytea, int8", `'\x00', '\x10', 10`},
		{scanUnbounded, "bytea, int8", `'\x00', 10`},
		{deleteRange, "bytea, bytea", `'\x00', '\x01'`},
	} {
		name := fmt.Sprintf("q%d", i)
		if _, err := c.Exec(bg, fmt.Sprintf("PREPARE %s(%s) AS %s", name, q.params, q.sql)); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		rows, err := c.Query(bg, fmt.Sprintf("EXPLAIN EXECUTE %s(%s)", name, q.args), pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan on nimbus_kv") || !strings.Contains(plan, "nimbus_kv_pkey") {
			t.Errorf("%s: the generic plan does not go by the key:\n%s", q.sql, plan)
		}
	}
}

// TestLockOnlyTxnRollsBack: a transaction that locked rows and wrote
// nothing ends with ROLLBACK, not COMMIT (a COMMIT would wait for its lock
// records' WAL to be flushed: one flush per uncached read of a file), and
// its locks are released all the same; a transaction that writes commits.
func TestLockOnlyTxnRollsBack(t *testing.T) {
	st := open(t, pgtest.DB(t), prometheus.NewRegistry())
	stmt := func(kind string) float64 { return testutil.ToFloat64(st.metrics.statements[kind]) }
	w, _ := st.Begin(bg)
	w.Put([]byte("f"), []byte("1"))
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	commits, rollbacks := stmt(kindCommit), stmt(kindAbort)
	r, _ := st.Begin(bg)
	vals, err := r.Read(bg, []store.ReadReq{{Key: []byte("f"), Mode: store.Shared}, {Key: []byte("missing"), Mode: store.Shared}})
	if err != nil || string(vals[0]) != "1" || vals[1] != nil {
		t.Fatalf("shared read = %q, %v", vals, err)
	}
	if err := r.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if c, rb := stmt(kindCommit)-commits, stmt(kindAbort)-rollbacks; c != 0 || rb != 1 {
		t.Fatalf("a lock-only transaction sent %v COMMIT and %v ROLLBACK; want 0 and 1", c, rb)
	}
	// Its locks are gone: a writer takes both keys at once without waiting.
	w, _ = st.Begin(bg)
	if _, err := w.Read(bg, []store.ReadReq{{Key: []byte("f"), Mode: store.Exclusive, NoWait: true}, {Key: []byte("missing"), Mode: store.Exclusive, NoWait: true}}); err != nil {
		t.Fatalf("locks held after the lock-only transaction ended: %v", err)
	}
	w.Put([]byte("f"), []byte("2"))
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if c := stmt(kindCommit) - commits; c != 1 {
		t.Fatalf("a writing transaction sent %v COMMIT; want 1", c)
	}
}

// TestStatementCancelledIsRetryable: a statement the database cancelled
// while the caller still waited (statement_timeout here; the read
// coalescer's own bound under load) is ErrUnavailable, retryable, not an
// internal error: a benchmark met it as a failed stat.
//
// Only the waiting read runs under the short statement timeout: the
// store that writes and holds the key has the default one, and Open
// lifts the timeout for its schema transaction, so a busy machine cannot
// cut a statement other than the lock wait under test.
func TestStatementCancelledIsRetryable(t *testing.T) {
	db := pgtest.DB(t)
	holderStore := open(t, db, nil)
	opts := DefaultOptions()
	opts.StatementTimeout, opts.LockTimeout = 200*time.Millisecond, 10*time.Second
	st, err := Open(bg, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, _ := holderStore.Begin(bg)
	w.Put([]byte("k"), []byte("v"))
	if err := w.Commit(bg); err != nil {
		t.Fatal(err)
	}
	holder, _ := holderStore.Begin(bg)
	defer holder.Rollback()
	if _, err := holder.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Exclusive}}); err != nil {
		t.Fatal(err)
	}
	waiter, _ := st.Begin(bg)
	defer waiter.Rollback()
	_, err = waiter.Read(bg, []store.ReadReq{{Key: []byte("k"), Mode: store.Exclusive}})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "57014") {
		t.Fatalf("a lock wait cut by statement_timeout: %v, want store.ErrUnavailable (SQLSTATE 57014)", err)
	}
}

// TestOpenNotBoundByStatementTimeout: Open creates the schema on a fresh
// database under a statement timeout of 1 ms, shorter than creating the
// schema takes: the schema transaction is not bound by it.
func TestOpenNotBoundByStatementTimeout(t *testing.T) {
	db := pgtest.DB(t)
	opts := DefaultOptions()
	opts.StatementTimeout = time.Millisecond
	st, err := Open(bg, db, opts)
	if err != nil {
		t.Fatalf("Open on a fresh database with a 1 ms statement timeout: %v", err)
	}
	defer st.Close()
	check := open(t, db, nil)
	w, _ := check.Begin(bg)
	defer w.Rollback()
	if vals, err := w.Read(bg, []store.ReadReq{{Key: []byte("k")}}); err != nil || vals[0] != nil {
		t.Fatalf("reading the schema Open created: %v %q", err, vals)
	}
}
