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
	tuned := make(chan int, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Share: 0.75, Min: 25, Max: 400, Every: time.Millisecond,
			OnTune: func(p int, _ uint64) { tuned <- p }})
	}()
	deadline := time.After(10 * time.Second)
	var got int
wait:
	for {
		runtime.GC()
		select {
		case got = <-tuned:
			break wait
		case <-deadline:
			t.Fatal("GOGC was not tuned within 10 s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// 75% of 64 MB is 48 MB; with ~32 MB live the goal allows ~50%, far below 400.
	if got >= 100 || got < 25 {
		t.Errorf("tuned GOGC = %d with 32 MB live under a 48 MB target, want between 25 and 100", got)
	}
	runtime.KeepAlive(live)
	cancel()
	<-done
	if p := debug.SetGCPercent(400); p != 400 {
		t.Errorf("GOGC after Run = %d, want Max (400)", p)
	}
}
