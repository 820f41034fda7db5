package coherence

import (
	"context"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/store"
)

// Invalidator is told, by a write holding its locks and before it commits,
// the cache targets the write changes; it returns once every instance that
// may cache them holds them (cache.Hold: drops what they cover and refuses
// fills of it), and the write calls the returned release after its commit
// or abort, exactly once. An error fails the write's attempt before
// anything is committed; the attempt is retried. Implementations must be
// safe for concurrent use.
//
// It is the seam between the namespace engine, which calls it, and what
// keeps caches coherent, which implements it, and lives here, below both,
// so that neither depends on the other. The engine's local implementation
// (over its own cache) serves one instance. The coherence loop
// (coherence/loop) implements it over the network, as a Guarded one: INV
// to every live instance that may cache a target, wait for the ACKs, check
// the fence and the write floor in the write's transaction, then RELEASE
// after the commit (docs/ELASTIC.md, "Coherence across servers").
type Invalidator interface {
	Invalidate(ctx context.Context, targets []cache.Target) (release func(committed bool), err error)
}

// Guarded is an Invalidator whose writes must pass a check in their own
// store transaction just before they commit (an optional capability, found
// by type assertion): the fence and write floor of this package's
// protocol (coherence/loop). The engine calls InvalidateGuarded instead of
// Invalidate for every write attempt that writes rows, with no targets too
// (a write that changes nothing cached is still fenced), runs check on the
// attempt's transaction after its last other read and before its Commit,
// and calls release after the commit or abort, exactly once. An error from
// check aborts the attempt, and is retryable when it wraps
// store.ErrLockBusy or store.ErrUnavailable. Each target says which
// instances may cache it (Target; namespace/ownership.go): a Guarded
// invalidator may send a target that is not Everywhere only to the
// instances of the deployment that owns its Route.
type Guarded interface {
	Invalidator
	InvalidateGuarded(ctx context.Context, targets []Target) (check func(context.Context, store.Txn) error, release func(committed bool), err error)
}
