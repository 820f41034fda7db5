package namespace

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// grace counts the attempts in flight (engine.attempt, each one store
// transaction) so that a subtree operation can wait, after its flag is
// committed, for every attempt that may have read the path before the flag
// was there: a grace period, as read-copy-update waits for readers. An
// attempt that begins after the wait began reads the flag's row after the
// flag's commit and meets it. The wait costs what the attempts in flight at
// the time cost, however big the subtree; taking and releasing the lock of
// every row below (quiesce's walk) costs a lock per inode.
//
// This sees the attempts of this process only, so it is all of the quiesce
// only over a store that no other process writes (store.SingleProcess);
// over a shared store the walk still runs, for the other NameNodes'
// operations.
//
// Attempts count themselves in one of two counters, by the parity of the
// epoch they saw; a wait moves the epoch on and waits for the counter of the
// epoch it left to drain. An attempt checks, after counting itself, that the
// epoch did not move meanwhile (else it counts itself again in the new one),
// so every attempt counted under epoch e began before the move from e to e+1,
// and waits are serialized, so the attempts of epochs before e were drained
// by an earlier wait.
type grace struct {
	epoch atomic.Uint64
	n     [2]struct {
		atomic.Int64
		_ [56]byte // each counter on its own cache line
	}
	mu sync.Mutex // one wait at a time
}

// enter counts an attempt in; exit(ep) counts it out.
func (g *grace) enter() uint64 {
	for {
		ep := g.epoch.Load()
		g.n[ep&1].Add(1)
		if g.epoch.Load() == ep {
			return ep
		}
		g.n[ep&1].Add(-1)
	}
}

func (g *grace) exit(ep uint64) { g.n[ep&1].Add(-1) }

// wait returns once every attempt that entered before it was called has
// exited. It polls: waits are rare (one per subtree operation) and short
// (an attempt is one transaction), and the attempts' path stays two atomic
// adds without a wakeup to send.
func (g *grace) wait(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.epoch.Add(1) - 1
	c := &g.n[old&1]
	b := backoff.New(backoff.Policy{Initial: 20 * time.Microsecond, Max: 2 * time.Millisecond})
	for c.Load() != 0 {
		if err := b.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
