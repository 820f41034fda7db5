package client

import (
	"sync"
	"sync/atomic"
	"time"
)

// clockSlots is how many ticks ahead the straggler clock can wake a call;
// a call whose deadline is further away is woken at the last of them and
// waits again.
const clockSlots = 64

// stragglerClock wakes each call waiting for an answer when its straggler
// deadline has come, and no other: one goroutine for the whole client (the
// ticker, started with the first call that needs it, stopped by Close)
// instead of a timer per call. Tick k is at start + k*every; the calls due
// at tick k share one channel, which the ticker closes at that tick. A call
// answered before its deadline, as nearly all are, is never woken by the
// clock: under load, waking every waiting call at every tick (some 60
// calls 400 times a second at 64 clients) cost the driver more than the
// stragglers it was there for.
type stragglerClock struct {
	once  sync.Once
	start time.Time
	every time.Duration
	ring  [clockSlots]atomic.Pointer[clockSlot]
	now   atomic.Int64 // the last tick the ticker reached
}

// A clockSlot is the channel of the calls due at one tick.
type clockSlot struct {
	tick int64
	ch   chan struct{}
}

// closedCh is a channel that is always ready: the wait of a call already due.
var closedCh = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// due returns a channel closed at the first tick at or after deadline, or
// at the clock's horizon (clockSlots ticks ahead) if that is sooner: the
// caller looks at the clock when it is closed. every is the tick, stop ends
// the ticker.
func (s *stragglerClock) due(deadline time.Time, every time.Duration, stop <-chan struct{}) <-chan struct{} {
	s.once.Do(func() {
		s.start, s.every = time.Now(), max(every, 100*time.Microsecond)
		go s.ticker(stop)
	})
	cur := s.now.Load()
	t := int64(deadline.Sub(s.start)/s.every) + 1
	if t <= cur {
		return closedCh
	}
	t = min(t, cur+clockSlots-1)
	slot := &s.ring[t%clockSlots]
	var fresh *clockSlot
	for {
		p := slot.Load()
		if p != nil && p.tick == t {
			return p.ch
		}
		// Empty, or the slot of an earlier tick (due: t-clockSlots <= cur)
		// that the ticker has not closed yet.
		if fresh == nil {
			fresh = &clockSlot{tick: t, ch: make(chan struct{})}
		}
		if slot.CompareAndSwap(p, fresh) {
			if p != nil {
				close(p.ch)
			}
			return fresh.ch
		}
	}
}

// ticker closes, every tick, the channels of the ticks that have come. A
// slot filled for a tick the ticker had just passed is closed at the next.
func (s *stragglerClock) ticker(stop <-chan struct{}) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			k := int64(now.Sub(s.start) / s.every)
			s.now.Store(k)
			for i := range s.ring {
				slot := &s.ring[i]
				if p := slot.Load(); p != nil && p.tick <= k && slot.CompareAndSwap(p, nil) {
					close(p.ch)
				}
			}
		}
	}
}
