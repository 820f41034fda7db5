package bench

import (
	"testing"
	"time"
)

// TestFaultStats: the dip is measured between the first and the last
// kill, the recovery after the last.
func TestFaultStats(t *testing.T) {
	served := []int64{100, 100, 50, 0, 95, 40, 30, 60, 95, 100}
	var secs []SpotifySecond
	for i, s := range served {
		secs = append(secs, SpotifySecond{T: i + 1, TargetOpsS: 100, Served: s})
	}
	kills := []Kill{{T: 2.1}, {T: 4.2}, {T: 5.5, Error: "409"}, {T: 6.3}}
	f := faultStats(2*time.Second, kills, secs, len(secs))
	// Seconds 2..6 (0-based): 50, 0, 95, 40, 30.
	if f.Killed != 3 || f.SecondsBelow90 != 4 || f.LongestDipS != 2 || f.MinServedRatio != 0 || f.MeanServedRatio != 2.15/5 {
		t.Fatalf("%+v", f)
	}
	// After the kill at 6.3: second 7 (0.6), second 8 (0.95): its end is 9 s.
	if f.RecoveryS < 2.69 || f.RecoveryS > 2.71 {
		t.Fatalf("recovery %v s, want 2.7", f.RecoveryS)
	}
	if f := faultStats(time.Second, []Kill{{T: 8.5}}, secs[:9], 9); f.RecoveryS != -1 {
		t.Fatalf("no second after the last kill: recovery %v", f.RecoveryS)
	}
}
