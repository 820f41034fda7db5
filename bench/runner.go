package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Op is one closed-loop client's work. A runner calls Next, untimed, to build
// the arguments of the next operation, then Do, timed. An Op belongs to one
// client goroutine and need not be safe for concurrent use.
type Op interface {
	// Next prepares operation number seq (0, 1, ...); false means the client
	// has nothing left to do.
	Next(seq int64) bool
	// Do performs the prepared operation.
	Do(ctx context.Context) error
}

// OpFunc adapts a function to an Op that never runs out.
type OpFunc func(ctx context.Context) error

// Next always returns true.
func (OpFunc) Next(int64) bool { return true }

// Do calls f.
func (f OpFunc) Do(ctx context.Context) error { return f(ctx) }

// RunConfig bounds a closed-loop run: by time, or by operations per client
// (whichever of the two is set; both set means the first reached).
type RunConfig struct {
	Clients      int
	Duration     time.Duration
	OpsPerClient int64
	// Unbounded runs until every client's Op runs out (prepare, restores).
	Unbounded bool
	// Probe, when set, reads the server's counters just before the clients
	// start and just after they stop (Measurement.Server).
	Probe *ServerProbe
}

// Validate reports a run with no bound or no clients.
func (c RunConfig) Validate() error {
	switch {
	case c.Clients < 1:
		return errors.New("bench: at least one client is needed")
	case c.Duration <= 0 && c.OpsPerClient <= 0 && !c.Unbounded:
		return errors.New("bench: a run needs a duration or a number of operations per client")
	case c.Duration < 0 || c.OpsPerClient < 0:
		return errors.New("bench: duration and operations per client must not be negative")
	}
	return nil
}

// Histogram bounds: latencies are recorded in microseconds, from 1 µs to one
// minute, with three significant digits (about 130 KB per client).
const (
	histMinUs = 1
	histMaxUs = 60_000_000
	histSig   = 3
)

// Measurement is what a run measured, before it is labelled as a Result.
type Measurement struct {
	Clients  int
	Ops      int64 // successful operations
	Errors   int64
	Duration time.Duration
	Hist     *hdrhistogram.Histogram // successful operations, µs
	Series   []SecondPoint           // one point per second of the run
	// ErrorSamples holds up to five distinct error messages.
	ErrorSamples []string
	// DriverCPU is this process's CPU time over the run (all its clients).
	DriverCPU time.Duration
	// Server is what RunConfig.Probe read (nil without one, or when a
	// reading failed: ServerError says why).
	Server      *ServerStats
	ServerError string
}

// Throughput is successful operations per second.
func (m *Measurement) Throughput() float64 {
	if m.Duration <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Duration.Seconds()
}

type clientStats struct {
	hist     *hdrhistogram.Histogram
	ops      int64
	errs     int64
	series   []SecondPoint
	firstErr []string
}

func (s *clientStats) tick(sec int, failed bool) {
	for len(s.series) <= sec {
		s.series = append(s.series, SecondPoint{T: len(s.series) + 1})
	}
	if failed {
		s.series[sec].Errors++
	} else {
		s.series[sec].Ops++
	}
}

// Run drives cfg.Clients closed-loop clients, client i running ops(i), and
// merges what they measured. All clients start together; a client stops at
// the deadline, after OpsPerClient operations, when its Op runs out, or when
// ctx is done. An operation in flight at the deadline is finished and counted.
// Run returns an error only for a bad configuration or a cancelled ctx.
func Run(ctx context.Context, cfg RunConfig, ops func(client int) Op) (*Measurement, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clients := make([]Op, cfg.Clients)
	stats := make([]clientStats, cfg.Clients)
	for i := range clients {
		clients[i] = ops(i)
		stats[i].hist = hdrhistogram.New(histMinUs, histMaxUs, histSig)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var t0 time.Time
	var deadline time.Time
	for i := range clients {
		wg.Add(1)
		go func(op Op, st *clientStats) {
			defer wg.Done()
			<-start
			for seq := int64(0); cfg.OpsPerClient <= 0 || seq < cfg.OpsPerClient; seq++ {
				if ctx.Err() != nil || !op.Next(seq) {
					return
				}
				begin := time.Now()
				err := op.Do(ctx)
				end := time.Now()
				st.tick(int(end.Sub(t0)/time.Second), err != nil)
				if err != nil {
					st.errs++
					if len(st.firstErr) < 5 {
						st.firstErr = append(st.firstErr, err.Error())
					}
				} else {
					st.ops++
					us := end.Sub(begin).Microseconds()
					if us < histMinUs {
						us = histMinUs
					}
					if us > histMaxUs {
						us = histMaxUs
					}
					_ = st.hist.RecordValue(us) // in range by construction
				}
				if cfg.Duration > 0 && !end.Before(deadline) {
					return
				}
			}
		}(clients[i], &stats[i])
	}
	var before counters
	var probeErr error
	if cfg.Probe != nil {
		before, probeErr = cfg.Probe.read(ctx)
	}
	cpu0 := processCPU()
	t0 = time.Now()
	deadline = t0.Add(cfg.Duration)
	close(start)
	wg.Wait()
	m := &Measurement{Clients: cfg.Clients, Duration: time.Since(t0), Hist: hdrhistogram.New(histMinUs, histMaxUs, histSig),
		DriverCPU: processCPU() - cpu0}
	var after counters
	if cfg.Probe != nil && probeErr == nil {
		after, probeErr = cfg.Probe.read(ctx)
	}
	seen := map[string]bool{}
	for i := range stats {
		st := &stats[i]
		m.Ops += st.ops
		m.Errors += st.errs
		m.Hist.Merge(st.hist)
		for j, p := range st.series {
			for len(m.Series) <= j {
				m.Series = append(m.Series, SecondPoint{T: len(m.Series) + 1})
			}
			m.Series[j].Ops += p.Ops
			m.Series[j].Errors += p.Errors
		}
		for _, e := range st.firstErr {
			if !seen[e] && len(m.ErrorSamples) < 5 {
				seen[e] = true
				m.ErrorSamples = append(m.ErrorSamples, e)
			}
		}
	}
	switch {
	case probeErr != nil:
		m.ServerError = probeErr.Error()
	case cfg.Probe != nil:
		m.Server = cfg.Probe.stats(before, after, m.Ops)
	}
	if err := ctx.Err(); err != nil {
		return m, fmt.Errorf("bench: run interrupted: %w", err)
	}
	return m, nil
}
