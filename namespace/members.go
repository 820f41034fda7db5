package namespace

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// The engines that serve one shared store (several NameNodes on one
// PostgreSQL database) each keep a row in the instance table
// (store.Instance): written at start, its count moved up every Config.Beat
// by a heartbeat, deleted at a clean stop. A subtree flag names the engine
// that set it; an engine that meets another's flag asks whether that engine
// is alive: it is while its row is there and its count keeps moving, judged
// by this engine's own clock (no two machines' clocks are compared, as in
// HopsFS's leader election over the database). One whose row is gone, or
// whose count stood still for Config.GoneAfter, is gone: the heartbeat's
// reaper clears its flags, finishes its half-done recursive deletes, and
// removes its row.
//
// On a store that is the engine's alone (store.SingleProcess) none of this
// runs: every flag that is not this incarnation's is a previous one's, and
// start clears them all (recoverSubtreeOps).

// Liveness tells whether another engine is alive from a membership service
// that every engine sharing the store shares (`nimbus serve` implements it
// over the coordinator when it is etcd: member IDs are instance ids). Set
// with Engine.SetLiveness; without one, the instance table alone decides.
//
// With one, an engine is dead only when both say so: its instance row is
// gone or stood still for GoneAfter, and it is not a member. So a NameNode
// whose coordinator lease lives keeps its flags even if its beats stall on
// the store (dead means its lease expired in the coordinator, never that a
// write was slow), and one that has not joined the coordinator yet (an
// engine's start, before its server joins) is kept alive by its row. The
// verdict of an operation that meets a flag and the reaper use the same
// rule, so the reaper clears every flag an operation took for a dead
// owner's. An error asking it counts as alive: flags stay while in doubt.
type Liveness interface {
	// Alive reports whether the engine with this instance id is a member.
	Alive(ctx context.Context, instance uint64) (bool, error)
}

// SetLiveness makes l the second source of liveness (Liveness). Safe to
// call while the engine serves; nil removes it.
func (e *Engine) SetLiveness(l Liveness) {
	if l == nil {
		e.liveness.Store(nil)
		return
	}
	e.liveness.Store(&l)
}

// memberAlive asks the Liveness, if any, about instance id; false without
// one, true when it cannot tell.
func (e *Engine) memberAlive(ctx context.Context, id uint64) bool {
	l := e.liveness.Load()
	if l == nil {
		return false
	}
	ok, err := (*l).Alive(ctx, id)
	if err != nil {
		e.log.Warn("asking the coordinator whether a NameNode is alive; taking it for alive", "instance", fmt.Sprintf("%016x", id), "err", err)
		return true
	}
	return ok
}

// members is what this engine saw of the others' heartbeats.
type members struct {
	mu   sync.Mutex
	seen map[uint64]beatSeen
	reap chan struct{} // wakes the heartbeat to reap now (a gone flag was met)
	done chan struct{} // closed when the heartbeat stops
}

type beatSeen struct {
	beat uint64
	at   time.Time // when this engine first saw beat
}

func newMembers() *members {
	return &members{seen: make(map[uint64]beatSeen), reap: make(chan struct{}, 1), done: make(chan struct{})}
}

// judge records that instance id's row shows beat and reports whether it is
// alive: the first sight of a count, or one that moved, is alive; a count
// that stood still for longer than goneAfter is not.
func (m *members) judge(id, beat uint64, now time.Time, goneAfter time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.seen[id]
	if !ok || s.beat != beat {
		m.seen[id] = beatSeen{beat, now}
		return true
	}
	return now.Sub(s.at) < goneAfter
}

func (m *members) forget(id uint64) {
	m.mu.Lock()
	delete(m.seen, id)
	m.mu.Unlock()
}

// wake asks the heartbeat to reap at once, without waiting for it.
func (m *members) wake() {
	select {
	case m.reap <- struct{}{}:
	default:
	}
}

// newInstance is this engine's instance row as written at start, its count
// at 0.
func (e *Engine) newInstance() store.Instance {
	host, _ := os.Hostname()
	return store.Instance{Started: e.cfg.Now().UnixMilli(), Host: fmt.Sprintf("%s/%d", host, os.Getpid())}
}

// register writes this engine's instance row (shared stores only).
func (e *Engine) register(ctx context.Context) error {
	row := e.newInstance()
	row.Beat = 1
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	txn.Put(store.InstanceKey(e.instance), store.EncodeInstance(nil, &row))
	return txn.Commit(ctx)
}

// alive reports whether another engine instance id on the shared store is
// serving: its row is there and its count moves.
func (e *Engine) alive(ctx context.Context, st store.Txn, id uint64) (bool, error) {
	key := store.InstanceKey(id)
	vals, err := st.Read(ctx, []store.ReadReq{{Key: key}})
	if err != nil {
		return false, err
	}
	if vals[0] == nil {
		return e.memberAlive(ctx, id), nil
	}
	var row store.Instance
	if err := store.DecodeInstance(key, vals[0], &row); err != nil {
		return false, err
	}
	if e.members.judge(id, row.Beat, time.Now(), e.cfg.GoneAfter) {
		return true, nil
	}
	return e.memberAlive(ctx, id), nil
}

// verdict is subtree.Check with the owner's liveness asked of the store
// only when the flag is another engine's on a shared store.
func (e *Engine) verdict(ctx context.Context, st store.Txn, owner, id, own uint64) (subtree.Verdict, error) {
	alive := false
	if owner != 0 && owner != e.instance && !e.alone {
		var err error
		if alive, err = e.alive(ctx, st, owner); err != nil {
			return 0, err
		}
	}
	return subtree.Check(owner, id, e.instance, own, alive), nil
}

// heartbeat counts this engine's row up every Beat and reaps the engines
// that are gone, until Close.
func (e *Engine) heartbeat() {
	defer close(e.members.done)
	tick := time.NewTicker(e.cfg.Beat)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), e.cfg.GoneAfter/2)
			if err := e.beat(ctx); err != nil {
				e.log.Warn("instance heartbeat", "err", err)
			}
			cancel()
		case <-e.members.reap:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := e.reapGone(ctx); err != nil {
			e.log.Warn("looking for NameNodes that are gone", "err", err)
		}
		cancel()
	}
}

// beat counts this engine's row up. A row found missing was removed by
// another engine that judged this one gone (a stall longer than GoneAfter):
// its flags may have been cleared; the row is written again, and a subtree
// operation of this engine that lost its flag fails at its commit
// (dropFlag).
func (e *Engine) beat(ctx context.Context) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.InstanceKey(e.instance)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	if err != nil {
		return err
	}
	var row store.Instance
	if vals[0] == nil {
		e.log.Error("this NameNode's instance row was removed by another that judged it gone; registering again",
			"instance", fmt.Sprintf("%016x", e.instance), "gone_after", e.cfg.GoneAfter)
		row = e.newInstance()
	} else if err := store.DecodeInstance(key, vals[0], &row); err != nil {
		return err
	}
	row.Beat++
	txn.Put(key, store.EncodeInstance(nil, &row))
	return txn.Commit(ctx)
}

// reapGone judges every other engine of the instance table; for each one
// gone it clears its subtree flags or finishes its recursive deletes (as
// the start of a lone engine does for its previous incarnation), then
// removes its row unless it beat meanwhile.
func (e *Engine) reapGone(ctx context.Context) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	type inst struct {
		id   uint64
		beat uint64
	}
	var all []inst
	var decErr error
	start, end := store.AllInstancesRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		id, _ := store.DecodeInstanceKey(k)
		var row store.Instance
		if decErr = store.DecodeInstance(k, v, &row); decErr != nil {
			return false
		}
		all = append(all, inst{id, row.Beat})
		return true
	})
	txn.Rollback()
	if err == nil {
		err = decErr
	}
	if err != nil {
		return err
	}
	present := make(map[uint64]bool, len(all))
	gone := make(map[uint64]uint64) // id -> the beat it stood still at
	now := time.Now()
	for _, in := range all {
		present[in.id] = true
		if in.id != e.instance && !e.members.judge(in.id, in.beat, now, e.cfg.GoneAfter) {
			gone[in.id] = in.beat
		}
	}
	// Gone by the table and not a member either (Liveness).
	for id := range gone {
		if e.memberAlive(ctx, id) {
			delete(gone, id)
		}
	}
	// The operations of the gone, and of owners without a row (stopped
	// cleanly with an operation left, or gone and already removed) that
	// are not members.
	member := make(map[uint64]bool)
	if err := e.recoverSubtreeOpsOf(ctx, func(owner uint64) bool {
		if _, g := gone[owner]; g {
			return true
		}
		if owner == e.instance || present[owner] {
			return false
		}
		m, ok := member[owner]
		if !ok {
			m = e.memberAlive(ctx, owner)
			member[owner] = m
		}
		return !m
	}); err != nil {
		return err
	}
	for id, beat := range gone {
		if err := e.removeInstance(ctx, id, beat); err != nil {
			return err
		}
		e.members.forget(id)
		e.log.Warn("a NameNode stopped beating; its subtree operations were cleared or finished",
			"instance", fmt.Sprintf("%016x", id), "gone_after", e.cfg.GoneAfter)
	}
	return nil
}

// removeInstance deletes the row of instance id if it still shows beat.
func (e *Engine) removeInstance(ctx context.Context, id, beat uint64) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.InstanceKey(id)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	if err != nil || vals[0] == nil {
		return err
	}
	var row store.Instance
	if err := store.DecodeInstance(key, vals[0], &row); err != nil {
		return err
	}
	if row.Beat != beat {
		return nil // it beat after all
	}
	txn.Delete(key)
	return txn.Commit(ctx)
}

// deregister removes this engine's row at a clean stop, so that the others
// take over at once what it leaves flagged (a recursive delete it could not
// finish).
func (e *Engine) deregister(ctx context.Context) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	txn.Delete(store.InstanceKey(e.instance))
	return txn.Commit(ctx)
}
