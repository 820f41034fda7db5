package pebblestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/lockmgr"
)

// FirstID is the first id a fresh counter hands out. Smaller ids are reserved
// for well-known rows (store.RootID is 1).
const FirstID uint64 = 16

// Store is a store.Store on one Pebble database directory. It is safe for
// concurrent use. Only one process may open a directory at a time (Pebble
// holds a file lock).
type Store struct {
	dir     string
	db      *pebble.DB
	locks   *lockmgr.Manager
	marks   store.KeyMarks // KeyMarks (process.go)
	log     *slog.Logger
	opts    Options
	metrics *metrics

	// mu orders Close after every in-flight use of db: operations hold it
	// shared while they touch db, Close exclusively.
	mu           sync.RWMutex
	closed       bool
	closeOnce    sync.Once   // closes stop
	closedFailed atomic.Bool // Close ran on a failed store

	ids struct {
		sync.Mutex
		counters map[string]*counter
	}

	// cache is Pebble's block cache, valid while db is open (the database
	// holds its reference).
	cache *pebble.Cache
	hold  cacheHold // cachehold.go

	rows  *rowCache  // nil when Options.RowCacheEntries is 0
	scans *scanCache // nil when Options.ScanCacheBytes is 0

	// unsynced counts commits whose batch may be visible but not yet
	// synced (early lock release, txn.go).
	unsynced    atomic.Int64
	pendingKeys *unsyncedKeys // the keys of those commits
	commits     atomic.Uint64 // transactions that wrote and synced
	walSyncs    atomic.Uint64 // counted by walCountingFS

	fail     failure       // failstop.go
	logLimit *logLimiter   // Pebble's repeated errors (logger.go)
	id       *identity     // identity.go
	stop     chan struct{} // closed by Close: stops the background checks
	// dirWatch is the kernel's watch of the directory (identity_linux.go);
	// nil when there is none.
	dirWatch *dirWatch
	bg       sync.WaitGroup

	scanFlush struct { // scanwaste.go
		last      atomic.Int64  // unix ns of the last flush a scan asked for
		writtenAt atomic.Uint64 // WAL bytes in when that flush started
	}
}

// counter is the in-memory position of one id counter: ids in [next, limit)
// are durably reserved and not yet handed out.
type counter struct{ next, limit uint64 }

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir; OpenContext with a
// context that never ends.
func Open(dir string, opts Options) (*Store, error) {
	return OpenContext(context.Background(), dir, opts)
}

// OpenContext opens (creating if needed) the store in dir. It fails when
// the store fails while opening (the flush of the replayed log finds the
// disk full: Pebble's open would retry it for ever) and when ctx ends first
// (a SIGTERM of a server that is starting on a disk that does not answer):
// then Pebble's open, which cannot be interrupted, is left to finish on its
// own, and a database it opens after all is closed.
func OpenContext(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lcfg := lockmgr.DefaultConfig()
	lcfg.MaxWait, lcfg.Shards, lcfg.Logger, lcfg.Registerer = opts.LockWaitMax, opts.LockShards, log, opts.Registerer
	locks, err := lockmgr.New(lcfg)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	s := &Store{dir: dir, locks: locks, log: log, opts: opts, cache: cache, rows: newRowCache(opts.RowCacheEntries), scans: newScanCache(opts.ScanCacheBytes), pendingKeys: newUnsyncedKeys(),
		stop: make(chan struct{}), logLimit: newLogLimiter(logRepeatEvery, time.Now)}
	s.fail.ch = make(chan struct{})
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	// The identity and the metrics first: Pebble's background goroutines,
	// started by Open, may report an error at once. A read-only store
	// (offline fsck) changes nothing in the directory, so it neither makes
	// it nor writes an identity, and checks none (s.id stays nil: a nil
	// identity checks nothing): it serves no writes.
	if !opts.ReadOnly {
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			locks.Unregister()
			return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
		}
		if s.id, err = openIdentity(fs, dir); err != nil {
			locks.Unregister()
			return nil, err
		}
	}
	s.metrics = newMetrics(s)
	if opts.FS == nil && !opts.ReadOnly { // a directory of the operating system's
		// Before Pebble opens: the removals Pebble makes while opening are
		// known as its own.
		if s.dirWatch, err = s.watchDirEvents(); err != nil {
			// Not fatal: the periodic check remains.
			log.Warn("cannot watch the store's directory; relying on the periodic identity check", "dir", dir, "err", err)
			s.dirWatch = nil
		}
	}
	db, err := s.openPebble(ctx, pebbleOptions(opts, fs, cache, log, s))
	if err != nil {
		s.dirWatch.close()
		locks.Unregister()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s.db = db
	s.ids.counters = map[string]*counter{}
	if err := s.metrics.register(opts.Registerer); err != nil {
		s.dirWatch.close()
		locks.Unregister()
		_ = db.Close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	if opts.IdentityCheckInterval > 0 && !opts.ReadOnly {
		s.bg.Add(1)
		go s.watchIdentity(opts.IdentityCheckInterval)
	}
	s.dirWatch.start(s)
	if s.id != nil {
		log.Info("store opened", "dir", dir, "engine", "pebble", "identity", string(s.id.id))
	} else {
		log.Info("store opened read-only", "dir", dir, "engine", "pebble")
	}
	return s, nil
}

// logRepeatEvery is how often one kind of repeated error is logged at most.
const logRepeatEvery = 10 * time.Second

// openPebble runs pebble.Open until it returns, the store fails (Pebble
// opens a database only after flushing the log it replayed, and retries a
// flush that failed for ever), or ctx ends.
func (s *Store) openPebble(ctx context.Context, po *pebble.Options) (*pebble.DB, error) {
	type opened struct {
		db  *pebble.DB
		err error
	}
	ch := make(chan opened, 1)
	var abandoned atomic.Bool
	go func() {
		db, err := pebble.Open(s.dir, po)
		if err == nil && abandoned.Load() && s.failed() == nil {
			_ = db.Close()
		}
		ch <- opened{db, err}
	}()
	select {
	case r := <-ch:
		if r.err == nil {
			if err := s.failed(); err != nil { // a log it could not create, say
				return nil, err
			}
		}
		return r.db, r.err
	case <-s.fail.ch:
		abandoned.Store(true)
		return nil, s.failed()
	case <-ctx.Done():
		abandoned.Store(true)
		s.log.Error("store open abandoned", "dir", s.dir, "err", ctx.Err())
		return nil, ctx.Err()
	}
}

// pebbleOptions are chosen for small rows: the newest table format
// (columnar blocks, which compress shared key prefixes well), Snappy on the
// upper levels and zstd on the bottom two, where almost all data lives
// (docs/STORE.md has the measured footprint).
func pebbleOptions(opts Options, fs vfs.FS, cache *pebble.Cache, log *slog.Logger, s *Store) *pebble.Options {
	if opts.ReadOnly {
		fs = readOnlyLockFS{fs}
	}
	po := &pebble.Options{
		FS: walCountingFS{FS: fs, syncs: &s.walSyncs, prefill: opts.WALPrefill,
			onError: func(op string, err error) { s.failStop(op, err) },
			failed:  func() bool { return s.fail.err.Load() != nil },
			watch:   s.dirWatch},
		ReadOnly:           opts.ReadOnly,
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{log: log, fatal: func(err error) { s.failStop("pebble", err) }, limit: s.logLimit},
		EventListener:      s.eventListener(),
	}
	po.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionBalanced })
	// Bloom filters on every level: a point read of a row that lives in one
	// level skips the tables of all the others (10 bits per key, ~1% false
	// positives).
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.EnsureDefaults()
	return po
}

// acquire guards a use of db; release must follow when it returns nil. It
// fails at once, before touching the lock, on a failed store: a failed store's
// readers may be stuck in Pebble for good.
func (s *Store) acquire() error {
	if err := s.failed(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Store) release() { s.mu.RUnlock() }

// Begin starts a transaction; it fails with store.ErrClosed after Close.
func (s *Store) Begin(ctx context.Context) (store.Txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	s.release()
	return &txn{s: s}, nil
}

// AllocateIDs reserves n consecutive ids of counter and returns the first.
// The first id of a fresh counter is FirstID. It is durable when it returns
// (see Options.IDPrefetch).
func (s *Store) AllocateIDs(ctx context.Context, name string, n uint64) (uint64, error) {
	if n == 0 {
		return 0, fmt.Errorf("pebblestore: allocate ids %q: n = 0", name)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	s.ids.Lock()
	defer s.ids.Unlock()
	c, err := s.counterLocked(name)
	if err != nil {
		return 0, err
	}
	if c.next+n < c.next {
		return 0, fmt.Errorf("pebblestore: allocate ids %q: counter overflow", name)
	}
	if c.next+n > c.limit {
		limit := c.next + n + s.opts.IDPrefetch
		if limit < c.next { // overflow of the prefetch only
			limit = c.next + n
		}
		if err := s.writeCounter(name, limit); err != nil {
			return 0, err
		}
		c.limit = limit
	}
	first := c.next
	c.next += n
	return first, nil
}

// counterLocked returns the loaded counter; s.ids is held.
func (s *Store) counterLocked(name string) (*counter, error) {
	if c := s.ids.counters[name]; c != nil {
		return c, nil
	}
	v, closer, err := s.db.Get(store.CounterKey(name))
	next := FirstID
	switch {
	case err == pebble.ErrNotFound:
	case err != nil:
		return nil, fmt.Errorf("pebblestore: read counter %q: %w", name, err)
	default:
		if len(v) != 8 {
			closer.Close()
			return nil, fmt.Errorf("%w: counter %q has %d bytes", store.ErrCorrupt, name, len(v))
		}
		next = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	c := &counter{next: next, limit: next}
	s.ids.counters[name] = c
	return c, nil
}

func (s *Store) writeCounter(name string, v uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	if err := s.setSync(store.CounterKey(name), b[:]); err != nil {
		return s.failStop(fmt.Sprintf("write counter %q", name), err)
	}
	return nil
}

// Close records the exact position of every id counter, then closes the
// database. Transactions still open fail with store.ErrClosed afterwards;
// Close waits for operations in flight. A second Close returns nil.
//
// A failed store (failstop.go) is not closed: operations may be stuck in
// Pebble for good, and Pebble's commit pipeline may be wedged, so Close
// neither waits for them nor writes; it stops the store's own goroutines and
// returns the fatal error at once. The files are left as a crash leaves them,
// and the next Open recovers them.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop); s.dirWatch.close() })
	if err := s.failed(); err != nil {
		return s.closeFailed(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.bg.Wait()
	s.ids.Lock()
	var firstErr error
	for name, c := range s.ids.counters {
		if c.next != c.limit {
			if err := s.writeCounter(name, c.next); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	s.ids.Unlock()
	if err := s.failed(); err != nil { // writing the counters failed the store
		s.metrics.unregister()
		s.locks.Unregister()
		return fmt.Errorf("pebblestore: close %s: %w", s.dir, err)
	}
	if err := s.db.Close(); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("pebblestore: close %s: %w", s.dir, err)
	}
	s.metrics.unregister()
	s.locks.Unregister()
	s.log.Info("store closed", "dir", s.dir)
	return firstErr
}

// closeFailed is Close on a failed store; only the first call reports.
func (s *Store) closeFailed(err error) error {
	if !s.closedFailed.CompareAndSwap(false, true) {
		return nil
	}
	s.bg.Wait()
	s.metrics.unregister()
	s.locks.Unregister()
	s.log.Error("store failed: left open (the next start recovers it)", "dir", s.dir, "err", err.Error())
	return fmt.Errorf("pebblestore: close %s: %w", s.dir, err)
}

// Stats are cumulative counters since Open.
type Stats struct {
	Commits   uint64 // transactions that wrote and synced
	WALSyncs  uint64 // fsyncs of the write-ahead log
	DiskUsage uint64 // bytes of every file of the database
}

// Stats returns the store's counters; zero after Close.
func (s *Store) Stats() Stats {
	if s.acquire() != nil {
		return Stats{}
	}
	defer s.release()
	m := s.db.Metrics()
	return Stats{Commits: s.commits.Load(), WALSyncs: s.walSyncs.Load(), DiskUsage: m.DiskSpaceUsage()}
}

// Compact flushes the memtable and compacts the whole key space, so that
// disk usage reflects the data rather than the write history. Used by tests,
// benchmarks and offline tools; it is slow on a big store.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("pebblestore: flush: %w", err)
	}
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff, 0xff}, true); err != nil {
		return fmt.Errorf("pebblestore: compact: %w", err)
	}
	return nil
}
