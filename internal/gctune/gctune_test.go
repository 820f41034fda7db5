package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, target uint64
		want         int
	}{
		{0, 1000 * mb, 400},        // nothing live: the high setting
		{100 * mb, 1000 * mb, 400}, // goal of 5 × 100 MB is under the target
		{400 * mb, 1000 * mb, 150}, // 400 × 2.5 = 1000
		{500 * mb, 1000 * mb, 100}, // 500 × 2 = 1000
		{900 * mb, 1000 * mb, 50},  // would be 11: held at the floor
		{2000 * mb, 1000 * mb, 50}, // live above the target
	} {
		if got := Percent(c.live, c.target, 50, 400); got != c.want {
			t.Errorf("Percent(%d MB, %d MB) = %d, want %d", c.live/mb, c.target/mb, got, c.want)
		}
	}
}

// TestRunLowersGOGC holds a live heap that would put a GOGC=400 goal far
// above a small limit, and checks that Run lowers GOGC to what keeps the
// goal at the share, then restores Max when it stops.
func TestRunLowersGOGC(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	live := make([][]byte, 0, 32)
	for i := 0; i < 32; i++ {
		live = append(live, make([]byte, 1<<20)) // 32 MB live
	}
	ctx, cancel := context.WithCancel(context.Background())
	type tune struct {
		gogc int
		live uint64
	}
	tuned := make(chan tune, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Share: 0.75, Min: 25, Max: 400, Every: time.Millisecond,
			OnTune: func(p int, live uint64) {
				select {
				case tuned <- tune{p, live}:
				default: // the test has stopped listening
				}
			}})
	}()
	// The first tunes may see what was live before the 32 MB (a collection
	// that ran before they were allocated): wait for one that saw them.
	deadline := time.After(10 * time.Second)
	var got tune
	for got.live < 30<<20 {
		runtime.GC()
		select {
		case got = <-tuned:
		case <-deadline:
			t.Fatalf("GOGC was not tuned for a live heap of 32 MB within 10 s (last: %+v)", got)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// 75% of 64 MB is 48 MB; with 30-48 MB live the goal allows at most 60%, far below 400.
	if got.gogc >= 100 || got.gogc < 25 {
		t.Errorf("tuned GOGC = %d with %d MB live under a 48 MB target, want between 25 and 100", got.gogc, got.live>>20)
	}
	runtime.KeepAlive(live)
	cancel()
	<-done
	if p := debug.SetGCPercent(400); p != 400 {
		t.Errorf("GOGC after Run = %d, want Max (400)", p)
	}
}
