// Package lockmgr is an in-process row lock manager for embedded store
// engines (pebblestore). It gives transactions shared and exclusive locks on
// byte-string keys, held until the transaction releases all of them at once
// (strict two-phase locking), as NDB does for HopsFS.
//
// # Usage
//
//	m, err := lockmgr.New(lockmgr.DefaultConfig())
//	o := m.Owner()                 // one per transaction, pooled
//	err = o.Lock(ctx, key, store.Exclusive, false)
//	...
//	o.Release()                    // drops every lock; o must not be used again
//
// # Semantics
//
//   - Shared admits other shared holders; Exclusive admits no other holder.
//     store.ReadCommitted takes no lock.
//   - Re-locking a key the owner already holds in the same or a weaker mode
//     is a no-op. Asking for Exclusive on a key the owner holds Shared is an
//     upgrade: it is granted at once when the owner is the only holder, and
//     otherwise waits (ahead of the queue) for the other shared holders to
//     leave, or times out. Two owners upgrading the same key deadlock until
//     one times out; the namespace engine avoids upgrades by design.
//   - Waiters are served first-in first-out per key: a request that conflicts
//     with a holder or with an earlier waiter queues, so a stream of readers
//     cannot starve a writer. When a holder leaves, the longest run of
//     compatible waiters at the head of the queue is granted together.
//   - Waiting ends with context.Cause(ctx) when ctx is done, with
//     store.ErrLockTimeout after Config.MaxWait, or at once with
//     store.ErrLockBusy when the caller asked for NoWait. If a grant races
//     with cancellation, the grant wins and Lock returns nil.
//   - There is no deadlock detection: callers lock in one global order, use
//     NoWait out of order, and MaxWait is the safety net.
//
// # Cost
//
// The table is sharded by a hash of the key; each shard is a mutex and a
// hash map of lock entries that are recycled through a per-shard free list,
// and per-owner state (held list, wait channel, timer) is pooled, so an
// uncontended Lock + Release allocates nothing. Only waits touch the
// metrics (metrics.go).
package lockmgr
