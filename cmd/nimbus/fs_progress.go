package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// Progress of put, get and cat, drawn on stderr so that it never mixes with
// the data or the --json document on stdout.
//
// On a terminal a transfer of progressThreshold bytes or more gets one line
// that is redrawn in place (\r) at most every progressTTYEvery, and ends with
// a newline. -v forces the bar; when stderr is not a terminal, -v prints
// plain lines instead, at most every progressLogEvery, and a final line.
// Without -v and without a terminal nothing is printed.
//
// Updates happen on the copying goroutine, as bytes pass through: there is no
// timer goroutine to stop or race with, and the bar costs nothing between
// chunks. A stalled transfer therefore shows its last state until the next
// chunk or the error arrives.
const (
	progressThreshold = 8 << 20
	progressTTYEvery  = 200 * time.Millisecond
	progressLogEvery  = 2 * time.Second
	progressMinBar    = 10
	progressMaxBar    = 40
	progressMinLabel  = 8
	// progressRateAfter: before this much time has passed, the rate (and so
	// the ETA) of the first chunk says nothing; they show as unknown.
	progressRateAfter = time.Second
)

// progress tracks one transfer. A nil *progress is valid and does nothing,
// so that copies need no conditionals. Not safe for concurrent use.
type progress struct {
	w     io.Writer
	tty   bool             // w is a terminal: redraw one line in place
	width int              // terminal columns
	now   func() time.Time // injected clock
	label string
	total int64 // bytes expected; < 0 unknown
	// armed: drawing starts once done reaches progressThreshold (a terminal
	// without -v and a transfer of unknown size, such as a pipe on stdin).
	armed   bool
	done    int64
	start   time.Time
	last    time.Time // last draw
	drawn   bool      // something is on screen: finish must end the line
	lastLen int       // runes of the last tty line, to blank what is left
}

// progressOpts says how a shell decides whether to show progress.
type progressOpts struct {
	verbose bool // -v: always, even without a terminal
	// stdoutData: the transfer writes to stdout (cat, get -); when stdout is
	// the terminal too, the bar would be drawn over the data, so it is
	// shown only with -v.
	stdoutData bool
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is w's width in columns, 80 when unknown.
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 80
}

// wantsProgress reports whether a transfer could show progress at all, before
// its size is known: callers skip the extra Stat otherwise.
func (sh *shell) wantsProgress(o progressOpts) bool {
	return o.verbose || (isTerminal(sh.stderr) && !(o.stdoutData && isTerminal(sh.stdout)))
}

// newProgress starts the progress of a transfer of total bytes (< 0:
// unknown) named label, or returns nil when none is to be shown.
func (sh *shell) newProgress(label string, total int64, o progressOpts) *progress {
	if !sh.wantsProgress(o) {
		return nil
	}
	tty := isTerminal(sh.stderr)
	if !o.verbose && total >= 0 && total < progressThreshold {
		return nil
	}
	p := &progress{w: sh.stderr, tty: tty, width: 80, now: sh.now, label: label, total: total,
		armed: !o.verbose && total < 0}
	if tty {
		p.width = terminalWidth(sh.stderr)
	}
	p.start = p.now()
	p.last = p.start
	return p
}

// add records n more bytes and redraws when it is time.
func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.done += int64(n)
	if p.armed {
		if p.done < progressThreshold {
			return
		}
		p.armed = false
	}
	t := p.now()
	every := progressLogEvery
	if p.tty {
		every = progressTTYEvery
	}
	// A terminal shows the bar at once; a log gets its first line only
	// when the transfer is slow enough to need one (last starts as start).
	if (p.tty && !p.drawn) || t.Sub(p.last) >= every {
		p.draw(t, false)
	}
}

// finish ends the progress of the transfer. On success it draws the final
// state; on a terminal it ends the line either way, so that what follows (an
// error message, the next file's bar) starts on a line of its own. A failed
// transfer keeps its last state on screen: the error line says the rest.
func (p *progress) finish(err error) {
	if p == nil || p.armed {
		return
	}
	if err == nil {
		p.draw(p.now(), true)
	}
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// draw prints the current state: on a terminal it replaces the line, else
// it appends one.
func (p *progress) draw(t time.Time, final bool) {
	p.last, p.drawn = t, true
	line := p.line(t.Sub(p.start), final)
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	n := len([]rune(line))
	pad := ""
	if n < p.lastLen {
		pad = strings.Repeat(" ", p.lastLen-n)
	}
	p.lastLen = n
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
}

// line renders the state after elapsed:
//
//	terminal:  LABEL  [=====>    ]   45%   45.0 MiB/100.0 MiB   12.3 MiB/s  ETA 0:04
//	log:       LABEL: 45.0 MiB / 100 MiB (45%), 12.3 MiB/s, ETA 0:04
//
// the final state shows the elapsed time instead of the ETA. The rate is the
// average since the start, which is steadier than an instantaneous one; it
// and the ETA are unknown (--) for the first progressRateAfter. On a
// terminal every number has a fixed width, so the line keeps its width from
// frame to frame and the label its length.
func (p *progress) line(elapsed time.Duration, final bool) string {
	rate := 0.0
	if elapsed >= progressRateAfter || (final && elapsed > 0) {
		rate = float64(p.done) / elapsed.Seconds()
	}
	when := "ETA " + etaString(p.total-p.done, rate)
	switch {
	case final:
		when = "in " + clockString(elapsed)
	case p.total < 0:
		when = clockString(elapsed)
	}
	speed := "--/s"
	if rate > 0 || final {
		speed = byteCount(int64(rate)) + "/s"
	}
	if !p.tty {
		amount := byteCount(p.done)
		if p.total >= 0 {
			amount += " / " + byteCount(p.total)
		}
		pct := ""
		if p.total > 0 {
			pct = fmt.Sprintf(" (%d%%)", p.percent())
		}
		return fmt.Sprintf("%s: %s%s, %s, %s", p.label, amount, pct, speed, when)
	}
	// Widths: 9 columns hold any byteCount below 1000 of its unit.
	stats := fmt.Sprintf("  %9s", byteCount(p.done))
	if p.total >= 0 {
		stats = fmt.Sprintf("  %3d%%", p.percent()) + stats + "/" + byteCount(p.total)
	}
	stats += fmt.Sprintf("  %11s  ", speed)
	// The bar's width depends on the terminal's only, and the room for the
	// ETA is fixed (etaWidth), so nothing moves between frames. The label
	// gives way first (whole path components), then the bar, so that the
	// file's name stays whole; then the end of the numbers. One column stays
	// free so that the cursor never wraps.
	room := p.width - 1 - len(stats) - etaWidth
	stats += when
	bar := ""
	if p.total >= 0 {
		w := min(progressMaxBar, max(progressMinBar, p.width/5))
		if room-(w+4) >= max(progressMinLabel, len([]rune(shortestLabel(p.label)))) {
			bar = "  [" + barString(p.fraction(), w) + "]"
		}
	}
	line := []rune(strings.TrimLeft(shortenLabel(p.label, room-len(bar))+bar+stats, " "))
	return string(line[:min(len(line), max(p.width-1, 0))])
}

func (p *progress) fraction() float64 {
	if p.total <= 0 {
		return 1
	}
	return min(1, float64(p.done)/float64(p.total))
}

func (p *progress) percent() int { return int(100 * p.fraction()) }

// barString is a bar of width cells, frac of them full: "=====>    ".
func barString(frac float64, width int) string {
	full := int(frac * float64(width))
	if full >= width {
		return strings.Repeat("=", width)
	}
	return strings.Repeat("=", full) + ">" + strings.Repeat(" ", width-full-1)
}

// etaWidth is the room kept for the last field: "ETA 1:02:03".
const etaWidth = 11

// shortestLabel is what shortenLabel keeps before it cuts a name: "…/c.bin".
func shortestLabel(label string) string {
	if i := strings.LastIndexByte(label, '/'); i >= 0 {
		return "…" + label[i:]
	}
	return label
}

// shortenLabel cuts a label ("get /a/b/c.bin") to at most n runes without
// cutting a word: the path loses its leading components ("get …/b/c.bin"),
// then the command word goes ("…/c.bin"); only a file name that alone does
// not fit is cut, keeping its end.
func shortenLabel(label string, n int) string {
	if len([]rune(label)) <= n {
		return label
	}
	op, path, ok := strings.Cut(label, " ")
	if !ok {
		op, path = "", label
	}
	comps := strings.Split(path, "/")
	for _, prefix := range []string{op + " ", ""} {
		if op == "" && prefix != "" {
			continue
		}
		for k := 1; k < len(comps); k++ {
			if c := prefix + "…/" + strings.Join(comps[k:], "/"); len([]rune(c)) <= n {
				return c
			}
		}
	}
	return shortenLeft(comps[len(comps)-1], n)
}

// shortenLeft cuts s to at most n runes, keeping its end (the file name):
// "…/deep/name". n < 1 gives "".
func shortenLeft(s string, n int) string {
	r := []rune(s)
	switch {
	case len(r) <= n:
		return s
	case n < 1:
		return ""
	}
	return "…" + string(r[len(r)-n+1:])
}

// byteCount renders n bytes with a binary unit and one decimal: "0 B",
// "1023 B", "1.5 KiB", "100.0 MiB".
func byteCount(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", max(n, 0))
	}
	const units = "KMGTPE"
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// etaString is the time left for rest bytes at rate bytes/s, rounded up
// (a transfer not yet done never shows 0:00): "0:04", "1:02:03", or
// "--:--" when unknown.
func etaString(rest int64, rate float64) string {
	if rest < 0 || rate <= 0 {
		return "--:--"
	}
	d := time.Duration(float64(rest) / rate * float64(time.Second))
	if d >= 100*time.Hour {
		return "--:--" // a guess this far out is noise, and would not fit
	}
	return clockString(d + time.Second - 1)
}

// clockString renders d, truncated to the second, as m:ss or h:mm:ss.
func clockString(d time.Duration) string {
	s := int64(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// progressReader counts the bytes read through it into p.
type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}

// track wraps r so that reads advance p; with a nil p it returns r itself,
// keeping io.Copy's WriterTo/ReaderFrom shortcuts.
func track(r io.Reader, p *progress) io.Reader {
	if p == nil {
		return r
	}
	return progressReader{r: r, p: p}
}
