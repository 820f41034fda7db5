package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		p    Policy
		n    int
		want time.Duration
	}{
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, 0, 50 * ms},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, -3, 50 * ms},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, 1, 100 * ms},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, 5, 1600 * ms},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, 6, 2 * time.Second},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, 1000, 2 * time.Second},
		{Policy{Initial: 50 * ms, Max: 2 * time.Second}, math.MaxInt, 2 * time.Second},
		{Policy{Initial: 5 * ms, Max: 500 * ms}, 6, 320 * ms},
		{Policy{Initial: 5 * ms, Max: 500 * ms}, 7, 500 * ms},
		{Policy{Initial: 10 * ms, Max: time.Second, Factor: 3}, 2, 90 * ms},
		{Policy{Initial: 10 * ms, Max: time.Second, Factor: 1}, 40, 10 * ms},
		{Policy{Initial: 1, Max: math.MaxInt64}, 62, 1 << 62},
		{Policy{Initial: 1, Max: math.MaxInt64}, 63, math.MaxInt64},
		{Policy{Initial: 50 * time.Microsecond, Max: 50 * time.Microsecond << 10}, 10, 50 * time.Microsecond << 10},
	} {
		if got := tc.p.Delay(tc.n); got != tc.want {
			t.Errorf("%+v.Delay(%d) = %v, want %v", tc.p, tc.n, got, tc.want)
		}
	}
}

// TestDelayIsShiftedInitial: with the default factor, every delay below
// Max is exactly Initial<<n, as the hand-written doublings computed it.
func TestDelayIsShiftedInitial(t *testing.T) {
	for _, initial := range []time.Duration{1, 7, 50 * time.Microsecond, 20 * time.Millisecond, 100 * time.Millisecond} {
		p := Policy{Initial: initial, Max: time.Hour}
		for n := 0; initial<<n < time.Hour; n++ {
			if got := p.Delay(n); got != initial<<n {
				t.Fatalf("Delay(%d) with Initial %v = %v, want %v", n, initial, got, initial<<n)
			}
		}
	}
}

func TestJittered(t *testing.T) {
	ms := time.Millisecond
	full := Policy{Initial: 10 * ms, Max: time.Second, Jitter: Full}
	equal := Policy{Initial: 10 * ms, Max: time.Second, Jitter: Equal}
	none := Policy{Initial: 10 * ms, Max: time.Second}
	for _, tc := range []struct {
		p    Policy
		n    int
		u    float64
		want time.Duration
	}{
		{full, 0, 0, 0},
		{full, 2, 0.5, 20 * ms},
		{full, 20, 0.25, 250 * ms},
		{equal, 0, 0, 5 * ms},
		{equal, 1, 0.5, 10*ms + (10*ms+1)/2},
		{none, 3, 0.9, 80 * ms},
	} {
		if got := tc.p.Jittered(tc.n, tc.u); got != tc.want {
			t.Errorf("%+v.Jittered(%d, %v) = %v, want %v", tc.p, tc.n, tc.u, got, tc.want)
		}
	}
	// The largest draw stays inside the range: below d for Full, at most d
	// for Equal.
	u := math.Nextafter(1, 0)
	for n := range 12 {
		d := full.Delay(n)
		if got := full.Jittered(n, u); got >= d || got < d*99/100 {
			t.Errorf("Full, retry %d, u just below 1: %v, want in [0.99 d, d) of %v", n, got, d)
		}
		if got := equal.Jittered(n, u); got > d || got < d*99/100 {
			t.Errorf("Equal, retry %d, u just below 1: %v, want in [0.99 d, d] of %v", n, got, d)
		}
	}
}

func TestBackoffSequence(t *testing.T) {
	b := New(Policy{Initial: time.Millisecond, Max: 4 * time.Millisecond})
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	if b.Retries() != 4 {
		t.Fatalf("Retries() = %d after four, want 4", b.Retries())
	}
	b.Reset()
	if d := b.Next(); d != time.Millisecond {
		t.Fatalf("after Reset: %v, want the initial 1ms", d)
	}
}

// TestWaitEndsWithContext: a wait whose context ends returns the
// context's error, at once when it has already ended and while waiting
// otherwise; a wait that runs its course returns nil.
func TestWaitEndsWithContext(t *testing.T) {
	b := New(Policy{Initial: time.Hour, Max: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait on an ended context: %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx) }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Wait cancelled while waiting an hour: %v, want context.Canceled", err)
	}
	p := Policy{Initial: time.Microsecond, Max: time.Microsecond, Jitter: Equal}
	if err := p.Sleep(context.Background(), 3); err != nil {
		t.Fatalf("Sleep of a microsecond: %v", err)
	}
	if err := New(p).Wait(context.Background()); err != nil {
		t.Fatalf("Wait of a microsecond: %v", err)
	}
}
