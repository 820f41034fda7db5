package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

type countOp struct {
	n, limit int64
	fail     bool
}

func (o *countOp) Next(seq int64) bool { return o.limit == 0 || seq < o.limit }
func (o *countOp) Do(context.Context) error {
	o.n++
	if o.fail && o.n%2 == 0 {
		return errors.New("even")
	}
	return nil
}

func TestRunCountsAndBounds(t *testing.T) {
	ops := make([]*countOp, 3)
	m, err := Run(context.Background(), RunConfig{Clients: 3, OpsPerClient: 100}, func(i int) Op {
		ops[i] = &countOp{fail: i == 0}
		return ops[i]
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Ops != 250 || m.Errors != 50 || m.Hist.TotalCount() != 250 {
		t.Fatalf("ops %d errors %d hist %d", m.Ops, m.Errors, m.Hist.TotalCount())
	}
	if len(m.ErrorSamples) != 1 || m.ErrorSamples[0] != "even" {
		t.Fatalf("samples %v", m.ErrorSamples)
	}
	// An Op that runs out stops its client early.
	m, _ = Run(context.Background(), RunConfig{Clients: 2, OpsPerClient: 100}, func(int) Op { return &countOp{limit: 7} })
	if m.Ops != 14 {
		t.Fatalf("ops %d, want 14", m.Ops)
	}
	// A duration bound ends the run near the deadline.
	start := time.Now()
	m, _ = Run(context.Background(), RunConfig{Clients: 2, Duration: 300 * time.Millisecond}, func(int) Op {
		return OpFunc(func(context.Context) error { time.Sleep(time.Millisecond); return nil })
	})
	if el := time.Since(start); el < 300*time.Millisecond || m.Ops == 0 {
		t.Fatalf("ran %v, %d ops", el, m.Ops)
	}
	// Cancellation stops it and says so.
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	_, err = Run(ctx, RunConfig{Clients: 2, Unbounded: true}, func(int) Op {
		return OpFunc(func(context.Context) error {
			if calls.Add(1) == 50 {
				cancel()
			}
			return nil
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if (RunConfig{Clients: 1}).Validate() == nil || (RunConfig{Clients: 0, Duration: time.Second}).Validate() == nil {
		t.Fatal("invalid run configs accepted")
	}
}

// BenchmarkRunnerOverhead is the driver's own cost per operation (a no-op
// target): the ceiling nimbus bench can measure.
func BenchmarkRunnerOverhead(b *testing.B) {
	b.ReportAllocs()
	m, err := Run(context.Background(), RunConfig{Clients: 1, OpsPerClient: int64(b.N)}, func(int) Op {
		return OpFunc(func(context.Context) error { return nil })
	})
	if err != nil || m.Ops != int64(b.N) {
		b.Fatal(err)
	}
}
