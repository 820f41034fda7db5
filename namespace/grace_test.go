package namespace

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGraceWaitsForAttemptsInFlight: a wait returns only after every attempt
// that had entered before it began has exited, while attempts keep entering
// and exiting and other waits run.
func TestGraceWaitsForAttemptsInFlight(t *testing.T) {
	var g grace
	const workers = 8
	var state [workers]atomic.Uint64 // odd: inside, between enter and exit
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ep := g.enter()
				state[i].Add(1)
				if n%7 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				state[i].Add(1)
				g.exit(ep)
			}
		}()
	}
	ctx := context.Background()
	var waits sync.WaitGroup
	for w := range 2 {
		waits.Add(1)
		go func() {
			defer waits.Done()
			for range 300 {
				var before [workers]uint64
				for i := range before {
					before[i] = state[i].Load()
				}
				if err := g.wait(ctx); err != nil {
					t.Error(err)
					return
				}
				for i := range before {
					if before[i]%2 == 1 && state[i].Load() == before[i] {
						t.Errorf("waiter %d: attempt %d was inside before the wait and is still inside after it", w, i)
						return
					}
				}
			}
		}()
	}
	waits.Wait()
	close(stop)
	wg.Wait()
}

// TestGraceWaitHonoursContext: a wait on an attempt that does not end stops
// with the context, and a wait after the attempt exits returns at once.
func TestGraceWaitHonoursContext(t *testing.T) {
	var g grace
	ep := g.enter()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("wait with an attempt inside: %v, want %v", err, context.DeadlineExceeded)
	}
	g.exit(ep)
	if err := g.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// An attempt that entered after a wait began is not waited for.
	ep = g.enter()
	done := make(chan error, 1)
	go func() { done <- g.wait(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("the wait returned (%v) with an attempt inside that entered before it", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.exit(ep)
	ep = g.enter() // re-entered after the wait began: not waited for
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.exit(ep)
	if n := g.n[0].Load() + g.n[1].Load(); n != 0 {
		t.Fatalf("%d attempts counted in after every one exited", n)
	}
}
