package bench

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// Progress reports a long phase: a bar redrawn in place on a terminal, or a
// line every Interval otherwise. Done is advanced with Add from any
// goroutine; Start and Stop bracket the phase.
type Progress struct {
	W        io.Writer // nil: silent
	TTY      bool      // W is a terminal: draw a bar
	Interval time.Duration

	label string
	total int64
	done  atomic.Int64
	start time.Time
	stop  chan struct{}
	ended chan struct{}
}

// Start begins a phase of total units.
func (p *Progress) Start(label string, total int64) {
	if p == nil || p.W == nil {
		return
	}
	p.label, p.total, p.start = label, total, time.Now()
	p.done.Store(0)
	p.stop, p.ended = make(chan struct{}), make(chan struct{})
	every := p.Interval
	if every <= 0 {
		every = 5 * time.Second
		if p.TTY {
			every = 200 * time.Millisecond
		}
	}
	go func() {
		defer close(p.ended)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw(true)
				return
			case <-t.C:
				p.draw(false)
			}
		}
	}()
}

// Add records n more units done.
func (p *Progress) Add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

// Stop ends the phase and prints its final state.
func (p *Progress) Stop() {
	if p == nil || p.W == nil || p.stop == nil {
		return
	}
	close(p.stop)
	<-p.ended
	p.stop = nil
}

func (p *Progress) draw(final bool) {
	done := p.done.Load()
	el := time.Since(p.start)
	rate := float64(done) / el.Seconds()
	frac := 0.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	eta := "-"
	if rate > 0 && done < p.total {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Truncate(time.Second).String()
	}
	if p.TTY {
		const width = 30
		n := int(frac * width)
		bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
		fmt.Fprintf(p.W, "\r%s [%s] %5.1f%% %d/%d %.0f/s eta %s  ", p.label, bar, 100*frac, done, p.total, rate, eta)
		if final {
			fmt.Fprintln(p.W)
		}
		return
	}
	fmt.Fprintf(p.W, "%s: %d/%d (%.1f%%) %.0f/s elapsed %s eta %s\n", p.label, done, p.total, 100*frac, rate, el.Truncate(time.Second), eta)
}
