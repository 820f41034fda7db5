package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestProgress(tty bool, total int64, armed bool) (*progress, *strings.Builder, *fakeClock) {
	var b strings.Builder
	c := &fakeClock{t: harnessTime}
	p := &progress{w: &b, tty: tty, width: 100, now: c.now, label: "put big.bin", total: total,
		armed: armed, start: c.t, last: c.t}
	return p, &b, c
}

// TestProgressTerminal draws a bar in place: the first chunk draws, chunks
// within progressTTYEvery do not, and the end replaces the ETA with the
// elapsed time and ends the line.
func TestProgressTerminal(t *testing.T) {
	p, b, c := newTestProgress(true, 100<<20, false)
	c.advance(time.Second)
	p.add(10 << 20)
	c.advance(50 * time.Millisecond)
	p.add(1) // too soon: no redraw
	c.advance(time.Second)
	p.add(40<<20 - 1)
	c.advance(3 * time.Second)
	p.add(50 << 20)
	p.finish(nil)
	frames := strings.Split(b.String(), "\r")[1:]
	if len(frames) != 4 {
		t.Fatalf("%d frames, want 4: %q", len(frames), b.String())
	}
	want := []string{
		"put big.bin  [==>                 ]   10%   10.0 MiB/100.0 MiB   10.0 MiB/s  ETA 0:09",
		"put big.bin  [==========>         ]   50%   50.0 MiB/100.0 MiB   24.4 MiB/s  ETA 0:03",
		"put big.bin  [====================]  100%  100.0 MiB/100.0 MiB   19.8 MiB/s  ETA 0:00",
		"put big.bin  [====================]  100%  100.0 MiB/100.0 MiB   19.8 MiB/s  in 0:05 \n",
	}
	for i, w := range want {
		if frames[i] != w {
			t.Errorf("frame %d:\n got %q\nwant %q", i, frames[i], w)
		}
		if n := len([]rune(strings.TrimSuffix(frames[i], "\n"))); n > p.width-1 {
			t.Errorf("frame %d is %d columns wide, terminal has %d", i, n, p.width)
		}
	}
}

// TestProgressNarrowTerminal: the label gives way first, then the bar (which
// goes before the file's name is cut).
func TestProgressNarrowTerminal(t *testing.T) {
	p, b, _ := newTestProgress(true, 1000, false)
	p.label = "get /user/alice/a/very/long/path/to/the/file.bin"
	for _, w := range []int{200, 100, 80, 60, 30} {
		b.Reset()
		p.width, p.drawn = w, false
		p.add(0)
		line := strings.TrimPrefix(b.String(), "\r")
		if n := len([]rune(strings.TrimRight(line, " "))); n > w-1 {
			t.Errorf("width %d: line of %d: %q", w, n, line)
		}
		if w >= 100 && !strings.Contains(line, "[") {
			t.Errorf("width %d: no bar: %q", w, line)
		}
		if w < 200 && w >= 80 && !strings.Contains(line, "…/") || w == 60 && !strings.HasPrefix(line, "file.bin ") {
			t.Errorf("width %d: label not shortened: %q", w, line)
		}
	}
}

// TestProgressLog: without a terminal (-v), whole lines at most every
// progressLogEvery, and a final line.
func TestProgressLog(t *testing.T) {
	p, b, c := newTestProgress(false, 4<<20, false)
	c.advance(time.Second)
	p.add(1 << 20) // a log waits progressLogEvery for its first line
	c.advance(time.Second)
	p.add(1 << 20)
	c.advance(time.Second)
	p.add(2 << 20) // too soon after the last line
	p.finish(nil)
	want := "put big.bin: 2.0 MiB / 4.0 MiB (50%), 1.0 MiB/s, ETA 0:02\n" +
		"put big.bin: 4.0 MiB / 4.0 MiB (100%), 1.3 MiB/s, in 0:03\n"
	expectEq(t, "log lines", b.String(), want)
}

// TestProgressUnknownSize: a pipe on a terminal starts drawing only once
// progressThreshold bytes have passed; no total, no bar, no ETA.
func TestProgressUnknownSize(t *testing.T) {
	p, b, c := newTestProgress(true, -1, true)
	p.add(progressThreshold - 1)
	p.finish(nil)
	if b.Len() != 0 {
		t.Errorf("small pipe drew %q", b.String())
	}
	p, b, c = newTestProgress(true, -1, true)
	p.add(progressThreshold - 1)
	c.advance(2 * time.Second)
	p.add(1)
	p.finish(nil)
	expectEq(t, "pipe", b.String(),
		"\rput big.bin    8.0 MiB    4.0 MiB/s  0:02\rput big.bin    8.0 MiB    4.0 MiB/s  in 0:02\n")
}

// TestProgressError: a failed transfer keeps its last state and, on a
// terminal, ends the line so that the error message starts on its own.
func TestProgressError(t *testing.T) {
	p, b, _ := newTestProgress(true, 100, false)
	p.add(10)
	p.finish(errors.New("boom"))
	if s := b.String(); strings.Count(s, "\r") != 1 || !strings.HasSuffix(s, "\n") || strings.Contains(s, " in ") {
		t.Errorf("tty error: %q", s)
	}
	p, b, c := newTestProgress(false, 100, false)
	p.add(10)
	c.advance(progressLogEvery)
	p.add(10)
	p.finish(errors.New("boom"))
	expectEq(t, "log error", b.String(), "put big.bin: 20 B / 100 B (20%), 10 B/s, ETA 0:08\n")
	var nilP *progress // no progress: every method is a no-op
	nilP.add(1)
	nilP.finish(nil)
}

// TestProgressShrinkingLine: a shorter line blanks the rest of the longer
// one it replaces.
func TestProgressShrinkingLine(t *testing.T) {
	p, b, c := newTestProgress(true, -1, false)
	c.advance(time.Millisecond)
	p.add(1 << 30) // a very high rate
	c.advance(time.Hour)
	p.finish(nil)
	frames := strings.Split(b.String(), "\r")[1:]
	if len(frames) != 2 || len(strings.TrimSuffix(frames[1], "\n")) < len(frames[0]) {
		t.Errorf("frames %q", frames)
	}
}

// TestProgressSteadyWidth: at 80 columns a long label is cut at a path
// component, never inside a word, and every frame puts the numbers in the
// same columns; the first frame, with no data yet, shows no rate or ETA.
func TestProgressSteadyWidth(t *testing.T) {
	p, b, c := newTestProgress(true, 3<<30, false)
	p.width = 80
	p.label = "put /user/alice/experiments/2026/run-42/checkpoints/model.safetensors"
	p.add(1) // the first chunk draws at once
	var frames []string
	for i, n := range []int64{1, 900 << 10, 5 << 20, 300 << 20, 1 << 30, 3<<30 - (1<<30 + 300<<20 + 5<<20 + 900<<10 + 2)} {
		c.advance(time.Second + time.Duration(i)*37*time.Millisecond)
		p.add(int(n))
	}
	p.finish(nil)
	frames = strings.Split(strings.TrimSuffix(b.String(), "\n"), "\r")[1:]
	if !strings.Contains(frames[0], "--/s") || !strings.Contains(frames[0], "ETA --:--") {
		t.Errorf("first frame shows a rate or ETA from no data: %q", frames[0])
	}
	label := "put …/model.safetensors " // the bar gives way to the whole name
	if strings.Contains(frames[0], "[") {
		t.Errorf("bar kept over the name: %q", frames[0])
	}
	pos := func(f string) int { return strings.Index(f, "/s ") } // where the rate ends
	for i, f := range frames {
		if n := len([]rune(strings.TrimRight(f, " "))); n > 79 {
			t.Errorf("frame %d is %d columns: %q", i, n, f)
		}
		if !strings.HasPrefix(f, label) || len([]rune(f[:pos(f)])) != len([]rune(frames[0][:pos(frames[0])])) {
			t.Errorf("frame %d moves:\n%q\n%q", i, frames[0], f)
		}
	}
	expectEq(t, "label fits", shortenLabel("get /a/b/c.bin", 14), "get /a/b/c.bin")
	expectEq(t, "label loses components", shortenLabel("get /a/bb/c.bin", 14), "get …/bb/c.bin")
	expectEq(t, "label loses the command", shortenLabel("get /a/bb/c.bin", 10), "…/bb/c.bin")
	expectEq(t, "only the name", shortenLabel("get /a/bb/long-name.bin", 7), "…me.bin")
}

func TestProgressFormats(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		100 << 20: "100.0 MiB", 3 << 40: "3.0 TiB"} {
		expectEq(t, "byteCount", byteCount(n), want)
	}
	for d, want := range map[time.Duration]string{0: "0:00", time.Millisecond: "0:00", 59999 * time.Millisecond: "0:59",
		61 * time.Second: "1:01", 3723 * time.Second: "1:02:03"} {
		expectEq(t, "clockString", clockString(d), want)
	}
	expectEq(t, "eta unknown", etaString(10, 0), "--:--")
	expectEq(t, "eta", etaString(10<<20, 1<<20), "0:10")
	expectEq(t, "eta rounds up", etaString(1, 1<<20), "0:01")
	expectEq(t, "shorten", shortenLeft("/a/b/c.bin", 7), "…/c.bin")
	expectEq(t, "shorten fits", shortenLeft("abc", 3), "abc")
	expectEq(t, "shorten none", shortenLeft("abc", 0), "")
	expectEq(t, "bar", barString(0.5, 10), "=====>    ")
	expectEq(t, "bar full", barString(1, 4), "====")
}
