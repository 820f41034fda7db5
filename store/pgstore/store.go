package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nimbus-fs/nimbus/store"
)

// FirstID is the first id a fresh counter hands out, as in pebblestore:
// smaller ids are reserved for well-known rows (store.RootID is 1).
const FirstID uint64 = 16

// idConns is the size of AllocateIDs's own pool (Store.ids), besides
// Options.PoolSize.
const idConns = 2

// SchemaVersion is the layout of the tables this package reads and writes
// (schema.go). A database whose nimbus_schema row holds a larger version
// was written by a newer Nimbus and is refused; version 1 is upgraded in
// place (schemaV2 adds the function of commit expectations). Every server
// of a cluster must then run a Nimbus that knows version 2: an older one
// refuses the database, rather than lock the coherence rows as rows while
// the others take their guards.
const SchemaVersion = 2

// ErrSchema is wrapped by Open's error for a database of another schema.
var ErrSchema = errors.New("pgstore: unsupported schema")

// ErrSettings is wrapped by Open's error for a server whose settings would
// let an acknowledged commit be lost (synchronous_commit = off).
var ErrSettings = errors.New("pgstore: unsafe database settings")

// Store is a store.Store on one PostgreSQL database. It is safe for
// concurrent use, also by several processes on one database: everything it
// knows is in the database.
type Store struct {
	pool *pgxpool.Pool
	// ids is AllocateIDs's own pool of idConns connections: callers
	// allocate ids while their transaction holds a connection of pool, and
	// when every one is held so, an allocation from pool would wait for
	// them and they for it.
	ids     *pgxpool.Pool
	opts    Options
	reads   *coalescer
	log     *slog.Logger
	metrics *metrics
	target  string // user@host:port/database, for errors (no password)

	closed    atomic.Bool
	closeOnce sync.Once
	// held are the transactions that hold a connection (they took a lock),
	// with its server connection, so that Close can cancel what they wait
	// for and end them.
	mu   sync.Mutex
	held map[*txn]*pgconn.PgConn
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at connString (a libpq URL or key=value
// string, multi-host included), checks its settings, and creates the schema
// on first start. It fails within opts.ConnectTimeout when the database
// cannot be reached or refuses the role, and refuses a database of a newer
// schema (ErrSchema) or with synchronous_commit off (ErrSettings).
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pc, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgx's message names the part it could not parse and redacts the
		// password.
		return nil, fmt.Errorf("pgstore: open: bad connection string: %w", err)
	}
	cc := pc.ConnConfig
	target := fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
	pc.MaxConns = int32(opts.PoolSize)
	pc.MinConns = 0
	cc.ConnectTimeout = opts.ConnectTimeout
	cc.DialFunc = dialer(opts.ConnectTimeout, opts.DeadPeerTimeout)
	// Sent in the startup message: no round trip of their own.
	cc.RuntimeParams["lock_timeout"] = strconv.FormatInt(opts.LockTimeout.Milliseconds(), 10)
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.StatementTimeout.Milliseconds(), 10)
	// Every statement is prepared once per connection (pgx's statement
	// cache), and would by default be planned again on every execution
	// that the planner thinks a custom plan pays for (an array parameter
	// makes it think so): planning cost more server CPU than running a
	// stat's index scan. A generic plan is made once; ANALYZE (autovacuum
	// as the table grows) invalidates it. docs/STORE.md, "Speed".
	if cc.RuntimeParams["plan_cache_mode"] == "" {
		cc.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	// A generic plan is made on the table as it is then, and kept until
	// an ANALYZE: made on a new, nearly empty table (every new database,
	// every prepare), the key batch and the lock batch's join were
	// sequential scans with a hash join, and stayed so while the table
	// grew to tens of thousands of rows (autovacuum analyses at most once
	// a minute and only after 10% of the rows changed): a prepare of
	// 10,000 files read 320 million rows and took 3.5 times as long.
	// Every statement on nimbus_kv is by key or key range, which the
	// primary key serves at any size, so the planner is told not to
	// scan the table. docs/STORE.md, "Plans made on an empty table".
	if cc.RuntimeParams["enable_seqscan"] == "" {
		cc.RuntimeParams["enable_seqscan"] = "off"
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "nimbus"
	}
	// A cancelled context cancels the statement on the server (a cancel
	// request) rather than closing the socket: a backend waiting for a row
	// lock does not notice a closed socket, and would take the lock after
	// its client gave up and hold it until it next wrote to the socket.
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: opts.ConnectTimeout}
	}
	ic := pc.Copy()
	ic.MaxConns = idConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open %s: %w", target, err)
	}
	ids, err := pgxpool.NewWithConfig(ctx, ic)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open %s: %w", target, err)
	}
	s := &Store{pool: pool, ids: ids, opts: opts, log: log, metrics: newMetrics(), target: target, held: map[*txn]*pgconn.PgConn{}}
	s.reads = &coalescer{s: s, limit: opts.ReadConcurrency}
	if err := s.setup(ctx); err != nil {
		pool.Close()
		ids.Close()
		return nil, err
	}
	if err := s.metrics.register(opts.Registerer); err != nil {
		pool.Close()
		ids.Close()
		return nil, fmt.Errorf("pgstore: open %s: %w", target, err)
	}
	return s, nil
}

// setup connects once (bounded by ConnectTimeout), checks the settings that
// durability depends on, and creates or checks the schema.
func (s *Store) setup(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	c, err := s.pool.Acquire(cctx)
	if err != nil {
		// pgx's own connect timeout (the same ConnectTimeout) may fire
		// before cctx's.
		if (cctx.Err() != nil || pgconn.Timeout(err)) && ctx.Err() == nil {
			return fmt.Errorf("pgstore: open %s: no connection within %v: %w", s.target, s.opts.ConnectTimeout, err)
		}
		return fmt.Errorf("pgstore: open %s: %w", s.target, err)
	}
	defer c.Release()
	// The settings are read in a transaction of their own so that
	// SET LOCAL lifts statement_timeout for it alone: a short statement
	// timeout is meant for the operations' statements, and must not fail
	// a start on a busy machine. The connection goes back to the pool
	// with the session's settings unchanged.
	var syncCommit, fsync, version string
	err = pgx.BeginFunc(cctx, c.Conn(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(cctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		return tx.QueryRow(cctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync'), current_setting('server_version')").
			Scan(&syncCommit, &fsync, &version)
	})
	if err != nil {
		return fmt.Errorf("pgstore: open %s: reading settings: %w", s.target, err)
	}
	if syncCommit == "off" {
		return fmt.Errorf("%w: %s has synchronous_commit = off, so a commit could be acknowledged and then lost in a crash; set it to on (or local, remote_write, remote_apply) for the role or database: ALTER ROLE ... SET synchronous_commit = on", ErrSettings, s.target)
	}
	if fsync == "off" {
		s.log.Warn("the database runs with fsync = off: acknowledged commits can be lost if its machine crashes", "db", s.target)
	}
	sctx, cancel2 := context.WithTimeout(ctx, s.schemaTimeout())
	defer cancel2()
	v, err := ensureSchema(sctx, c.Conn(), !s.opts.NoCreate)
	if err != nil {
		return fmt.Errorf("pgstore: open %s: %w", s.target, err)
	}
	s.log.Info("metadata store on PostgreSQL", "db", s.target, "server_version", version, "schema_version", v,
		"synchronous_commit", syncCommit, "pool", s.opts.PoolSize, "lock_timeout", s.opts.LockTimeout)
	return nil
}

// schemaTimeout bounds the creation or check of the schema at Open. It is
// not the statement timeout (which ensureSchema lifts for its transaction):
// creating the schema takes longer than an operation's statement, the
// more so on a busy machine, but a start must not hang on a database that
// never answers.
func (s *Store) schemaTimeout() time.Duration {
	return max(s.opts.StatementTimeout, time.Minute)
}

// setupTimeout bounds a statement run outside any caller's context: the
// statement timeout, or a minute without one.
func (s *Store) setupTimeout() time.Duration {
	if s.opts.StatementTimeout > 0 {
		return s.opts.StatementTimeout
	}
	return time.Minute
}

// Begin starts a transaction. It sends nothing: the first locking read
// begins it on the server.
func (s *Store) Begin(ctx context.Context) (store.Txn, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("pgstore: begin: %w", store.ErrClosed)
	}
	return &txn{s: s}, nil
}

// allocateSQL adds n to a counter row (8 bytes, big-endian, the next free
// id), creating it at FirstID+n, and returns the new value. One autocommit
// statement: durable when it returns, and the row lock serialises
// concurrent callers, across processes too.
const allocateSQL = `INSERT INTO nimbus_kv AS t (key, value) VALUES ($1, int8send($2::int8 + $3::int8))
ON CONFLICT (key) DO UPDATE SET value = int8send(('x' || encode(t.value, 'hex'))::bit(64)::int8 + $3::int8)
RETURNING ('x' || encode(t.value, 'hex'))::bit(64)::int8`

// AllocateIDs reserves n ids from the counter row store.CounterKey(counter)
// in one autocommit statement (one round trip).
func (s *Store) AllocateIDs(ctx context.Context, counter string, n uint64) (uint64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("pgstore: allocate ids %q: %w", counter, store.ErrClosed)
	}
	if n == 0 || n > 1<<32 {
		return 0, fmt.Errorf("pgstore: allocate ids %q: n = %d, want 1 to 2^32", counter, n)
	}
	s.count(kindCounter)
	var next int64
	err := s.ids.QueryRow(ctx, allocateSQL, store.CounterKey(counter), int64(FirstID), int64(n)).Scan(&next)
	if err != nil {
		return 0, s.mapErr(ctx, "allocate ids "+strconv.Quote(counter), err, false)
	}
	return uint64(next) - n, nil
}

// Close ends every transaction (their next call fails with store.ErrClosed;
// a read waiting for a lock is cancelled) and closes the connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		held := make(map[*txn]*pgconn.PgConn, len(s.held))
		for t, c := range s.held {
			held[t] = c
		}
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.ConnectTimeout)
		defer cancel()
		for t, c := range held {
			_ = c.CancelRequest(ctx) // whatever it waits for; nothing if idle
			t.mu.Lock()
			if t.conn != nil {
				// Closing the connection ends the transaction on the
				// server and releases its locks.
				_ = t.conn.Conn().Close(ctx)
				t.releaseConn()
			}
			t.mu.Unlock()
		}
		s.pool.Close()
		s.ids.Close()
		s.metrics.unregister()
	})
	return nil
}

func (s *Store) count(kind string) {
	s.metrics.roundTrips.Inc()
	s.metrics.statements[kind].Inc()
}

// mapErr turns a database error into the seam's: lock errors into
// ErrLockBusy (the statement had NOWAIT) or ErrLockTimeout (it waited
// lock_timeout), deadlocks and serialization failures into ErrLockTimeout
// too (retryable: the transaction lost a race), a connection that could not
// be made or broke into store.ErrUnavailable (retryable: callers make sure
// nothing can have committed, see Commit), and anything after Close into
// ErrClosed.
func (s *Store) mapErr(ctx context.Context, op string, err error, noWait bool) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w", op, store.ErrClosed)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("pgstore: %s: %w", op, cerr)
	}
	if connLost(err) {
		s.metrics.connLost.Inc()
		if connBroken(err) {
			// The server probably restarted or failed over: its other
			// pooled connections are dead too. Drop them now (those in use
			// when released) rather than let each fail one operation.
			s.pool.Reset()
			s.ids.Reset()
		}
		return fmt.Errorf("pgstore: %s: %w: no working connection to %s (%w)", op, store.ErrUnavailable, s.target, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "55P03": // lock_not_available: NOWAIT, or lock_timeout expired
			s.metrics.retryable.Inc()
			if noWait {
				return fmt.Errorf("pgstore: %s: %w (%w)", op, store.ErrLockBusy, err)
			}
			return fmt.Errorf("pgstore: %s: %w after %v (%w)", op, store.ErrLockTimeout, s.opts.LockTimeout, err)
		case "23505": // unique_violation: only an Insert's row can raise it
			s.metrics.insertConflicts.Inc()
			s.log.Warn("a row inserted as new existed at commit; the operation is retried", "op", op, "detail", pe.Detail)
			return fmt.Errorf("pgstore: %s: %w (%w)", op, store.ErrConflict, err)
		case "40P01", "40001": // deadlock_detected, serialization_failure
			s.metrics.retryable.Inc()
			return fmt.Errorf("pgstore: %s: %w: the database aborted the transaction (%w)", op, store.ErrLockTimeout, err)
		case "57014": // query_canceled, not by the caller (its context is live): statement_timeout, or the read coalescer's own bound
			s.metrics.retryable.Inc()
			return fmt.Errorf("pgstore: %s: %w: the statement was cancelled before it finished (%w)", op, store.ErrUnavailable, err)
		}
	}
	if errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: %s: %w", op, store.ErrClosed)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}
