// Package platform is the serverless platform seam of issue 29: where an
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
}

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
		// The newest idle ones go first: the oldest keep their caches.
		for i := len(d.instances) - 1; i >= 0 && len(d.instances) > p.cfg.MinInstances; i-- {
			in := d.instances[i]
			if in.state == Running && in.inflight == 0 && now.Sub(in.idle) >= p.cfg.KeepAlive {
				p.ready.Reclaims = append(p.ready.Reclaims, in.id)
				p.remove(in)
			}
		}
	}
	p.keepMinimum(now)
	p.dispatchAll(now) // the caps may have room again
}

// dispatchAll dispatches every deployment with invocations waiting.
func (p *Policy) dispatchAll(now time.Time) {
	for dep := range p.deps {
		if len(p.deps[dep].queue) > 0 {
			p.dispatch(now, dep)
		}
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
	Since      time.Time // asked for
}

// Instances lists the instances, by deployment, the oldest first.
func (p *Policy) Instances() []InstanceInfo {
	var out []InstanceInfo
	for dep := range p.deps {
		for _, in := range p.deps[dep].instances {
			out = append(out, InstanceInfo{ID: in.id, Deployment: dep, State: in.state, InFlight: in.inflight, Since: in.started})
		}
	}
	return out
}

// Queued returns the invocations waiting in deployment dep's queue.
func (p *Policy) Queued(dep int) int { return len(p.deps[dep].queue) }

// dispatch hands the queue of dep to free slots, then starts the instances
// the rest of the queue needs.
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
		return
	}
	// Each starting instance will take Concurrency of the queue.
	starting := 0
	for _, in := range d.instances {
		if in.state == Starting {
			starting++
		}
	}
	need := (len(d.queue)+p.cfg.Concurrency-1)/p.cfg.Concurrency - starting
	for ; need > 0 && len(d.instances) < p.cfg.MaxPerDeployment; need-- {
		if p.total >= p.cfg.MaxInstances && !p.reclaimIdleElsewhere(dep) {
			break
		}
		p.start(now, dep)
	}
}

// reclaimIdleElsewhere makes room under the global cap for deployment dep,
// which has invocations waiting: it reclaims at once the newest idle
// instance of another deployment above that one's minimum, rather than
// let dep wait for the keep-alive. It reports whether it found one.
func (p *Policy) reclaimIdleElsewhere(dep int) bool {
	for other := range p.deps {
		d := &p.deps[other]
		if other == dep || len(d.instances) <= p.cfg.MinInstances {
			continue
		}
		for i := len(d.instances) - 1; i >= 0; i-- {
			if in := d.instances[i]; in.state == Running && in.inflight == 0 {
				p.ready.Reclaims = append(p.ready.Reclaims, in.id)
				p.remove(in)
				return true
			}
		}
	}
	return false
}

// free returns the running instance of dep with a free slot and the fewest
// invocations in flight (the oldest on a tie), or nil.
func (p *Policy) free(dep int) *instance {
	var best *instance
	for _, in := range p.deps[dep].instances {
		if in.state == Running && in.inflight < p.cfg.Concurrency && (best == nil || in.inflight < best.inflight) {
			best = in
		}
	}
	return best
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
