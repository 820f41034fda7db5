package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	retry "github.com/nimbus-fs/nimbus/internal/backoff"
)

// Local is the local platform: the thin I/O loop that drives the scaling
// Policy with the real clock and carries out its Ready through a Host
// (docs/ELASTIC.md, "The local platform and its hosting"). Every decision
// stays in the Policy; Local only turns events into calls:
//
//   - Invoke queues an invocation and blocks until the policy assigns it
//     to an instance (a Lease) or refuses it (ErrBusy);
//   - a Start becomes host.Start in a goroutine, timed from the call to
//     serving (the cold start), then Policy.Started;
//   - a Reclaim becomes Instance.Stop;
//   - an instance that exits when it was not asked to (a crash, a kill)
//     becomes Policy.Gone, and the policy replaces it as load needs;
//   - a ticker feeds Policy.Tick (keep-alive, minimum instances);
//   - a poller reads each serving instance's load on connections (GET
//     /status/load: the hybrid RPC's TCP requests, which bypass Invoke)
//     every LoadPoll and feeds Policy.Load (load.go).
//
// The policy is not safe for concurrent use, so every event takes l.mu,
// steps the policy and carries out its Ready before letting go: the
// starts and stops themselves run in goroutines, never under the lock.
type Local struct {
	cfg  Config
	host Host
	opts LocalOptions
	log  *slog.Logger
	met  *localMetrics

	ctx    context.Context // the instances' starts; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // starts, stops and watchers
	ticker chan struct{}  // closed by Close: the tick loop ends

	mu struct {
		sync.Mutex
		p        *Policy
		nextInv  InvocationID
		waiting  map[InvocationID]*waiter
		insts    map[InstanceID]*instanceRec
		failures int // consecutive failed starts: the backoff before the next
		started  bool
		closed   bool
		// totals for /status/cluster
		invocations, coldStarts int64
		// retired is the usage of the instances stopped so far, read from
		// each just before its stop (usage.go); lost counts those whose
		// usage could not be read (crashed, or not answering).
		retired Usage
		lost    int
		// most is the most instances there have been at once.
		most int
		// broken is the last start's error when it failed for good
		// (ErrPermanent), nil once a start succeeds. Until retryAt,
		// invocations fail at once with it and starts wait.
		broken  error
		retryAt time.Time
	}
}

// LocalOptions are a Local's collaborators; every field may be zero.
type LocalOptions struct {
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: no metrics registered
	// Now is the policy's clock (nil: time.Now). Cold starts are timed
	// with the monotonic clock whatever Now is.
	Now func() time.Time
	// Tick is how often the policy is ticked (keep-alive, minimum);
	// 0: 100 ms.
	Tick time.Duration
	// StopTimeout bounds a reclaimed instance's graceful stop; 0: 30 s.
	StopTimeout time.Duration
	// StartBackoff is the wait after a failed start before the policy
	// hears of it (and may start another), doubled per consecutive
	// failure up to 5 s: a host that cannot start instances (a bad
	// binary, the database down) is not asked again in a tight loop.
	// 0: 100 ms.
	StartBackoff time.Duration
	// PermanentBackoff is the same after a start that failed for good
	// (ErrPermanent), doubled per consecutive failure up to a minute;
	// until it has passed, invocations fail at once with the instance's
	// error and no instance is started. 0: 1 s.
	PermanentBackoff time.Duration
	// LoadPoll is how often every serving instance's load on connections
	// is read (ReadLoad, each read bounded by twice this) and reported to
	// the policy (Policy.Load); 0: 200 ms; negative: never.
	LoadPoll time.Duration
	// ReadLoad reads an instance's load on connections; nil: its GET
	// /status/load.
	ReadLoad func(ctx context.Context, inst Instance) (ConnLoad, error)
	// Exited, if set, is called (in a goroutine of its own, which Close
	// waits for) with each serving instance that exited without being
	// stopped (a crash, a kill) or whose stop failed once it was gone
	// (killed when its graceful stop timed out). Its Done is closed: the host saw it die
	// (a process reaped). The gateway evicts its coordinator member, so
	// that its peers stop waiting for it at once rather than at its lease's
	// expiry (docs/ELASTIC.md, "Leases and fencing").
	Exited func(Instance)
}

// State names of InstanceStatus.
const (
	StateStarting = "starting"
	StateServing  = "serving"
	StateStopping = "stopping"
)

// InstanceStatus is one instance as Instances lists it.
type InstanceStatus struct {
	ID         InstanceID
	Deployment int
	Addr       string        // "" while starting
	State      string        // StateStarting, StateServing or StateStopping
	StartedAt  time.Time     // when the policy asked for it, the cold start's beginning (Now's clock)
	ColdStart  time.Duration // from the host's Start call to serving; 0 while starting
	InFlight   int           // invocations
	// ConnInFlight is the requests in flight on its connections, as last
	// polled (LocalOptions.LoadPoll).
	ConnInFlight int
}

type instanceRec struct {
	id        InstanceID
	dep       int
	state     string
	askedAt   time.Time
	coldStart time.Duration
	inflight  int
	inst      Instance // nil while starting
	stopping  bool     // stopped on purpose: its exit is not a crash
	// The load polls (load.go).
	connInflight int   // as last reported
	connRequests int64 // the cumulative count last read
	loadRead     bool  // connRequests was read once
	loadFails    int   // polls failed in a row
}

type waiter struct {
	dep int
	ch  chan waitResult // buffered: written once, under l.mu
}

type waitResult struct {
	rec *instanceRec
	err error
}

// NewLocal returns a platform that starts instances through host; Start
// begins ticking.
func NewLocal(cfg Config, host Host, opts LocalOptions) (*Local, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if host == nil {
		return nil, errors.New("platform: NewLocal without a host")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Tick <= 0 {
		opts.Tick = 100 * time.Millisecond
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 30 * time.Second
	}
	if opts.StartBackoff <= 0 {
		opts.StartBackoff = 100 * time.Millisecond
	}
	if opts.PermanentBackoff <= 0 {
		opts.PermanentBackoff = time.Second
	}
	if opts.LoadPoll == 0 {
		opts.LoadPoll = 200 * time.Millisecond
	}
	if opts.ReadLoad == nil {
		opts.ReadLoad = readLoadHTTP
	}
	met, err := newLocalMetrics(opts.Registerer, cfg.Deployments)
	if err != nil {
		return nil, err
	}
	l := &Local{cfg: cfg, host: host, opts: opts, log: opts.Logger, met: met, ticker: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.mu.p = p
	l.mu.nextInv = 1
	l.mu.waiting = map[InvocationID]*waiter{}
	l.mu.insts = map[InstanceID]*instanceRec{}
	return l, nil
}

// Config returns the policy's settings.
func (l *Local) Config() Config { return l.cfg }

// Start ticks the policy once (which starts each deployment's minimum
// instances, without waiting for them) and then every LocalOptions.Tick
// until Close. ctx is not kept.
func (l *Local) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.mu.closed || l.mu.started {
		l.mu.Unlock()
		return fmt.Errorf("platform: start: %w", ErrClosed)
	}
	l.mu.started = true
	l.mu.p.Tick(l.opts.Now())
	l.applyLocked()
	l.mu.Unlock()
	l.wg.Add(1)
	go l.every(l.opts.Tick, l.tick)
	if l.opts.LoadPoll > 0 {
		l.wg.Add(1)
		go l.every(l.opts.LoadPoll, l.pollLoad)
	}
	return nil
}

// every runs f every d until Close.
func (l *Local) every(d time.Duration, f func()) {
	defer l.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-l.ticker:
			return
		case <-t.C:
		}
		f()
	}
}

// tick steps the policy's clock and carries out what it decides.
func (l *Local) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.closed {
		l.mu.p.Tick(l.opts.Now())
		l.applyLocked()
	}
}

// Lease is an invocation assigned to an instance: the caller sends its
// request to Addr and calls Release once the answer is in (the slot is
// then free for another invocation). A lease on an instance that dies
// stays valid to release; requests to it fail, and the caller answers
// that the outcome is unknown.
type Lease struct {
	l    *Local
	rec  *instanceRec
	inst Instance
	once sync.Once
}

// Instance is the instance the invocation was given to.
func (le *Lease) Instance() Instance { return le.inst }

// Addr is the instance's base URL.
func (le *Lease) Addr() string { return le.inst.Addr() }

// ID is the instance's id.
func (le *Lease) ID() InstanceID { return le.rec.id }

// Deployment is the instance's deployment.
func (le *Lease) Deployment() int { return le.rec.dep }

// Release ends the invocation (Policy.Done). Safe to call twice.
func (le *Lease) Release() { le.once.Do(func() { le.l.done(le.rec) }) }

// Invoke queues an invocation of deployment dep and waits until the policy
// hands it to an instance. It fails with an error wrapping ErrBusy when the
// policy refuses it (the deployment's queue is full), with ctx's error when
// ctx ends first (the invocation is withdrawn), ErrNoDeployment for a
// deployment out of range and ErrClosed after Close.
func (l *Local) Invoke(ctx context.Context, dep int) (*Lease, error) {
	begun := time.Now()
	l.mu.Lock()
	if l.mu.closed || !l.mu.started {
		l.mu.Unlock()
		return nil, fmt.Errorf("platform: invoke deployment %d: %w", dep, ErrClosed)
	}
	if l.mu.broken != nil && time.Now().Before(l.mu.retryAt) {
		err := l.mu.broken
		l.mu.Unlock()
		return nil, fmt.Errorf("platform: invoke deployment %d: %w", dep, err)
	}
	inv := l.mu.nextInv
	l.mu.nextInv++
	w := &waiter{dep: dep, ch: make(chan waitResult, 1)}
	l.mu.waiting[inv] = w
	if err := l.mu.p.Invoke(l.opts.Now(), dep, inv); err != nil {
		delete(l.mu.waiting, inv)
		l.mu.Unlock()
		return nil, fmt.Errorf("platform: invoke: %w", err)
	}
	l.applyLocked()
	l.mu.Unlock()

	select {
	case r := <-w.ch:
		if r.err == nil {
			l.met.wait.Observe(time.Since(begun).Seconds())
		}
		return l.lease(r, dep)
	case <-ctx.Done():
	}
	l.mu.Lock()
	if l.mu.p.Cancel(l.opts.Now(), dep, inv) {
		delete(l.mu.waiting, inv)
		l.mu.Unlock()
		return nil, fmt.Errorf("platform: invoke deployment %d: waiting for an instance: %w", dep, ctx.Err())
	}
	l.mu.Unlock()
	// Answered meanwhile (the answer is in the channel, written under the
	// lock): give a slot back at once.
	if le, err := l.lease(<-w.ch, dep); err == nil {
		le.Release()
	}
	return nil, fmt.Errorf("platform: invoke deployment %d: waiting for an instance: %w", dep, ctx.Err())
}

func (l *Local) lease(r waitResult, dep int) (*Lease, error) {
	if r.err != nil {
		return nil, fmt.Errorf("platform: invoke deployment %d: %w", dep, r.err)
	}
	return &Lease{l: l, rec: r.rec, inst: r.rec.inst}, nil
}

// done ends an invocation on rec.
func (l *Local) done(rec *instanceRec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec.inflight > 0 {
		rec.inflight--
	}
	if l.mu.closed || rec.stopping || l.mu.insts[rec.id] != rec {
		return // gone or reclaimed: the policy no longer counts it
	}
	if err := l.mu.p.Done(l.opts.Now(), rec.id); err != nil {
		return // ErrUnknownInstance: it was reported Gone meanwhile
	}
	l.applyLocked()
}

// applyLocked carries out what the policy asks. l.mu is held.
func (l *Local) applyLocked() {
	r := l.mu.p.Ready()
	now := l.opts.Now()
	for _, s := range r.Starts {
		rec := &instanceRec{id: s.Instance, dep: s.Deployment, state: StateStarting, askedAt: now}
		l.mu.insts[rec.id] = rec
		l.wg.Add(1)
		go l.start(rec)
	}
	for _, a := range r.Assigns {
		rec := l.mu.insts[a.Instance]
		w := l.mu.waiting[a.Invocation]
		delete(l.mu.waiting, a.Invocation)
		if w == nil || rec == nil {
			continue // cannot happen: the policy assigns only what it queued, to what it started
		}
		rec.inflight++
		l.mu.invocations++
		l.met.invocations.WithLabelValues(strconv.Itoa(rec.dep)).Inc()
		w.ch <- waitResult{rec: rec}
	}
	for _, id := range r.Reclaims {
		if rec := l.mu.insts[id]; rec != nil {
			l.stopLocked(rec)
		}
	}
	for _, inv := range r.Refused {
		if w := l.mu.waiting[inv]; w != nil {
			delete(l.mu.waiting, inv)
			l.met.refused.WithLabelValues(strconv.Itoa(w.dep)).Inc()
			w.ch <- waitResult{err: fmt.Errorf("%w: deployment %d's queue is full", ErrBusy, w.dep)}
		}
	}
	l.gaugesLocked()
}

// stopLocked stops rec on purpose (a reclaim, or Close). l.mu is held.
func (l *Local) stopLocked(rec *instanceRec) {
	if rec.stopping {
		return
	}
	rec.stopping = true
	if rec.inst == nil {
		return // still starting: start stops it once it serves
	}
	rec.state = StateStopping
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.StopTimeout)
		defer cancel()
		l.retire(ctx, rec.inst)
		if err := rec.inst.Stop(ctx); err != nil {
			l.log.Warn("stopping an instance", "instance", rec.id, "deployment", rec.dep, "err", err)
			select {
			case <-rec.inst.Done():
				// It did not stop cleanly (killed when its stop timed
				// out): its member may still be listed.
				if l.opts.Exited != nil {
					l.opts.Exited(rec.inst)
				}
			default:
			}
		}
	}()
}

func (l *Local) gaugesLocked() {
	counts := make([]int, l.cfg.Deployments)
	for _, rec := range l.mu.insts {
		counts[rec.dep]++
	}
	l.mu.most = max(l.mu.most, len(l.mu.insts))
	for d, n := range counts {
		l.met.instances.WithLabelValues(strconv.Itoa(d)).Set(float64(n))
		l.met.queue.WithLabelValues(strconv.Itoa(d)).Set(float64(l.mu.p.Queued(d)))
	}
}

// startRetry is the backoff after failed starts: from initial, doubling
// ten times at most, and never above limit.
func startRetry(initial, limit time.Duration) retry.Policy {
	return retry.Policy{Initial: initial, Max: min(limit, initial<<10)}
}

// start carries out one Start: the host's start, timed, then Started (or,
// after a backoff, Gone), then a watch for the instance's exit.
func (l *Local) start(rec *instanceRec) {
	defer l.wg.Done()
	l.mu.Lock()
	wait := time.Until(l.mu.retryAt)
	l.mu.Unlock()
	if wait > 0 { // the last start failed for good: not again before retryAt
		select {
		case <-time.After(wait):
		case <-l.ctx.Done():
		}
	}
	begun := time.Now()
	inst, err := l.host.Start(l.ctx, Spec{ID: rec.id, Deployment: rec.dep, Deployments: l.cfg.Deployments})
	took := time.Since(begun)
	if err != nil && errors.Is(err, ErrPermanent) {
		l.met.startFails.Inc()
		l.mu.Lock()
		l.mu.failures++
		backoff := startRetry(l.opts.PermanentBackoff, time.Minute).Delay(l.mu.failures - 1)
		l.mu.broken, l.mu.retryAt = err, time.Now().Add(backoff)
		// Those waiting would wait for nothing: they fail now, with the
		// instance's error.
		now := l.opts.Now()
		for inv, w := range l.mu.waiting {
			if l.mu.p.Cancel(now, w.dep, inv) {
				delete(l.mu.waiting, inv)
				w.ch <- waitResult{err: err}
			}
		}
		l.goneLocked(rec)
		l.mu.Unlock()
		if l.ctx.Err() == nil {
			l.log.Error("an instance cannot start: invocations fail until one does", "instance", rec.id, "deployment", rec.dep, "retry_after", backoff, "err", err)
		}
		return
	}
	if err != nil {
		l.met.startFails.Inc()
		l.mu.Lock()
		l.mu.failures++
		backoff := startRetry(l.opts.StartBackoff, 5*time.Second).Delay(l.mu.failures - 1)
		l.mu.Unlock()
		if l.ctx.Err() == nil {
			l.log.Warn("an instance failed to start", "instance", rec.id, "deployment", rec.dep, "took", took, "retry_after", backoff, "err", err)
		}
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
		}
		l.mu.Lock()
		l.goneLocked(rec)
		l.mu.Unlock()
		return
	}
	l.met.coldStarts.Inc()
	l.met.coldStart.Observe(took.Seconds())
	l.mu.Lock()
	l.mu.failures = 0
	l.mu.broken, l.mu.retryAt = nil, time.Time{}
	l.mu.coldStarts++
	rec.inst, rec.coldStart = inst, took
	if rec.stopping || l.mu.closed {
		rec.stopping = false
		l.stopLocked(rec)
	} else {
		rec.state = StateServing
		_ = l.mu.p.Started(l.opts.Now(), rec.id)
		l.applyLocked()
	}
	l.mu.Unlock()
	l.log.Debug("instance serving", "instance", rec.id, "deployment", rec.dep, "addr", inst.Addr(), "cold_start", took)
	<-inst.Done()
	l.mu.Lock()
	if !rec.stopping && !l.mu.closed {
		l.met.crashes.Inc()
		l.log.Warn("an instance exited without being stopped; the policy replaces it as load needs",
			"instance", rec.id, "deployment", rec.dep, "addr", inst.Addr())
		if l.opts.Exited != nil {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.opts.Exited(inst)
			}()
		}
	}
	l.goneLocked(rec)
	l.mu.Unlock()
}

// exited reports rec's instance gone as soon as its Done is closed, ahead
// of its watcher in start (which then finds nothing to do): the gateway
// calls it when the instance refused a request, so that the retry goes
// elsewhere.
func (l *Local) exited(rec *instanceRec) {
	select {
	case <-rec.inst.Done():
	default:
		return
	}
	l.mu.Lock()
	l.goneLocked(rec)
	l.mu.Unlock()
}

// goneLocked forgets rec, telling the policy if it still counts it.
func (l *Local) goneLocked(rec *instanceRec) {
	if l.mu.insts[rec.id] != rec {
		return
	}
	delete(l.mu.insts, rec.id)
	if l.mu.closed {
		return
	}
	if !rec.stopping { // reclaimed ones the policy has already removed
		_ = l.mu.p.Gone(l.opts.Now(), rec.id)
	}
	l.applyLocked()
}

// Instances lists the instances, by deployment, the oldest first.
func (l *Local) Instances() []InstanceStatus {
	l.mu.Lock()
	out := make([]InstanceStatus, 0, len(l.mu.insts))
	for _, rec := range l.mu.insts {
		st := InstanceStatus{ID: rec.id, Deployment: rec.dep, State: rec.state, StartedAt: rec.askedAt, ColdStart: rec.coldStart, InFlight: rec.inflight, ConnInFlight: rec.connInflight}
		if rec.inst != nil {
			st.Addr = rec.inst.Addr()
		}
		out = append(out, st)
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b InstanceStatus) int {
		if a.Deployment != b.Deployment {
			return a.Deployment - b.Deployment
		}
		return int(a.ID) - int(b.ID)
	})
	return out
}

// Unavailable returns the error of the last start when it failed for good
// (ErrPermanent), nil when none has or a start has succeeded since.
func (l *Local) Unavailable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.broken
}

// Totals returns the invocations handed to instances and the cold starts
// since the platform began.
func (l *Local) Totals() (invocations, coldStarts int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.invocations, l.mu.coldStarts
}

// Close stops every instance (gracefully, bounded by ctx), fails the
// invocations still waiting with ErrClosed and waits for the starts under
// way to give up. Safe to call twice.
func (l *Local) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	close(l.ticker)
	for inv, w := range l.mu.waiting {
		delete(l.mu.waiting, inv)
		w.ch <- waitResult{err: ErrClosed}
	}
	var insts []Instance
	for _, rec := range l.mu.insts {
		rec.stopping = true
		if rec.inst != nil {
			rec.state = StateStopping
			insts = append(insts, rec.inst)
		}
	}
	l.mu.Unlock()
	l.cancel() // starts under way give up
	errs := make(chan error, len(insts))
	for _, in := range insts {
		go func() { errs <- in.Stop(ctx) }()
	}
	var all []error
	for range insts {
		all = append(all, <-errs)
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		all = append(all, fmt.Errorf("platform: close: waiting for instances: %w", ctx.Err()))
	}
	return errors.Join(all...)
}
