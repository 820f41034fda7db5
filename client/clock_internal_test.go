package client

import (
	"sync"
	"testing"
	"time"
)

// TestStragglerClockWakesWhenDue: a call waiting on the straggler clock is
// woken at a tick at or after its deadline, never before it unless its
// deadline lies past the clock's horizon (then it waits again, as
// awaitFirst does); a deadline already passed is due at once. Many calls
// at once, under -race, with deadlines spread over and past the horizon.
func TestStragglerClockWakesWhenDue(t *testing.T) {
	var s stragglerClock
	stop := make(chan struct{})
	defer close(stop)
	const every = time.Millisecond
	select {
	case <-s.due(time.Now().Add(-time.Second), every, stop):
	default:
		t.Fatal("a deadline already passed is not due at once")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Go(func() {
			// Up to twice the horizon (clockSlots ticks) away.
			deadline := time.Now().Add(time.Duration(i) * 2 * clockSlots * every / 64)
			waits := 0
			for {
				// Well within the horizon: woken only once it has come.
				near := time.Until(deadline) < clockSlots/2*every
				<-s.due(deadline, every, stop)
				waits++
				if !time.Now().Before(deadline) {
					break
				}
				if near {
					errs <- "woken before a deadline within the horizon"
					return
				}
				if waits > 1000 {
					errs <- "woken again and again before its deadline"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
