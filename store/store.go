package store

import (
	"context"
	"errors"
	"fmt"
)

// Mode is how a transaction reads a key.
type Mode uint8

const (
	// ReadCommitted reads the latest committed value and takes no lock
	// (HopsFS reads path ancestors this way).
	ReadCommitted Mode = iota
	// Shared locks the key against exclusive holders until the transaction ends.
	Shared
	// Exclusive locks the key against every other holder until the transaction ends.
	Exclusive
)

func (m Mode) String() string {
	switch m {
	case ReadCommitted:
		return "read-committed"
	case Shared:
		return "shared"
	case Exclusive:
		return "exclusive"
	}
	return "mode?"
}

// ReadReq asks for one key in one mode.
type ReadReq struct {
	Key  []byte
	Mode Mode
	// NoWait fails the whole Read with ErrLockBusy instead of waiting when the
	// lock is held in a conflicting mode (PostgreSQL's NOWAIT). Callers use it
	// for locks taken out of the global key order, so that they cannot deadlock.
	NoWait bool
	// LockOnly: the caller needs the lock (Mode Shared or Exclusive), not
	// the value: an implementation may skip reading the key, and the value
	// returned for it is unspecified (nil, or the row). A write that takes
	// the lock of its request record to exclude a resubmission, knowing
	// that a first submission has no record, does not pay for a read
	// (namespace/once.go).
	LockOnly bool
	// OwnLock: every transaction that writes the key takes this key's
	// lock (Shared or Exclusive) before it writes it, so the value read
	// under the lock is final, a missing key's included. An
	// implementation that reads a batch's missing keys again once its
	// later locks are granted (pgstore: an inserter may hold another
	// key's lock instead) need not read this one again. A request record
	// is such a key (namespace/once.go).
	OwnLock bool
	// Guard: the lock (Mode Shared or Exclusive) is on the key's name, not
	// on its row, and the value is read once it is held (the latest
	// committed). For rows that every write locks shared, a cluster-wide
	// guard such as the coherence layer's write floor: a row lock shared
	// by many transactions is costly where locking a row writes to it
	// (PostgreSQL records each sharer in the row: a new multixact per
	// locker), a name lock is not. Every transaction that locks such a key
	// must ask Guard, in every mode: a guard lock and a row lock on one
	// key do not exclude each other. Writes to the key are ordinary
	// writes, made under an Exclusive guard.
	Guard bool
}

// Expecter is an optional capability of a Txn (found by type assertion):
// conditions that its Commit checks itself, in the same round trip as the
// writes, instead of a read before it. Expect(key, max, failed) makes the
// commit write nothing and fail with ErrExpectation unless key's row
// exists and its value is at most max in byte order, read under the key's
// guard (ReadReq.Guard) taken shared, NoWait (held: ErrLockBusy), held to
// the end of the commit; failed, if not nil, is called when it is this
// expectation that does not hold. A transaction that writes nothing checks
// nothing. For fixed-width big-endian counters, byte order is numeric
// order.
type Expecter interface {
	Expect(key, max []byte, failed func())
}

// Errors of the store. Implementations wrap them; callers test with errors.Is.
var (
	// ErrExpectation: an expectation of the commit (Expecter) did not hold;
	// nothing was written, and the transaction may run again.
	ErrExpectation = fmt.Errorf("%w: store: a condition of the commit did not hold", ErrUnavailable)
	// ErrLockBusy: a NoWait lock was held by another transaction.
	ErrLockBusy = errors.New("store: lock busy")
	// ErrLockTimeout: a lock could not be had within the store's lock wait
	// limit (a safety net against deadlocks from out-of-order locking).
	ErrLockTimeout = errors.New("store: lock wait timeout")
	// ErrTxnDone: the transaction was already committed or rolled back.
	ErrTxnDone = errors.New("store: transaction already finished")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrFailed: the store met a storage error it cannot recover from (a
	// failed write or sync of its log, its data directory gone) and refuses
	// every operation from then on; see Failer.
	ErrFailed = errors.New("store: failed")
	// ErrUnavailable: the store could not be reached, or lost its connection
	// (a database server restarting or failing over), before the
	// transaction could have committed: nothing of it was written, and the
	// whole operation may be run again once the store is back.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrConflict: a row that the transaction inserted (Inserter) existed
	// when it committed; nothing was written. The caller's locks should
	// have made this impossible, so it means a lost race the locks did not
	// cover: retryable, and worth a log line.
	ErrConflict = errors.New("store: row exists")
	// ErrCommitUnknown: the store lost its connection after the commit was
	// sent and before its answer came: the transaction may or may not have
	// committed. Not retryable (running the operation again could apply it
	// twice); the caller must not undo what a commit would have kept.
	ErrCommitUnknown = errors.New("store: commit outcome unknown")
)

// Failer is implemented by stores that can fail permanently at run time: after
// a failed sync of its log a store cannot tell what is durable, so rather than
// acknowledge writes it may lose it stops (fail-stop), and its owner stops the
// server. Found by type assertion (an optional capability of a Store).
type Failer interface {
	// Failed is closed once the store has failed; it never reopens.
	Failed() <-chan struct{}
	// Err is the cause, wrapping ErrFailed, once Failed is closed; nil before.
	Err() error
}

// RangeDeleter is implemented by the transactions (store.Txn) of stores
// that can delete every row of a key range with one record (Pebble's range
// tombstone; SQL's DELETE ... WHERE key >= $1 AND key < $2) rather than one
// per row. A recursive delete removes a directory's entries this way. Found
// by type assertion on a Txn (an optional capability).
type RangeDeleter interface {
	// DeleteRange buffers the deletion of every row with start <= key < end
	// (nothing when end <= start), applied atomically with the
	// transaction's other writes at Commit, in the order they were made:
	// rows the transaction put before are deleted, rows it puts after are
	// kept. The caller must hold, from the call until the transaction ends,
	// the locks that keep every other transaction from writing in the range
	// (the Txn contract's parent lock: the directory's for its entries, the
	// file's for its content, blocks or attributes): an implementation may
	// list the range's rows at the call (pebblestore does, to keep its
	// caches coherent). It fails only if that listing fails; after Commit
	// or Rollback it returns ErrTxnDone.
	DeleteRange(ctx context.Context, start, end []byte) error
}

// Inserter is implemented by the transactions (store.Txn) of stores whose
// locks cannot keep a second writer from creating a row that does not exist
// yet: SQL locks rows, not absent keys, and a transaction that found a key
// missing under its advisory lock (pgstore) relies on every creator of that
// key holding its parent's row, which is the caller's discipline and not
// the store's to enforce. Insert is Put for a row the caller believes new:
// at Commit the store checks that no row has the key, and if one has, the
// whole commit fails with ErrConflict and writes nothing, instead of
// overwriting a row another transaction created (an inode created twice,
// the first one's subtree orphaned). A store whose locks exclude creators
// of a missing key (pebblestore's lock manager) need not implement it.
// Found by type assertion on a Txn (an optional capability).
type Inserter interface {
	// Insert buffers the write of a new row; the value is copied. A later
	// Put or Delete of the key in the same transaction replaces it, as
	// writes of one key do; an Insert after a Delete of the key in the same
	// transaction is a Put (the row it deleted is there until it commits).
	Insert(key, value []byte)
}

// CacheHolder is implemented by stores (store.Store) whose caches would
// otherwise fill with rows that a subtree operation reads once: the entries
// of a tree being deleted, or rewritten by chmod -R, are of no use to anyone
// afterwards, and on a server whose caches have room they would take memory
// in proportion to the tree (Pebble's block cache, docs/NAMESPACE.md).
// Found by type assertion on a Store (an optional capability).
type CacheHolder interface {
	// HoldCaches keeps the store's caches from growing by more than a small
	// margin over what they hold now, until every hold taken is released:
	// reads go on being served, caching what they read by evicting what is
	// there. Holds may be taken concurrently and nest; release must be
	// called exactly once. A cache already at its configured size is not
	// changed.
	HoldCaches() (release func())
}

// IsRetryable reports whether err means the transaction lost a race, or
// could not reach the store, without writing anything, and the whole
// operation may be run again from the start.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrLockBusy) || errors.Is(err, ErrLockTimeout) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, ErrConflict)
}

// Store is the persistent, transactional metadata store: an ordered map of
// byte keys to byte values (see keys.go for the schema), with pessimistic row
// locks in the style of HopsFS over NDB.
//
// It is deliberately small so that an embedded engine and a SQL database
// (one table of (key bytea primary key, value bytea), rows locked with
// SELECT ... FOR SHARE / FOR UPDATE) implement it with the same meaning.
// All methods are safe for concurrent use.
type Store interface {
	// Begin starts a transaction. It holds no locks until Read asks for them.
	Begin(ctx context.Context) (Txn, error)
	// AllocateIDs durably reserves n consecutive ids from the named counter and
	// returns the first. Ids are never handed out twice, even across crashes;
	// ids reserved and not used are lost, which is fine. It runs outside any
	// transaction.
	AllocateIDs(ctx context.Context, counter string, n uint64) (uint64, error)
	// Close releases the store; pending transactions fail with ErrClosed.
	Close() error
}

// Txn is one transaction. It is used by one goroutine at a time.
//
// Reads see committed data only, never the transaction's own buffered writes:
// the caller keeps a per-transaction cache, as the HopsFS template does. Locks
// are held until Commit or Rollback. Deadlock freedom is the caller's job: lock
// keys in one global order (byte order of keys), or use NoWait out of order.
// Locking a key that has no row is allowed, but an implementation need not
// exclude others from it (SQL cannot lock a missing row): callers lock the
// parent row to protect its children.
type Txn interface {
	// Read locks each key in the mode asked, in the order given, then returns
	// the values in the same order (nil where there is no row). A batch is one
	// round trip where the implementation can manage it. The values may be
	// shared with other readers (a row cache): callers must not modify them.
	Read(ctx context.Context, reqs []ReadReq) ([][]byte, error)
	// Scan calls fn for the committed rows with start <= key < end in key order,
	// at most limit of them (limit <= 0: no limit), from one consistent
	// snapshot, without locks. fn must not keep k or v after it returns; it
	// returns false to stop.
	Scan(ctx context.Context, start, end []byte, limit int, fn func(k, v []byte) bool) error
	// Put buffers a write; the value is copied.
	Put(key, value []byte)
	// Delete buffers a deletion.
	Delete(key []byte)
	// Commit writes the buffered changes atomically and durably (they are in a
	// synced log when it returns nil) and releases the locks. Writes of
	// concurrent transactions share syncs (group commit). A store may release
	// the locks once the changes are visible, before they are durable, if no
	// transaction that read them can end before they are (pebblestore does).
	// Commit of a transaction that wrote nothing returns only when every
	// change it may have read is durable.
	Commit(ctx context.Context) error
	// Rollback drops the buffered changes and releases the locks, after
	// waiting, as Commit, for the durability of what the transaction read. It
	// is safe to call after Commit (it then does nothing), so `defer
	// txn.Rollback()` works.
	Rollback()
}
