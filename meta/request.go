package meta

import (
	"context"
	"time"
)

// Request names one call of a client: the same on every resubmission of
// that call, different for every other call. The RPC carries it on every
// request (api.Request's client_name and request_id); a FileSystem that
// keeps a record of the writes it applied (package namespace) answers a
// write resubmitted after a lost reply from that record instead of applying
// it again. The zero Request names nothing.
type Request struct {
	Client string // the client's name, unique per client (client.ClientName)
	ID     uint64 // unique among the client's calls; 0 is no id
	// Resubmitted says that the call was sent before with this id and its
	// reply lost. A file system looks for the record of the call only
	// then: a first submission has none (unless the client reused an id,
	// which the contract forbids), and skips the look-up.
	Resubmitted bool
	// Received is when the edge received this submission of the call
	// (the RPC server: when it read the request's frame), or zero when
	// unknown. A file system that keeps records for a bounded time
	// refuses to start a submission that waited so long that the record
	// of another submission of the same call may have expired meanwhile.
	Received time.Time
}

// IsZero reports whether r names no call.
func (r Request) IsZero() bool { return r.ID == 0 }

type requestKey struct{}

// WithRequest returns ctx carrying r: the edge that received a call (the RPC
// server) says which call an operation serves, without a wire type reaching
// the engine. A zero r returns ctx.
func WithRequest(ctx context.Context, r Request) context.Context {
	if r.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the Request ctx carries, if any.
func RequestFrom(ctx context.Context) (Request, bool) {
	r, ok := ctx.Value(requestKey{}).(Request)
	return r, ok && !r.IsZero()
}

// OwnerChecker is a routed operation's ownership check, deferred until
// the operation is about to read the store: a read that an instance's
// metadata cache answers is one its deployment owns (only the owner fills
// those entries), and the check, a walk of the path as long as the cached
// answer's own, would double its cost. CheckOwner returns an error of kind
// ErrWrongOwner when another deployment owns the operation, else nil.
type OwnerChecker interface {
	CheckOwner(ctx context.Context) error
}

// DefersOwnerCheck is implemented by a FileSystem whose reads (Stat, Read,
// List) call CheckOwner before they read the store. The edge defers the
// check only to such a file system; any other is checked before the call.
// It is optional because only the engine reads a store behind a cache.
type DefersOwnerCheck interface {
	DefersOwnerCheck()
}

type ownerKey struct{}

// WithOwnerCheck returns ctx carrying c. The edge that received a routed
// call (the RPC server) sets it for the reads a cache can answer; the file
// system calls CheckOwner before it reads the store.
func WithOwnerCheck(ctx context.Context, c OwnerChecker) context.Context {
	return context.WithValue(ctx, ownerKey{}, c)
}

// CheckOwner runs the ownership check ctx carries: nil when it carries
// none, or when this deployment owns the operation.
func CheckOwner(ctx context.Context) error {
	if c, ok := ctx.Value(ownerKey{}).(OwnerChecker); ok {
		return c.CheckOwner(ctx)
	}
	return nil
}
