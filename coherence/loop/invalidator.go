package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/store"
)

// Invalidator is the coherent coherence.Invalidator (and coherence.Guarded)
// over a Loop: a write holding its row locks hands its targets to the
// core (WriteLocked), waits for the write's Commit (every live instance
// has acknowledged its INV, or left the membership), then has the fence
// and the floor checked by its own transaction's commit (fence.go,
// expect); its release
// reports Committed, and the core sends RELEASE.
type Invalidator struct{ l *Loop }

// Invalidator returns the loop's coherence.Invalidator.
func (l *Loop) Invalidator() Invalidator { return Invalidator{l} }

// Invalidate implements coherence.Invalidator. Without the store check it
// cannot be sound across servers; the engine calls InvalidateGuarded.
func (iv Invalidator) Invalidate(ctx context.Context, targets []cache.Target) (func(bool), error) {
	return nil, fmt.Errorf("%w: coherence: Invalidate without the store check", store.ErrUnavailable)
}

// InvalidateGuarded implements coherence.Guarded. A target keeps the
// engine's reach (namespace/ownership.go): Everywhere, or only the
// instances of the deployment that owns its Route (Config.Deployments,
// routing.Owner), since only those fill it. A write without targets only
// takes the fence check.
func (iv Invalidator) InvalidateGuarded(ctx context.Context, targets []coherence.Target) (func(context.Context, store.Txn) error, func(bool), error) {
	l := iv.l
	if len(targets) == 0 {
		s := l.state.Load()
		if s.node == nil {
			return nil, nil, errNoIncarnation
		}
		id := s.id
		return func(ctx context.Context, txn store.Txn) error { return expect(ctx, txn, id, 0, nil) }, func(bool) {}, nil
	}
	if l.state.Load().node == nil {
		return nil, nil, errNoIncarnation // fail fast: the write holds row locks
	}
	ts := make([]coherence.Target, len(targets))
	for i, t := range targets {
		if t.Everywhere || l.cfg.Deployments <= 1 {
			ts[i] = coherence.Everywhere(t.Target)
		} else {
			ts[i] = coherence.LocalTo(t.Target, t.Route)
		}
	}
	w := &writeReq{targets: ts, reply: make(chan writeReply, 1), start: time.Now()}
	select {
	case l.writes <- w:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-l.done:
		return nil, nil, ErrClosed
	}
	var r writeReply
	select {
	case r = <-w.reply:
	case <-ctx.Done():
		l.end(w, false) // the loop may not have taken it yet: end is a no-op then
		return nil, nil, ctx.Err()
	case <-l.done:
		return nil, nil, ErrClosed
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	release := func(committed bool) { l.end(w, committed) }
	return func(ctx context.Context, txn store.Txn) error {
		return expect(ctx, txn, r.id, r.view, l.askRefresh)
	}, release, nil
}

// end reports a write's outcome to the loop.
func (l *Loop) end(w *writeReq, committed bool) {
	select {
	case l.ends <- writeEnd{req: w, committed: committed}:
	case <-l.done:
	}
}
