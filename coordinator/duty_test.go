package coordinator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
)

// dutyLog records which member's duty runs, and fails on two at once.
type dutyLog struct {
	t       *testing.T
	running atomic.Int32
	events  chan string
}

func (dl *dutyLog) duty(name string) coordinator.Duty {
	return coordinator.Duty{Election: "lease-monitor", Run: func(ctx context.Context) {
		if n := dl.running.Add(1); n != 1 {
			dl.t.Errorf("%d duties run at once", n)
		}
		dl.events <- "start " + name
		<-ctx.Done()
		dl.running.Add(-1)
		dl.events <- "stop " + name
	}}
}

func (dl *dutyLog) want(ev string) {
	dl.t.Helper()
	select {
	case got := <-dl.events:
		if got != ev {
			dl.t.Fatalf("duty event %q, want %q", got, ev)
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing threshold
		dl.t.Fatalf("no duty event, want %q", ev)
	}
}

// TestRunDutyHandOver: the first member to campaign runs the duty alone;
// cut off from the coordinator, it stops at its deadline (before its lease
// expires), and only once the lease expired does the other member start.
func TestRunDutyHandOver(t *testing.T) {
	clock := coordinator.NewManual(time.Unix(1000, 0))
	cfg := memcoord.DefaultConfig()
	cfg.Clock = clock
	c, err := memcoord.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	join := func(id string) *memcoord.Session {
		s, err := c.Join(ctx, coordinator.Member{ID: id, Addr: "http://" + id})
		if err != nil {
			t.Fatal(err)
		}
		return s.(*memcoord.Session)
	}
	a, b := join("a"), join("b")
	dl := &dutyLog{t: t, events: make(chan string, 8)}
	var leading sync.Map
	run := func(s coordinator.Session, name string, ctx context.Context) chan error {
		d := dl.duty(name)
		d.Clock = clock
		d.Leading = func(on bool) { leading.Store(name, on) }
		done := make(chan error, 1)
		go func() { done <- coordinator.RunDuty(ctx, s, d) }()
		return done
	}
	aDone := run(a, "a", ctx)
	dl.want("start a")
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	bDone := run(b, "b", bctx)
	// b campaigns behind a (it may not have reached the queue yet; either
	// way it must not start while a leads).
	if m, ok, err := c.Leader(ctx, "lease-monitor"); err != nil || !ok || m.ID != "a" {
		t.Fatalf("leader %v %v %v, want a", m, ok, err)
	}

	a.Cut()
	clock.Advance(cfg.TTL - cfg.Margin) // a's deadline: a stops
	dl.want("stop a")
	if err := <-aDone; !errors.Is(err, coordinator.ErrSessionLost) {
		t.Fatalf("RunDuty of the lost session returned %v, want ErrSessionLost", err)
	}
	if on, _ := leading.Load("a"); on != false {
		t.Fatal("a's Leading(false) was not called")
	}
	clock.Advance(cfg.Margin) // a's lease expires: b is elected
	dl.want("start b")
	bcancel()
	dl.want("stop b")
	if err := <-bDone; err != nil {
		t.Fatalf("RunDuty after its ctx was cancelled: %v", err)
	}
	if _, ok, err := c.Leader(ctx, "lease-monitor"); err != nil || ok {
		t.Fatalf("b did not resign: leader ok=%v err=%v", ok, err)
	}
}

// fixedSession leads at once and never renews: its deadline is fixed, and
// it never reports itself lost (as a backend whose Lost timer lags).
type fixedSession struct {
	coordinator.Session
	deadline time.Time
	lost     chan struct{}
	resigned atomic.Bool
}

func (s *fixedSession) Member() coordinator.Member { return coordinator.Member{ID: "x"} }
func (s *fixedSession) Deadline() time.Time        { return s.deadline }
func (s *fixedSession) Lost() <-chan struct{}      { return s.lost }
func (s *fixedSession) Err() error                 { return nil }
func (s *fixedSession) Campaign(ctx context.Context, _ string) (coordinator.Leadership, error) {
	if s.resigned.Load() {
		<-ctx.Done() // a second term is not needed by the test
		return nil, ctx.Err()
	}
	return fixedLeadership{s}, nil
}

type fixedLeadership struct{ s *fixedSession }

func (fixedLeadership) Election() string               { return "d" }
func (fixedLeadership) Done() <-chan struct{}          { return nil }
func (l fixedLeadership) Resign(context.Context) error { l.s.resigned.Store(true); return nil }

// TestRunDutyStopsAtDeadline: the duty's ctx ends when the session's
// deadline passes on the coordinator's clock, even when neither the
// leadership nor the session says so, and the leadership is given up.
func TestRunDutyStopsAtDeadline(t *testing.T) {
	clock := coordinator.NewManual(time.Unix(1000, 0))
	s := &fixedSession{deadline: clock.Now().Add(5 * time.Second), lost: make(chan struct{})}
	dl := &dutyLog{t: t, events: make(chan string, 8)}
	d := dl.duty("x")
	d.Election = "d"
	d.Clock = clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- coordinator.RunDuty(ctx, s, d) }()
	dl.want("start x")
	clock.Advance(4 * time.Second)
	select {
	case ev := <-dl.events:
		t.Fatalf("%s before the deadline", ev)
	default:
	}
	clock.Advance(time.Second)
	dl.want("stop x")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !s.resigned.Load() {
		t.Fatal("the leadership was not resigned after the deadline passed")
	}
}
