package pebblestore

import (
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// TestLogLimiter: one kind of line is let through at most once per period,
// and the next one let through counts those held back; kinds are apart.
// Pebble reported a failing flush on every retry: hundreds of thousands of
// lines.
func TestLogLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newLogLimiter(10*time.Second, func() time.Time { return now })
	type step struct {
		advance time.Duration
		kind    string
		ok      bool
		skipped int
	}
	for i, s := range []step{
		{0, "a", true, 0},
		{time.Second, "a", false, 0},
		{time.Second, "a", false, 0},
		{0, "b", true, 0},
		{8 * time.Second, "a", true, 2},
		{time.Second, "a", false, 0},
		{10 * time.Second, "a", true, 1},
		{0, "b", true, 0},
	} {
		now = now.Add(s.advance)
		ok, skipped := l.allow(s.kind)
		if ok != s.ok || skipped != s.skipped {
			t.Errorf("step %d (%s): allow = %v, %d; want %v, %d", i, s.kind, ok, skipped, s.ok, s.skipped)
		}
	}
}

// TestPebbleErrorfLimited: a Pebble error line repeated in a loop is logged
// once per period, with the count of those not logged.
func TestPebbleErrorfLimited(t *testing.T) {
	var buf testproc.Log
	now := time.Unix(1_000_000, 0)
	l := pebbleLogger{log: newTextLogger(&buf), limit: newLogLimiter(10*time.Second, func() time.Time { return now })}
	for i := range 100_000 {
		l.Errorf("flush failed: %d", i)
	}
	now = now.Add(10 * time.Second)
	l.Errorf("flush failed: %d", -1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "repeats_not_logged=99999") {
		t.Fatalf("logged %d lines, want 2, the second counting 99999 held back:\n%s", len(lines), buf.String())
	}
}
