package coordinator

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of a coordinator and its sessions, injected so
// that tests can expire leases deterministically.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or in the caller of
	// Advance (Manual) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; false if it was already made or stopped.
	Stop() bool
}

// Real is the wall clock (with Go's monotonic readings, so that deadlines
// do not move when the system time is set).
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a clock that moves only when Advance is called. Safe for
// concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*manualTimer
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

type manualTimer struct {
	c    *Manual
	at   time.Time
	seq  int
	f    func()
	done bool
}

func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the clock forward by d, calling every timer that falls due
// in deadline order (ties in the order they were set), each with the clock
// reading its deadline, in the caller's goroutine and without the clock's
// lock held (a timer's function may set more timers; those due within d run
// too).
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		live := c.timers[:0]
		for _, t := range c.timers {
			if !t.done {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		t.done = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}
