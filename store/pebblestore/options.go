package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a Store.
type Options struct {
	// CacheSize is Pebble's block cache in bytes.
	CacheSize int64
	// MemTableSize is the size of one Pebble memtable in bytes.
	MemTableSize uint64
	// CacheHoldMargin is how much the block cache may still grow while a
	// subtree operation holds the caches (HoldCaches, cachehold.go).
	CacheHoldMargin int64
	// LockWaitMax bounds one wait for a row lock (store.ErrLockTimeout after).
	LockWaitMax time.Duration
	// LockShards is the number of partitions of the lock table, a power of two.
	LockShards int
	// RowCacheEntries bounds the rows (up to 1 KB each, absent rows
	// included) kept in memory in front of Pebble; 0 disables the cache.
	RowCacheEntries int
	// ScanCacheBytes bounds the memory of the partitions (a directory's
	// entries, a small file's content) kept in front of Pebble for scans
	// (scancache.go); 0 disables the cache.
	ScanCacheBytes int64
	// IDPrefetch is how many ids AllocateIDs reserves durably ahead of what it
	// hands out, so that most calls need no fsync. 0 syncs on every call.
	IDPrefetch uint64
	// HoldLocksThroughSync keeps a committing transaction's row locks until
	// its WAL fsync returns (strict two-phase locking). By default they are
	// released as soon as the batch is visible, and transactions that read
	// it wait for the sync before they return (txn.go, Commit): the same
	// guarantees to callers, without queueing writers of one row behind
	// each other's fsyncs. Kept for measurement.
	HoldLocksThroughSync bool
	// WALPrefill is how many bytes past the end of the write-ahead log are
	// kept written (zeros) and synced ahead of the log's writer, so that a
	// commit's fsync does not grow the file (walprefill.go). 0 disables it.
	WALPrefill int64
	// ScanFlushTrigger: a scan that steps over this many dead entries
	// (tombstones, overwritten versions) makes the store flush its
	// memtables, rate-limited (scanwaste.go). 0 disables it.
	ScanFlushTrigger int
	// FS is the file system under the store; nil means the operating
	// system's (vfs.Default). Tests inject failing ones (vfs/errorfs).
	FS vfs.FS
	// IdentityCheckInterval is how often the store checks that its directory
	// is still the one it opened (identity.go); a removed or replaced
	// directory fails the store. 0 disables the periodic check.
	IdentityCheckInterval time.Duration
	// ReadOnly opens an existing store for reading only, as offline fsck
	// does: nothing in the directory is created or changed (Pebble replays
	// the write-ahead log in memory and compacts nothing), the directory
	// lock is taken shared through a read-only descriptor, so a copy on a
	// read-only file system opens, and every write fails. Open fails where
	// there is no store.
	ReadOnly bool
	// Logger receives Pebble's log and the store's own events. Nil: discarded.
	Logger *slog.Logger
	// Registerer receives the store's metrics (metrics.go) and the lock
	// manager's. Nil: not registered.
	Registerer prometheus.Registerer
}

// DefaultOptions returns a 256 MB block cache (which may grow by at most
// 4 MB while a subtree operation holds it), 64 MB memtables, a row cache
// of a million rows, 64 MB of cached partitions, a 10 s lock wait limit, 64
// lock shards, an id prefetch of 1024 and 4 MB of write-ahead log
// prefilled, and a check of the directory's identity every 2 s.
func DefaultOptions() Options {
	return Options{
		CacheSize:             256 << 20,
		MemTableSize:          64 << 20,
		CacheHoldMargin:       4 << 20,
		LockWaitMax:           10 * time.Second,
		LockShards:            64,
		IDPrefetch:            1024,
		RowCacheEntries:       1 << 20,
		ScanCacheBytes:        64 << 20,
		WALPrefill:            4 << 20,
		ScanFlushTrigger:      1024,
		IdentityCheckInterval: 2 * time.Second,
	}
}

// ErrOptions is wrapped by Validate's errors.
var ErrOptions = errors.New("pebblestore: invalid options")

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case o.CacheSize < 0:
		return fmt.Errorf("%w: CacheSize = %d, want >= 0", ErrOptions, o.CacheSize)
	case o.CacheHoldMargin < 0:
		return fmt.Errorf("%w: CacheHoldMargin = %d, want >= 0", ErrOptions, o.CacheHoldMargin)
	case o.MemTableSize < 1<<20 || o.MemTableSize >= 4<<30:
		return fmt.Errorf("%w: MemTableSize = %d, want [1 MB, 4 GB)", ErrOptions, o.MemTableSize)
	case o.LockWaitMax <= 0:
		return fmt.Errorf("%w: LockWaitMax = %v, want > 0", ErrOptions, o.LockWaitMax)
	case o.ScanCacheBytes < 0:
		return fmt.Errorf("%w: ScanCacheBytes = %d, want >= 0", ErrOptions, o.ScanCacheBytes)
	case o.ScanFlushTrigger < 0:
		return fmt.Errorf("%w: ScanFlushTrigger = %d, want >= 0", ErrOptions, o.ScanFlushTrigger)
	case o.IdentityCheckInterval < 0:
		return fmt.Errorf("%w: IdentityCheckInterval = %v, want >= 0", ErrOptions, o.IdentityCheckInterval)
	case o.WALPrefill < 0:
		return fmt.Errorf("%w: WALPrefill = %d, want >= 0", ErrOptions, o.WALPrefill)
	case o.LockShards <= 0 || o.LockShards&(o.LockShards-1) != 0:
		return fmt.Errorf("%w: LockShards = %d, want a power of two", ErrOptions, o.LockShards)
	}
	return nil
}
