// Package platform is the serverless platform seam: where an
// invocation of a deployment goes, when an instance starts, when an idle
// one is reclaimed. This file is its scaling policy, a state machine with
// no goroutines, clocks or processes inside (docs/ELASTIC.md, "Serverless
// platform"): the caller feeds it events with the time they happened and
// carries out what Ready returns (start an instance, hand an invocation
// to one, reclaim one), the way a platform's controller would. The local
// platform (child processes of `nimbus serve`) and a Knative or OpenWhisk
// adapter drive the same policy.
//
// The policy, as λFS's platform (OpenWhisk) behaves and Knative's
// concurrency-based autoscaler decides:
//
//   - An invocation goes to the instance of its deployment with a free
//     slot (Config.Concurrency slots each) that has the fewest invocations
//     in flight, ties to the oldest instance (its cache is the warmest).
//   - With no free slot it waits in its deployment's queue, and the policy
//     starts as many instances as the queue and the invocations in flight
//     need beyond those running and starting (a cold start each), within
//     the deployment's and the global caps. A queue longer than MaxQueue
//     refuses further invocations (the caller answers busy).
//   - An instance idle (nothing in flight) for KeepAlive is reclaimed,
//     down to MinInstances per deployment; MinInstances are started at the
//     first tick and kept.
//
// Load that bypasses the policy (requests over TCP connections straight to
// an instance: the hybrid RPC's connect-backs, ~99% of a hybrid client's
// requests) reaches it through Load, the instance's requests in flight on
// connections and how many it began since the last report, as the caller
// polled them:
//
//   - Reported load occupies slots: an instance's occupancy is its
//     invocations in flight plus its reported load, free slots are
//     Concurrency minus occupancy, and an invocation goes to the instance
//     with the lowest occupancy (so that new instances, not the loaded
//     oldest, take invocations, and the hybrid clients they answer move
//     their connections there). One exception, so that TCP load cannot
//     starve invocations: when the deployment cannot grow (at a cap, none
//     starting), an invocation goes to an instance with fewer than
//     Concurrency invocations in flight whatever its reported load.
//   - A deployment wants ceil((queued + invocations and sustained load of
//     its running instances) / Concurrency) instances, where an instance's
//     sustained load is the lesser of its last two reports (one poll that
//     lands on a burst starts nothing); it starts what it lacks of that
//     (within the caps) after every event, queue or not, so a TCP-heavy
//     deployment scales out; and the keep-alive does not reclaim below it.
//     Invocations that wait, with nothing starting, start one instance
//     whatever the sustained load says.
//   - An instance whose report shows load (in flight, or requests begun
//     since the last report) is not idle: its idle clock restarts at the
//     report, and it is not taken for another deployment until a report
//     shows it quiet.
package platform

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Config is the policy's settings.
type Config struct {
	Deployments      int           // deployments 0..Deployments-1
	Concurrency      int           // invocations one instance serves at once
	MaxInstances     int           // instances at most, all deployments together
	MaxPerDeployment int           // instances at most per deployment
	MinInstances     int           // instances kept per deployment, idle or not
	KeepAlive        time.Duration // an idle instance is reclaimed after this
	MaxQueue         int           // invocations waiting per deployment before refusals
}

// DefaultConfig returns the flags' defaults.
func DefaultConfig(deployments int) Config {
	return Config{Deployments: deployments, Concurrency: 4, MaxInstances: 16, MaxPerDeployment: 8, MinInstances: 1,
		KeepAlive: time.Minute, MaxQueue: 4096}
}

// Validate reports settings the policy cannot follow.
func (c Config) Validate() error {
	switch {
	case c.Deployments < 1:
		return fmt.Errorf("platform: %d deployments, want at least 1", c.Deployments)
	case c.Concurrency < 1:
		return fmt.Errorf("platform: concurrency %d, want at least 1", c.Concurrency)
	case c.MaxPerDeployment < 1 || c.MaxInstances < 1:
		return fmt.Errorf("platform: instance caps %d per deployment, %d in all: want at least 1", c.MaxPerDeployment, c.MaxInstances)
	case c.MinInstances < 0 || c.MinInstances > c.MaxPerDeployment || c.MinInstances*c.Deployments > c.MaxInstances:
		return fmt.Errorf("platform: %d instances kept per deployment do not fit the caps (%d per deployment, %d in all for %d deployments)",
			c.MinInstances, c.MaxPerDeployment, c.MaxInstances, c.Deployments)
	case c.KeepAlive <= 0:
		return fmt.Errorf("platform: keep-alive %v, want more than 0", c.KeepAlive)
	case c.MaxQueue < 0:
		return fmt.Errorf("platform: queue bound %d, want 0 or more", c.MaxQueue)
	}
	return nil
}

// InstanceID names an instance for its life; ids are never reused.
type InstanceID uint64

// InvocationID names an invocation, as the caller chose it.
type InvocationID uint64

// State is an instance's phase.
type State int

const (
	Starting State = iota // asked for, not serving yet (a cold start)
	Running               // serving
)

func (s State) String() string {
	if s == Starting {
		return "starting"
	}
	return "running"
}

// Start asks the caller to start an instance of a deployment.
type Start struct {
	Instance   InstanceID
	Deployment int
}

// Assign asks the caller to hand an invocation to an instance.
type Assign struct {
	Invocation InvocationID
	Instance   InstanceID
}

// Ready is what the policy asks the caller to do, in order: start, then
// assign, then reclaim (stop) instances; and which invocations it refuses.
type Ready struct {
	Starts   []Start
	Assigns  []Assign
	Reclaims []InstanceID
	Refused  []InvocationID
}

// Errors of the events.
var (
	ErrUnknownInstance = errors.New("platform: unknown instance")
	ErrNoDeployment    = errors.New("platform: no such deployment")
)

type instance struct {
	id       InstanceID
	dep      int
	state    State
	inflight int
	started  time.Time // asked for
	idle     time.Time // since when nothing is in flight (running instances)
	reported int       // requests in flight on connections, as last reported (Load)
	previous int       // and as reported the time before
	active   bool      // the last report showed load: in flight, or requests begun
}

// sustained is the reported load that lasted: the lesser of the last two
// reports. It, not the last report alone, is what starts instances
// (wanted): one poll that lands on a burst of requests in flight must not
// start instances that the next poll would find idle (the lambda profile
// started 8 instances for bursts that 2 served, docs/BENCHMARKS.md).
func (in *instance) sustained() int { return min(in.reported, in.previous) }

// occupancy is what takes its slots: invocations and reported load.
func (in *instance) occupancy() int { return in.inflight + in.reported }

// quiet reports whether nothing is in flight on in, as far as the policy knows.
func (in *instance) quiet() bool { return in.inflight == 0 && in.reported == 0 && !in.active }

type deployment struct {
	queue     []InvocationID
	instances []*instance // in the order they were asked for: the oldest first
}

// Policy is the scaling policy's state. Not safe for concurrent use: the
// caller serialises events, as a controller loop does.
type Policy struct {
	cfg    Config
	deps   []deployment
	byID   map[InstanceID]*instance
	nextID InstanceID
	total  int // instances running or starting
	ready  Ready
}

// New returns a policy with no instances; the first Tick starts
// MinInstances of each deployment.
func New(cfg Config) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Policy{cfg: cfg, deps: make([]deployment, cfg.Deployments), byID: map[InstanceID]*instance{}, nextID: 1}, nil
}

// Invoke queues an invocation of deployment dep that arrived at now.
func (p *Policy) Invoke(now time.Time, dep int, inv InvocationID) error {
	if dep < 0 || dep >= len(p.deps) {
		return fmt.Errorf("%w: %d (of %d)", ErrNoDeployment, dep, len(p.deps))
	}
	d := &p.deps[dep]
	if len(d.queue) >= p.cfg.MaxQueue && p.free(dep) == nil {
		p.ready.Refused = append(p.ready.Refused, inv)
		return nil
	}
	d.queue = append(d.queue, inv)
	p.dispatch(now, dep)
	return nil
}

// Cancel withdraws a queued invocation whose caller stopped waiting (its
// context ended) and reports whether it was still queued. One that was
// already assigned is not withdrawn: the caller reports it Done. Without
// Cancel a queue of abandoned invocations would keep starting instances
// for callers that have gone.
func (p *Policy) Cancel(now time.Time, dep int, inv InvocationID) bool {
	if dep < 0 || dep >= len(p.deps) {
		return false
	}
	d := &p.deps[dep]
	i := slices.Index(d.queue, inv)
	if i < 0 {
		return false
	}
	d.queue = slices.Delete(d.queue, i, i+1)
	if len(d.queue) == 0 {
		d.queue = nil
	}
	return true
}

// Started reports that an instance finished its cold start at now.
func (p *Policy) Started(now time.Time, id InstanceID) error {
	in := p.byID[id]
	if in == nil {
		return fmt.Errorf("%w: %d", ErrUnknownInstance, id)
	}
	if in.state == Running {
		return nil
	}
	in.state, in.idle = Running, now
	p.dispatch(now, in.dep)
	return nil
}

// Done reports that an invocation on instance id ended at now.
func (p *Policy) Done(now time.Time, id InstanceID) error {
	in := p.byID[id]
	if in == nil {
		return fmt.Errorf("%w: %d", ErrUnknownInstance, id)
	}
	if in.inflight > 0 {
		in.inflight--
	}
	if in.inflight == 0 {
		in.idle = now
	}
	p.dispatch(now, in.dep)
	return nil
}

// Load reports the load on running instance id that did not come through
// the policy, as read at now: inflight requests in flight on its
// connections, and served requests begun there since the previous report
// (short ones that began and ended between two readings). A report
// replaces the previous one. An instance whose report shows load is not
// idle: its idle clock restarts at now. Reports on a starting instance are
// ignored (it serves nothing yet). The caller reports 0, 0 when it can no
// longer read an instance, so that a stale report does not keep it.
func (p *Policy) Load(now time.Time, id InstanceID, inflight, served int) error {
	in := p.byID[id]
	if in == nil {
		return fmt.Errorf("%w: %d", ErrUnknownInstance, id)
	}
	if in.state != Running {
		return nil
	}
	in.previous = in.reported
	in.reported, in.active = max(inflight, 0), inflight > 0 || served > 0
	if in.active {
		in.idle = now
	}
	p.dispatch(now, in.dep)
	return nil
}

// Gone reports that an instance died (crashed, killed, failed to start):
// its invocations in flight are the caller's to fail or resubmit, and the
// deployment starts another if its queue or minimum needs one.
func (p *Policy) Gone(now time.Time, id InstanceID) error {
	in := p.byID[id]
	if in == nil {
		return fmt.Errorf("%w: %d", ErrUnknownInstance, id)
	}
	p.remove(in)
	p.keepMinimum(now)
	p.dispatchAll(now) // its room under the global cap may let another deployment start
	return nil
}

// Tick lets time pass: idle instances past their keep-alive are reclaimed
// (down to the minimum), and the minimum is kept.
func (p *Policy) Tick(now time.Time) {
	for dep := range p.deps {
		d := &p.deps[dep]
		// The newest idle ones go first: the oldest keep their caches. Not
		// below what the deployment's load wants (reported load may sit on
		// other instances than the idle ones).
		keep := max(p.cfg.MinInstances, p.wanted(dep))
		for i := len(d.instances) - 1; i >= 0 && len(d.instances) > keep; i-- {
			in := d.instances[i]
			if in.state == Running && in.quiet() && now.Sub(in.idle) >= p.cfg.KeepAlive {
				p.ready.Reclaims = append(p.ready.Reclaims, in.id)
				p.remove(in)
			}
		}
	}
	p.keepMinimum(now)
	p.dispatchAll(now) // the caps may have room again
}

// dispatchAll dispatches every deployment: its queue, and the starts its
// load wants (reported load wants them with no queue).
func (p *Policy) dispatchAll(now time.Time) {
	for dep := range p.deps {
		p.dispatch(now, dep)
	}
}

// Ready returns what to do since the last call and forgets it.
func (p *Policy) Ready() Ready {
	r := p.ready
	p.ready = Ready{}
	return r
}

// InstanceInfo is one instance as Instances lists it.
type InstanceInfo struct {
	ID         InstanceID
	Deployment int
	State      State
	InFlight   int
	Reported   int       // requests in flight on its connections, as last reported (Load)
	Since      time.Time // asked for
}

// Instances lists the instances, by deployment, the oldest first.
func (p *Policy) Instances() []InstanceInfo {
	var out []InstanceInfo
	for dep := range p.deps {
		for _, in := range p.deps[dep].instances {
			out = append(out, InstanceInfo{ID: in.id, Deployment: dep, State: in.state, InFlight: in.inflight, Reported: in.reported, Since: in.started})
		}
	}
	return out
}

// Queued returns the invocations waiting in deployment dep's queue.
func (p *Policy) Queued(dep int) int { return len(p.deps[dep].queue) }

// dispatch hands the queue of dep to free slots, then starts the instances
// the deployment's load wants beyond those running and starting.
func (p *Policy) dispatch(now time.Time, dep int) {
	d := &p.deps[dep]
	for len(d.queue) > 0 {
		in := p.free(dep)
		if in == nil {
			break
		}
		in.inflight++
		p.ready.Assigns = append(p.ready.Assigns, Assign{Invocation: d.queue[0], Instance: in.id})
		d.queue = d.queue[1:]
	}
	if len(d.queue) == 0 {
		d.queue = nil // let the array go
	}
	// With no reported load this is the queue's need at Concurrency each,
	// minus the instances starting: every running instance is full when
	// invocations wait.
	need := p.wanted(dep) - len(d.instances)
	if len(d.queue) > 0 && need <= 0 && !p.starting(dep) {
		// Invocations wait with every slot taken by load that has not
		// lasted two reports yet: they are not left waiting for it.
		need = 1
	}
	for ; need > 0 && len(d.instances) < p.cfg.MaxPerDeployment; need-- {
		if p.total >= p.cfg.MaxInstances && !p.reclaimIdleElsewhere(dep) {
			break
		}
		p.start(now, dep)
	}
}

// starting reports whether an instance of deployment dep is starting.
func (p *Policy) starting(dep int) bool {
	for _, in := range p.deps[dep].instances {
		if in.state == Starting {
			return true
		}
	}
	return false
}

// wanted returns the instances deployment dep's load wants: its queue and
// its running instances' invocations and sustained reported load, at
// Concurrency each.
func (p *Policy) wanted(dep int) int {
	d := &p.deps[dep]
	load := len(d.queue)
	for _, in := range d.instances {
		if in.state == Running {
			load += in.inflight + in.sustained()
		}
	}
	return (load + p.cfg.Concurrency - 1) / p.cfg.Concurrency
}

// reclaimIdleElsewhere makes room under the global cap for deployment dep,
// which wants another instance: it reclaims at once the newest quiet
// instance of another deployment above that one's minimum and what its
// load wants, rather than let dep wait for the keep-alive. It reports
// whether it found one.
func (p *Policy) reclaimIdleElsewhere(dep int) bool {
	for other := range p.deps {
		d := &p.deps[other]
		if other == dep || len(d.instances) <= max(p.cfg.MinInstances, p.wanted(other)) {
			continue
		}
		for i := len(d.instances) - 1; i >= 0; i-- {
			if in := d.instances[i]; in.state == Running && in.quiet() {
				p.ready.Reclaims = append(p.ready.Reclaims, in.id)
				p.remove(in)
				return true
			}
		}
	}
	return false
}

// free returns the running instance of dep with a free slot and the lowest
// occupancy (the oldest on a tie), or nil. When none has a free slot and
// the deployment cannot grow (at a cap, none starting), reported load
// yields: the instance with fewer than Concurrency invocations and the
// lowest occupancy.
func (p *Policy) free(dep int) *instance {
	var best, fallback *instance
	for _, in := range p.deps[dep].instances {
		if in.state != Running || in.inflight >= p.cfg.Concurrency {
			continue
		}
		if in.occupancy() < p.cfg.Concurrency && (best == nil || in.occupancy() < best.occupancy()) {
			best = in
		}
		if fallback == nil || in.occupancy() < fallback.occupancy() {
			fallback = in
		}
	}
	if best != nil || fallback == nil || p.canGrow(dep) {
		return best
	}
	return fallback
}

// canGrow reports whether deployment dep has an instance starting, or room
// to start one (its cap, and the global cap or another deployment's quiet
// instance to take the place of).
func (p *Policy) canGrow(dep int) bool {
	d := &p.deps[dep]
	for _, in := range d.instances {
		if in.state == Starting {
			return true
		}
	}
	if len(d.instances) >= p.cfg.MaxPerDeployment {
		return false
	}
	if p.total < p.cfg.MaxInstances {
		return true
	}
	for other := range p.deps {
		o := &p.deps[other]
		if other == dep || len(o.instances) <= max(p.cfg.MinInstances, p.wanted(other)) {
			continue
		}
		for _, in := range o.instances {
			if in.state == Running && in.quiet() {
				return true
			}
		}
	}
	return false
}

func (p *Policy) start(now time.Time, dep int) {
	in := &instance{id: p.nextID, dep: dep, state: Starting, started: now}
	p.nextID++
	p.byID[in.id] = in
	p.deps[dep].instances = append(p.deps[dep].instances, in)
	p.total++
	p.ready.Starts = append(p.ready.Starts, Start{Instance: in.id, Deployment: dep})
}

func (p *Policy) remove(in *instance) {
	d := &p.deps[in.dep]
	d.instances = slices.DeleteFunc(d.instances, func(x *instance) bool { return x == in })
	delete(p.byID, in.id)
	p.total--
}

// keepMinimum starts what each deployment lacks of MinInstances.
func (p *Policy) keepMinimum(now time.Time) {
	for dep := range p.deps {
		for len(p.deps[dep].instances) < p.cfg.MinInstances && p.total < p.cfg.MaxInstances {
			p.start(now, dep)
		}
	}
}
