package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeHost starts fake instances after a delay; the first failFirst
// starts fail. The Local loop is what is tested, under -race; the real
// hosts have their own tests (ProcessHost in cmd/nimbus, the in-process
// one in server, the whole platform end to end in tests/e2e).
type fakeHost struct {
	delay     time.Duration
	failFirst int32
	starts    atomic.Int32
	mu        sync.Mutex
	live      map[InstanceID]*fakeInstance
	stopped   []InstanceID
	// stopErr: Stop ends the instance but fails, as a process killed
	// after its graceful stop timed out does.
	stopErr error
}

type fakeInstance struct {
	id   InstanceID
	h    *fakeHost
	once sync.Once
	done chan struct{}
	// Its load on connections, as its GET /status/load would answer
	// (readFakeLoad); failing: the poll fails.
	loadMu  sync.Mutex
	load    ConnLoad
	failing bool
}

func (i *fakeInstance) setLoad(inflight int, more int64, failing bool) {
	i.loadMu.Lock()
	i.load.InFlight = inflight
	i.load.Requests += more
	i.failing = failing
	i.loadMu.Unlock()
}

// readFakeLoad is the test platforms' LocalOptions.ReadLoad.
func readFakeLoad(_ context.Context, inst Instance) (ConnLoad, error) {
	i, ok := inst.(*fakeInstance)
	if !ok {
		return ConnLoad{}, nil // the gateway tests' instances: no load on connections
	}
	i.loadMu.Lock()
	defer i.loadMu.Unlock()
	if i.failing {
		return ConnLoad{}, errors.New("fake poll fails")
	}
	return i.load, nil
}

func (h *fakeHost) Start(ctx context.Context, spec Spec) (Instance, error) {
	n := h.starts.Add(1)
	select {
	case <-time.After(h.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if n <= h.failFirst {
		return nil, fmt.Errorf("fake start %d fails", n)
	}
	in := &fakeInstance{id: spec.ID, h: h, done: make(chan struct{})}
	h.mu.Lock()
	if h.live == nil {
		h.live = map[InstanceID]*fakeInstance{}
	}
	h.live[spec.ID] = in
	h.mu.Unlock()
	return in, nil
}

func (h *fakeHost) instance(id InstanceID) *fakeInstance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live[id]
}

func (i *fakeInstance) Addr() string { return fmt.Sprintf("http://fake-%d", i.id) }
func (i *fakeInstance) Stop(context.Context) error {
	i.once.Do(func() {
		i.h.mu.Lock()
		i.h.stopped = append(i.h.stopped, i.id)
		delete(i.h.live, i.id)
		i.h.mu.Unlock()
		close(i.done)
	})
	return i.h.stopErr
}
func (i *fakeInstance) Kill() error {
	i.once.Do(func() {
		i.h.mu.Lock()
		delete(i.h.live, i.id)
		i.h.mu.Unlock()
		close(i.done)
	})
	return nil
}
func (i *fakeInstance) Done() <-chan struct{} { return i.done }

func newTestLocal(t *testing.T, cfg Config, h Host) (*Local, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := NewLocal(cfg, h, LocalOptions{Registerer: reg, Tick: 5 * time.Millisecond, StartBackoff: 5 * time.Millisecond,
		LoadPoll: 5 * time.Millisecond, ReadLoad: readFakeLoad})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return l, reg
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func count(l *Local, dep int, state string) int {
	n := 0
	for _, s := range l.Instances() {
		if s.Deployment == dep && (state == "" || s.State == state) {
			n++
		}
	}
	return n
}

// TestLocalScalesAndReclaims: a burst held open scales a deployment past
// one instance, every invocation gets a slot, cold starts are timed, and
// once idle past the keep-alive the extra instances are stopped down to
// the minimum.
func TestLocalScalesAndReclaims(t *testing.T) {
	h := &fakeHost{delay: 10 * time.Millisecond}
	cfg := Config{Deployments: 2, Concurrency: 2, MaxInstances: 6, MaxPerDeployment: 4, MinInstances: 1, KeepAlive: 50 * time.Millisecond, MaxQueue: 100}
	l, reg := newTestLocal(t, cfg, h)
	ctx := context.Background()
	var leases []*Lease
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 7 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			le, err := l.Invoke(ctx, 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			leases = append(leases, le)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := count(l, 1, StateServing); n != 4 {
		t.Fatalf("7 invocations held at concurrency 2: %d instances serving deployment 1, want 4", n)
	}
	perInstance := map[InstanceID]int{}
	for _, le := range leases {
		perInstance[le.ID()]++
		if le.Deployment() != 1 || le.Addr() == "" {
			t.Fatalf("lease %+v", le.rec)
		}
	}
	for id, n := range perInstance {
		if n > cfg.Concurrency {
			t.Fatalf("instance %d holds %d invocations, concurrency %d", id, n, cfg.Concurrency)
		}
	}
	for _, s := range l.Instances() {
		if s.State == StateServing && s.ColdStart < 10*time.Millisecond {
			t.Fatalf("instance %d: cold start %v, the host takes 10 ms", s.ID, s.ColdStart)
		}
	}
	for _, le := range leases {
		le.Release()
		le.Release() // twice is harmless
	}
	waitFor(t, "the reclaim down to the minimum", func() bool { return count(l, 1, "") == 1 && count(l, 0, "") == 1 })
	inv, cold := l.Totals()
	if inv != 7 || cold < 5 {
		t.Fatalf("totals: %d invocations, %d cold starts; want 7 and at least 5", inv, cold)
	}
	if got := testutil.ToFloat64(l.met.invocations.WithLabelValues("1")); got != 7 {
		t.Fatalf("invocations_total{deployment=1} = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "nimbus_platform_cold_start_seconds"); err != nil || n != 1 {
		t.Fatalf("cold start histogram: %d series, %v", n, err)
	}
	h.mu.Lock()
	stopped := len(h.stopped)
	h.mu.Unlock()
	if stopped != 3 {
		t.Fatalf("%d instances stopped, want the 3 extra ones", stopped)
	}
}

// TestLocalReplacesCrashed: an instance that exits on its own is
// reported gone and replaced; invocations go on to the new one.
func TestLocalReplacesCrashed(t *testing.T) {
	h := &fakeHost{delay: 2 * time.Millisecond}
	cfg := Config{Deployments: 1, Concurrency: 4, MaxInstances: 2, MaxPerDeployment: 2, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 10}
	l, _ := newTestLocal(t, cfg, h)
	ctx := context.Background()
	le, err := l.Invoke(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := le.ID()
	_ = h.instance(first).Kill()
	<-le.Instance().Done()
	le.Release() // after the crash: harmless
	waitFor(t, "a replacement", func() bool {
		for _, s := range l.Instances() {
			if s.ID != first && s.State == StateServing {
				return true
			}
		}
		return false
	})
	le, err = l.Invoke(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if le.ID() == first {
		t.Fatalf("invocation after the crash went to the crashed instance %d", first)
	}
	le.Release()
	if got := testutil.ToFloat64(l.met.crashes); got != 1 {
		t.Fatalf("crashes_total = %v", got)
	}
}

// TestLocalBusyAndCancel: a full queue refuses with ErrBusy; a caller that
// gives up is withdrawn from the queue (it does not keep an instance
// starting, nor take a slot later).
func TestLocalBusyAndCancel(t *testing.T) {
	h := &fakeHost{delay: time.Millisecond}
	cfg := Config{Deployments: 1, Concurrency: 1, MaxInstances: 1, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 1}
	l, _ := newTestLocal(t, cfg, h)
	ctx := context.Background()
	held, err := l.Invoke(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		le, err := l.Invoke(wctx, 0)
		if err == nil {
			le.Release()
		}
		waiting <- err
	}()
	waitFor(t, "the second invocation to queue", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.mu.p.Queued(0) == 1
	})
	if _, err := l.Invoke(ctx, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("third invocation with the queue full: %v, want ErrBusy", err)
	}
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled invocation: %v", err)
	}
	l.mu.Lock()
	q := l.mu.p.Queued(0)
	l.mu.Unlock()
	if q != 0 {
		t.Fatalf("queue %d after the cancel, want 0", q)
	}
	held.Release()
	le, err := l.Invoke(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	le.Release()
	if _, err := l.Invoke(ctx, 5); !errors.Is(err, ErrNoDeployment) {
		t.Fatalf("deployment 5 of 1: %v", err)
	}
}

// TestLocalStartFailures: failed starts are retried after a backoff, and
// the waiting invocation is served once a start succeeds.
func TestLocalStartFailures(t *testing.T) {
	h := &fakeHost{delay: time.Millisecond, failFirst: 3}
	cfg := Config{Deployments: 1, Concurrency: 1, MaxInstances: 1, MaxPerDeployment: 1, MinInstances: 0, KeepAlive: time.Hour, MaxQueue: 5}
	l, _ := newTestLocal(t, cfg, h)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	le, err := l.Invoke(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	le.Release()
	if n := h.starts.Load(); n != 4 {
		t.Fatalf("%d starts, want 3 failures and a success", n)
	}
	if got := testutil.ToFloat64(l.met.startFails); got != 3 {
		t.Fatalf("start_failures_total = %v", got)
	}
}

// TestLocalClose: Close stops every instance and fails waiting
// invocations; Invoke after it fails with ErrClosed.
func TestLocalClose(t *testing.T) {
	h := &fakeHost{delay: time.Millisecond}
	cfg := Config{Deployments: 2, Concurrency: 1, MaxInstances: 4, MaxPerDeployment: 2, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 5}
	l, err := NewLocal(cfg, h, LocalOptions{Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the minimum to serve", func() bool { return count(l, 0, StateServing) == 1 && count(l, 1, StateServing) == 1 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	live := len(h.live)
	h.mu.Unlock()
	if live != 0 {
		t.Fatalf("%d instances still live after Close", live)
	}
	if _, err := l.Invoke(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("invoke after close: %v", err)
	}
}

// TestLocalTCPLoad: instances whose load arrives only over their
// connections (the hybrid RPC's TCP; no invocation at all) report it to the
// policy through the poll: a deployment scales out under it, an instance
// serving it (in flight, or only short requests between polls) is not
// reclaimed however long it lasts, an invocation goes to the instance it
// occupies least, and once the load stops (or the instance stops answering
// the poll) the keep-alive takes the deployment back to its minimum.
func TestLocalTCPLoad(t *testing.T) {
	h := &fakeHost{delay: 5 * time.Millisecond}
	const keepAlive = 100 * time.Millisecond
	cfg := Config{Deployments: 1, Concurrency: 2, MaxInstances: 4, MaxPerDeployment: 4, MinInstances: 1, KeepAlive: keepAlive, MaxQueue: 10}
	l, _ := newTestLocal(t, cfg, h)
	waitFor(t, "the minimum instance", func() bool { return count(l, 0, StateServing) == 1 })
	first := h.instance(1)
	if first == nil {
		t.Fatalf("instance 1 not live: %+v", l.Instances())
	}
	// 5 requests in flight on instance 1's connections at concurrency 2:
	// the deployment wants 3 instances.
	first.setLoad(5, 5, false)
	waitFor(t, "the scale-out under TCP load", func() bool { return count(l, 0, StateServing) == 3 })
	for _, s := range l.Instances() {
		if s.ID == 1 && s.ConnInFlight != 5 {
			t.Fatalf("instance 1's status: %+v, want 5 in flight on connections", s)
		}
	}
	// An invocation goes to a new instance, not the loaded one.
	le, err := l.Invoke(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if le.ID() == 1 {
		t.Fatalf("an invocation went to the instance with 5 requests on its connections")
	}
	le.Release()

	// The load spreads: instance 2 has one request in flight, instance 3
	// only short ones between polls; instance 1 keeps its 5. Nothing is
	// reclaimed over several keep-alives.
	second, third := h.instance(2), h.instance(3)
	first.setLoad(2, 0, false)
	second.setLoad(1, 1, false)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				third.setLoad(0, 1, false)
			}
		}
	}()
	time.Sleep(5 * keepAlive)
	close(stop)
	wg.Wait()
	h.mu.Lock()
	stopped := append([]InstanceID(nil), h.stopped...)
	h.mu.Unlock()
	if len(stopped) != 0 || count(l, 0, StateServing) != 3 {
		t.Fatalf("instances serving TCP load were reclaimed: stopped %v, instances %+v", stopped, l.Instances())
	}

	// The load stops; instance 2 stops answering the poll (its stale report
	// is cleared after a few failures). The keep-alive reclaims those
	// first to pass it (not necessarily the newest: each has its own idle
	// clock) down to the minimum.
	first.setLoad(0, 0, false)
	second.setLoad(1, 0, true)
	waitFor(t, "the reclaim once the load stopped", func() bool { return count(l, 0, "") == 1 })
}
