package lockmgr

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// Owner is the lock state of one transaction: the locks it holds and the
// means to wait for one more. It is used by one goroutine at a time (as a
// store.Txn is) and is recycled by Release.
type Owner struct {
	m     *Manager
	held  []hold
	idx   map[*entry]int // index into held, built once held is long
	w     waiter
	timer *time.Timer
}

type hold struct {
	e    *entry
	mode store.Mode
}

// waiter is an Owner's place in one entry's queue; a transaction waits for
// at most one lock at a time, so each Owner embeds exactly one.
type waiter struct {
	o          *Owner
	mode       store.Mode
	upgrade    bool
	granted    bool // set by the granter under the shard lock
	ch         chan struct{}
	prev, next *waiter
}

// linearLimit is the number of held locks up to which a linear scan is used
// to find whether the owner already holds a key.
const linearLimit = 16

// Lock acquires key in mode for the owner and holds it until Release.
// store.ReadCommitted takes nothing and returns nil. See the package
// documentation for re-locking, upgrades, FIFO order and the errors
// (store.ErrLockBusy with noWait, store.ErrLockTimeout, context.Cause(ctx)).
// Lock copies key.
func (o *Owner) Lock(ctx context.Context, key []byte, mode store.Mode, noWait bool) error {
	switch mode {
	case store.ReadCommitted:
		return nil
	case store.Shared, store.Exclusive:
	default:
		return fmt.Errorf("lockmgr: lock %s: bad mode %d", store.FormatKey(key), mode)
	}
	s, h := o.m.shardOf(key)
	s.mu.Lock()
	e := s.find(h, key)
	if e == nil {
		e = s.insert(h, key)
		if mode == store.Shared {
			e.shared = 1
		} else {
			e.excl = o
		}
		s.mu.Unlock()
		o.addHold(e, mode)
		return nil
	}
	i := o.holdIndex(e)
	upgrade := false
	if i >= 0 {
		if o.held[i].mode >= mode {
			s.mu.Unlock()
			return nil
		}
		// Upgrade Shared -> Exclusive.
		if e.shared == 1 {
			e.shared, e.excl = 0, o
			s.mu.Unlock()
			o.held[i].mode = store.Exclusive
			return nil
		}
		upgrade = true
	} else if e.head == nil && e.compatible(mode) {
		if mode == store.Shared {
			e.shared++
		} else {
			e.excl = o
		}
		s.mu.Unlock()
		o.addHold(e, mode)
		return nil
	}
	if noWait {
		s.mu.Unlock()
		o.m.metrics.busy.Inc()
		return fmt.Errorf("%w: %s %s", store.ErrLockBusy, mode, store.FormatKey(key))
	}
	w := &o.w
	w.mode, w.upgrade, w.granted = mode, upgrade, false
	if upgrade {
		e.pushFront(w) // behind nobody: the owner already holds the key
	} else {
		e.pushBack(w)
	}
	s.mu.Unlock()
	return o.wait(ctx, s, e, i, mode)
}

// wait blocks until the queued waiter is granted, ctx is done or MaxWait
// passes; i is the hold index for an upgrade, else -1.
func (o *Owner) wait(ctx context.Context, s *shard, e *entry, i int, mode store.Mode) error {
	m := o.m
	m.metrics.waits.Inc()
	start := time.Now()
	if o.timer == nil {
		o.timer = time.NewTimer(m.cfg.MaxWait)
	} else {
		o.timer.Reset(m.cfg.MaxWait)
	}
	var err error
	select {
	case <-o.w.ch:
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-o.timer.C:
		err = store.ErrLockTimeout
	}
	o.timer.Stop() // since Go 1.23, no stale tick can be received after Stop
	if err != nil {
		s.mu.Lock()
		if o.w.granted {
			<-o.w.ch // the grant won the race; keep the lock
			err = nil
		} else {
			e.unlink(&o.w)
			e.grantWaiters() // we may have been blocking compatible waiters behind us
			if e.idle() {
				s.remove(e)
			}
		}
		s.mu.Unlock()
	}
	m.metrics.waitSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		if err == store.ErrLockTimeout {
			m.metrics.timeouts.Inc()
			m.log.Debug("lock wait timeout", "key", store.FormatKey(e.key), "mode", mode.String(), "wait", m.cfg.MaxWait)
			return fmt.Errorf("%w after %v: %s %s", store.ErrLockTimeout, m.cfg.MaxWait, mode, store.FormatKey(e.key))
		}
		return fmt.Errorf("lockmgr: waiting for %s %s: %w", mode, store.FormatKey(e.key), err)
	}
	if i >= 0 {
		o.held[i].mode = store.Exclusive
	} else {
		o.addHold(e, mode)
	}
	return nil
}

func (o *Owner) holdIndex(e *entry) int {
	if o.idx != nil {
		if i, ok := o.idx[e]; ok {
			return i
		}
		return -1
	}
	for i := range o.held {
		if o.held[i].e == e {
			return i
		}
	}
	return -1
}

func (o *Owner) addHold(e *entry, mode store.Mode) {
	o.held = append(o.held, hold{e: e, mode: mode})
	switch {
	case o.idx != nil:
		o.idx[e] = len(o.held) - 1
	case len(o.held) > linearLimit:
		o.idx = make(map[*entry]int, 2*len(o.held))
		for i, h := range o.held {
			o.idx[h.e] = i
		}
	}
}

// Held returns the number of distinct keys the owner holds.
func (o *Owner) Held() int { return len(o.held) }

// Release drops every lock the owner holds, waking waiters that can now
// proceed, and recycles the owner: it must not be used afterwards.
func (o *Owner) Release() {
	m := o.m
	for i := range o.held {
		h := &o.held[i]
		e := h.e
		s := &m.shards[e.hash&m.mask]
		s.mu.Lock()
		if h.mode == store.Exclusive {
			e.excl = nil
		} else {
			e.shared--
		}
		e.grantWaiters()
		if e.idle() {
			s.remove(e)
		}
		s.mu.Unlock()
		h.e = nil
	}
	o.held = o.held[:0]
	o.idx = nil // only long transactions build it; let it go with them
	if cap(o.held) > 4096 {
		o.held = nil
	}
	m.owners.Put(o)
}
