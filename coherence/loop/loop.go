package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/internal/backoff"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/routing"
	"github.com/nimbus-fs/nimbus/store"
)

// Sessions is this server's coordinator membership: the session of its
// current incarnation, and a channel closed when a new incarnation (a new
// member ID, after the session was lost) replaces it.
type Sessions interface {
	Current() (coordinator.Session, <-chan struct{})
}

// Config configures a Loop.
type Config struct {
	// Cache is the instance's metadata cache, the one the engine reads.
	// Nil: the instance has no cache. It is a member all the same: its
	// writes invalidate the others, it ACKs the INVs that reach it, and it
	// is fenced when it leaves; it must join the coordinator with
	// coordinator.Member.NoCache so that writers send it no INV.
	Cache *cache.Cache
	// Store is the shared store, where the fence and floor rows live.
	Store store.Store
	// Auth signs the batches this loop sends and verifies those it
	// receives (the cluster secret, clusterauth.Load from Store): a
	// request without a member's credential is refused, never stepped.
	Auth *clusterauth.Key
	// Retry is the core's re-send interval (coherence.Config.Retry); the
	// loop ticks every Retry/4.
	Retry time.Duration
	// SendTimeout bounds one POST of a message batch to a peer.
	SendTimeout time.Duration
	// Client sends the batches; nil: a client of its own.
	Client *http.Client
	// Deployment and Deployments: this instance is in deployment
	// Deployment of Deployments (0 or 1: one) sharing the namespace; a
	// write's owned targets go only to the instances of the deployment
	// that owns them (routing.Owner of their Route), and the engine's cache
	// must fill only what its deployment owns (namespace.Config, same
	// fields). Every loop on one store must have the same Deployments.
	Deployment, Deployments int
	// DisableInvalidation: writers send no INV and commit at once (the
	// core's knob), while the fence and the floor stay. For the tests that
	// show the invalidations between servers are needed; never in
	// production.
	DisableInvalidation bool
	// Now is the clock; nil: time.Now.
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultConfig re-sends after 100 ms and gives a send 2 s.
func DefaultConfig() Config {
	return Config{Retry: 100 * time.Millisecond, SendTimeout: 2 * time.Second}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("coherence/loop: no Store")
	case c.Auth == nil:
		return errors.New("coherence/loop: no Auth (the cluster secret)")
	case c.Deployments < 0 || c.Deployment < 0 || c.Deployment >= max(c.Deployments, 1):
		return fmt.Errorf("coherence/loop: Deployment %d of %d deployments", c.Deployment, c.Deployments)
	case c.Retry <= 0:
		return fmt.Errorf("coherence/loop: Retry %v, want > 0", c.Retry)
	case c.SendTimeout <= 0:
		return fmt.Errorf("coherence/loop: SendTimeout %v, want > 0", c.SendTimeout)
	}
	return nil
}

// maxDrain bounds the queued events the loop takes after one before it
// sends what they produced.
const maxDrain = 256

// ErrClosed: the loop stopped; writes fail retryably.
var ErrClosed = fmt.Errorf("%w: coherence loop stopped", store.ErrUnavailable)

// Loop is the coherence I/O loop of one server: one goroutine owns the
// coherence.Node of the server's current incarnation and feeds it peer
// messages, ticks, membership views, session renewals and write events,
// and carries out its Ready (package doc). Its methods are safe for
// concurrent use.
type Loop struct {
	cfg Config
	log *slog.Logger
	m   *metrics
	now func() time.Time

	inbox  chan []coherence.Message // from peers (Handler)
	writes chan *writeReq           // WriteLocked requests (invalidator)
	ends   chan writeEnd            // Committed reports (invalidator)
	result chan storeResult         // fences and floor raises done
	// refresh asks the incarnation to read the membership again: a write
	// met a floor above its view (refreshView); snaps brings the answer.
	refresh chan struct{}
	snaps   chan coordinator.Event

	// state is what readers and writers see of the current incarnation,
	// replaced by the loop: a pointer swap, never a lock on the read path.
	state atomic.Pointer[incState]

	streams streams         // to peers (transport.go)
	stream  *http.Client    // opens streams: no overall timeout
	ctx     context.Context // ends when the loop stops
	cancel  context.CancelFunc
	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool
	once    sync.Once
	// refusedLogged is when a refused request was last logged (UnixNano).
	refusedLogged atomic.Int64
}

// incState is the published state of an incarnation.
type incState struct {
	id    coherence.NodeID
	node  *coherence.Node // identity only: readers never call it
	until time.Time       // Serving until (zero: not serving)
}

type writeReq struct {
	targets []coherence.Target
	reply   chan writeReply // buffered 1: one reply
	start   time.Time
	// loop-owned:
	node  *coherence.Node
	op    coherence.OpID
	ended bool // its end came before the loop took it: never begin it
}

type writeReply struct {
	id   coherence.NodeID
	view int64
	err  error
}

type writeEnd struct {
	req       *writeReq
	committed bool
}

type storeKind int

const (
	fenced storeKind = iota + 1
	floorRaised
)

type storeResult struct {
	node    *coherence.Node
	kind    storeKind
	id      coherence.NodeID
	version int64
}

// New returns a loop; Run starts it.
func New(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.SendTimeout}
	}
	if cfg.Cache == nil {
		// The core holds the targets of its own writes and of the INVs
		// that reach it in a cache; an empty one that nothing fills makes
		// those holds bookkeeping only. Serving then gates nothing.
		c, err := cache.New(cache.Config{MaxBytes: cache.EntryOverhead})
		if err != nil {
			return nil, fmt.Errorf("coherence/loop: %w", err)
		}
		cfg.Cache = c
	}
	l := &Loop{cfg: cfg, log: cfg.Logger.With("component", "coherence"), m: newMetrics(cfg.Registerer), now: cfg.Now,
		inbox: make(chan []coherence.Message, 1024), writes: make(chan *writeReq, 256), ends: make(chan writeEnd, 1024),
		refresh: make(chan struct{}, 1), snaps: make(chan coordinator.Event, 1),
		result: make(chan storeResult, 64), stop: make(chan struct{}), done: make(chan struct{}),
		stream: &http.Client{Transport: cfg.Client.Transport}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.state.Store(&incState{})
	return l, nil
}

// Serving reports whether the cache may answer reads and install fills
// now (coherence.Node.Serving, as of the loop's latest step, with the
// deadline checked against the clock here): namespace.Config.CacheServing.
func (l *Loop) Serving() bool {
	s := l.state.Load()
	return !s.until.IsZero() && l.now().Before(s.until)
}

// Start runs the loop in the background until Stop.
func (l *Loop) Start(coord coordinator.Coordinator, sessions Sessions) {
	l.started.Store(true)
	ctx := l.ctx
	go func() {
		<-l.stop
		l.cancel()
	}()
	go func() {
		defer close(l.done)
		l.run(ctx, coord, sessions)
	}()
}

// Stop ends the loop and waits for it; writes waiting fail with ErrClosed.
func (l *Loop) Stop() {
	l.once.Do(func() {
		close(l.stop)
		l.cancel() // also when it never started: its streams end
	})
	if !l.started.Load() {
		return
	}
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
	}
}

// view is the membership as the watch has told it.
type view struct {
	rev     int64
	members map[string]coordinator.Member
}

func (v *view) apply(ev coordinator.Event) {
	switch ev.Kind {
	case coordinator.Snapshot:
		v.members = make(map[string]coordinator.Member, len(ev.Members))
		for _, m := range ev.Members {
			v.members[m.ID] = m
		}
	case coordinator.Joined:
		v.members[ev.Member.ID] = ev.Member
	case coordinator.Left:
		delete(v.members, ev.Member.ID)
	}
	v.rev = ev.Rev
}

func (v *view) core() coherence.View {
	cv := coherence.View{Version: v.rev}
	for _, m := range v.members {
		cv.Members = append(cv.Members, coherence.Member{ID: coherence.NodeID(m.ID), Deployment: m.Deployment, NoCache: m.NoCache})
	}
	return cv
}

// run is the loop: incarnation after incarnation, until ctx ends.
func (l *Loop) run(ctx context.Context, coord coordinator.Coordinator, sessions Sessions) {
	v := &view{members: map[string]coordinator.Member{}}
	events := l.watch(ctx, coord)
	used := map[string]bool{}
	defer l.failPending(nil)
	for ctx.Err() == nil {
		sess, changed := sessions.Current()
		id := sess.Member().ID
		if used[id] {
			l.between(ctx, changed)
			continue
		}
		used[id] = true
		l.incarnation(ctx, coord, coherence.NodeID(id), sess, changed, v, events)
	}
}

// watch follows the membership of every deployment, watching again after
// the coordinator closed a watch.
func (l *Loop) watch(ctx context.Context, coord coordinator.Coordinator) <-chan coordinator.Event {
	out := make(chan coordinator.Event, 64)
	go func() {
		b := backoff.New(backoff.Policy{Initial: 50 * time.Millisecond, Max: 2 * time.Second})
		for ctx.Err() == nil {
			ch, err := coord.Watch(ctx, coordinator.All)
			if err == nil {
				b.Reset()
				for ev := range ch {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
			} else {
				l.log.Warn("watching the membership", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.Next()):
			}
		}
	}()
	return out
}

// A view can stay below the store's write floor with nothing wrong: the
// floor is a joiner's first view, a snapshot at the coordinator's current
// revision, which other writes to the coordinator (an election, an
// eviction) may have moved past the joiner's own entry; the others' views
// follow the membership's changes, and reach that revision only at the
// next change. Their writes were refused (ErrBelowFloor) until then: in
// the tests of the local platform, every write of an instance for as long
// as 64 attempts lasted. So a write refused for the floor asks for the
// membership to be read again (askRefresh), a snapshot at the current
// revision, which is at or above every floor raised before it.

// askRefresh asks the incarnation to read the membership again.
func (l *Loop) askRefresh() {
	select {
	case l.refresh <- struct{}{}:
	default: // one already asked
	}
}

// readView reads the membership and hands it to the incarnation as a
// snapshot.
func (l *Loop) readView(ctx context.Context, coord coordinator.Coordinator) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	vw, err := coord.Members(rctx, coordinator.All)
	if err != nil {
		l.log.Debug("reading the membership again", "err", err)
		return
	}
	select {
	case l.snaps <- coordinator.Event{Kind: coordinator.Snapshot, Rev: vw.Rev, Members: vw.Members}:
	case <-ctx.Done():
	}
}

// errNoIncarnation: a write came while the server has no live incarnation
// (its session was lost and it has not joined again yet).
var errNoIncarnation = fmt.Errorf("%w: coherence: no live incarnation (joining the coordinator again)", store.ErrUnavailable)

// between waits for the next incarnation (changed, or ctx's end), failing
// the writes that come meanwhile at once: they hold row locks, and must
// not keep them while the server joins again.
func (l *Loop) between(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			return
		case w := <-l.writes:
			w.reply <- writeReply{err: errNoIncarnation}
		case e := <-l.ends:
			if e.req.node == nil {
				e.req.ended = true
			}
		case <-l.inbox: // to an incarnation that is over
		}
	}
}

// pending is the loop's table of writes of the current incarnation.
type pending struct {
	byOp map[coherence.OpID]*writeReq
}

// incarnation runs one incarnation's Node until its session is replaced,
// it is lost, or ctx ends.
func (l *Loop) incarnation(ctx context.Context, coord coordinator.Coordinator, id coherence.NodeID, sess coordinator.Session, changed <-chan struct{},
	v *view, events <-chan coordinator.Event) {
	log := l.log.With("member", id)
	// The rows the store checks must exist before this incarnation writes.
	if err := l.untilDone(ctx, changed, "create the write floor row", func(ctx context.Context) error { return ensureFloor(ctx, l.cfg.Store) }); err != nil {
		return
	}
	err := l.untilDone(ctx, changed, "create the fence row", func(ctx context.Context) error {
		err := createFence(ctx, l.cfg.Store, id)
		if errors.Is(err, errIDTaken) {
			return backoffStop{err}
		}
		return err
	})
	if err != nil {
		if errors.Is(err, errIDTaken) {
			log.Error("this incarnation's ID was used before; waiting for a new one", "err", err)
			l.between(ctx, changed)
		}
		return
	}
	// A new incarnation starts with an empty cache, and refuses every fill
	// begun before it (the cache's epoch moves on).
	l.cfg.Cache.Invalidate(cache.InodeID(store.RootID))
	n, err := coherence.New(coherence.Config{ID: id, Cache: l.cfg.Cache, Retry: l.cfg.Retry,
		Deployment:          l.cfg.Deployment,
		Owner:               func(k uint64) int { return routing.Owner(k, l.cfg.Deployments) },
		DisableInvalidation: l.cfg.DisableInvalidation})
	if err != nil {
		log.Error("coherence core", "err", err)
		return
	}
	log.Info("coherence incarnation started")
	p := &pending{byOp: map[coherence.OpID]*writeReq{}}
	var deadline time.Time
	publish := func() {
		s := &incState{id: id, node: n}
		if now := l.now(); n.Serving(now) {
			s.until = deadline
		}
		l.state.Store(s)
		if !s.until.IsZero() {
			l.m.serving.Set(1)
		} else {
			l.m.serving.Set(0)
		}
		l.m.holding.Set(float64(n.Holding()))
	}
	renew := func() {
		if d := sess.Deadline(); d.After(deadline) {
			deadline = d
			n.Renewed(d)
		}
	}
	renew()
	n.Tick(l.now())
	if v.rev != 0 {
		n.ViewChanged(v.core())
	}
	l.ready(ctx, n, p, v, changed)
	publish()
	tick := time.NewTicker(max(l.cfg.Retry/4, time.Millisecond))
	defer tick.Stop()
	defer func() {
		l.state.Store(&incState{})
		l.m.serving.Set(0)
		l.abortAll(p, n)
		n.Close()
	}()
	// The events that arrive under load (peers' batches, writes, their
	// ends) are taken as they come, then every other one already queued
	// before the core's Ready: the INVs, ACKs and RELEASEs of concurrent
	// writes leave as one batch per peer (a group commit of the coherence
	// round), not one each.
	step := func(ms []coherence.Message) {
		for _, m := range ms {
			l.m.received.WithLabelValues(m.Type.String()).Inc()
			n.Step(m)
		}
	}
	begin := func(w *writeReq) {
		if w.ended {
			return
		}
		op, err := n.WriteLocked(w.targets)
		if err != nil {
			l.m.writes.WithLabelValues("refused").Inc()
			w.reply <- writeReply{err: fmt.Errorf("%w: %v", store.ErrUnavailable, err)}
			return
		}
		w.node, w.op = n, op
		p.byOp[op] = w
	}
	end := func(e writeEnd) {
		if e.req.node == nil {
			e.req.ended = true // its writer gave up before the loop took it
			return
		}
		if e.req.node != n {
			return // an earlier incarnation's: its Node is closed
		}
		if _, ok := p.byOp[e.req.op]; ok {
			delete(p.byOp, e.req.op)
			_ = n.Committed(e.req.op, e.committed)
			if e.committed {
				l.m.writes.WithLabelValues("committed").Inc()
			} else {
				l.m.writes.WithLabelValues("aborted").Inc()
			}
		}
	}
	drain := func() {
		for range maxDrain {
			select {
			case ms := <-l.inbox:
				step(ms)
			case w := <-l.writes:
				begin(w)
			case e := <-l.ends:
				end(e)
			default:
				return
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			log.Info("coherence incarnation replaced")
			return
		case ms := <-l.inbox:
			step(ms)
			drain()
		case <-tick.C:
			renew()
			n.Tick(l.now())
		case ev := <-events:
			if ev.Kind != coordinator.Snapshot && ev.Rev <= v.rev {
				break // in the snapshot a refresh read already
			}
			v.apply(ev)
			n.ViewChanged(v.core())
		case <-l.refresh:
			go l.readView(ctx, coord)
		case ev := <-l.snaps:
			if ev.Rev > v.rev {
				v.apply(ev)
				n.ViewChanged(v.core())
			}
		case w := <-l.writes:
			begin(w)
			drain()
		case e := <-l.ends:
			end(e)
			drain()
		case r := <-l.result:
			if r.node != n {
				break
			}
			switch r.kind {
			case fenced:
				n.Fenced(r.id)
			case floorRaised:
				n.FloorRaised(r.version)
			}
		}
		l.ready(ctx, n, p, v, changed)
		publish()
		if n.Err() != nil {
			log.Warn("coherence incarnation lost: its cache serves nothing until the server joins again", "err", n.Err())
			return
		}
	}
}

// ready carries out what the core asks.
func (l *Loop) ready(ctx context.Context, n *coherence.Node, p *pending, v *view, changed <-chan struct{}) {
	if !n.HasReady() {
		return
	}
	rd := n.Ready()
	if len(rd.Messages) > 0 {
		l.send(ctx, rd.Messages, v)
	}
	for _, c := range rd.Commits {
		w, ok := p.byOp[c.Op]
		if !ok {
			continue
		}
		l.m.ackWait.Observe(time.Since(w.start).Seconds())
		w.reply <- writeReply{id: n.ID(), view: c.View}
	}
	for _, id := range rd.Fences {
		go func() {
			err := l.untilDone(ctx, changed, "fence "+string(id), func(ctx context.Context) error { return fence(ctx, l.cfg.Store, id) })
			if err == nil {
				l.m.fences.Inc()
				l.deliver(ctx, storeResult{node: n, kind: fenced, id: id})
			}
		}()
	}
	if rd.Floor != 0 {
		f := rd.Floor
		go func() {
			err := l.untilDone(ctx, changed, "raise the write floor", func(ctx context.Context) error { return raiseFloor(ctx, l.cfg.Store, f) })
			if err == nil {
				l.m.floors.Inc()
				l.deliver(ctx, storeResult{node: n, kind: floorRaised, version: f})
			}
		}()
	}
}

func (l *Loop) deliver(ctx context.Context, r storeResult) {
	select {
	case l.result <- r:
	case <-ctx.Done():
	}
}

// abortAll ends an incarnation's writes still waiting for their ACKs: they
// fail retryably (the engine runs them again, under the next incarnation).
// Writes already given their Commit finish by themselves; their Committed
// reports find no Node and are dropped.
func (l *Loop) abortAll(p *pending, n *coherence.Node) {
	err := n.Err()
	if err == nil {
		err = ErrClosed
	}
	for op, w := range p.byOp {
		select {
		case w.reply <- writeReply{err: fmt.Errorf("%w: %v", store.ErrUnavailable, err)}:
		default: // already has its Commit
		}
		delete(p.byOp, op)
	}
}

// failPending answers the writes queued when the loop ends.
func (l *Loop) failPending(error) {
	for {
		select {
		case w := <-l.writes:
			w.reply <- writeReply{err: ErrClosed}
		default:
			return
		}
	}
}

// backoffStop ends untilDone's retries with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }
func (b backoffStop) Unwrap() error { return b.err }

// untilDone runs f until it succeeds, returns a backoffStop, ctx ends or
// changed is closed, with a backoff between attempts.
func (l *Loop) untilDone(ctx context.Context, changed <-chan struct{}, what string, f func(context.Context) error) error {
	b := backoff.New(backoff.Policy{Initial: 20 * time.Millisecond, Max: time.Second})
	for {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		var bs backoffStop
		if errors.As(err, &bs) {
			return bs.err
		}
		l.log.Warn("coherence: "+what+" failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return ErrClosed
		case <-time.After(b.Next()):
		}
	}
}
