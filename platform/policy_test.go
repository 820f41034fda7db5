package platform

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func mustPolicy(t *testing.T, cfg Config) *Policy {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScaleUpAndDown(t *testing.T) {
	cfg := Config{Deployments: 2, Concurrency: 2, MaxInstances: 5, MaxPerDeployment: 4, MinInstances: 1, KeepAlive: 10 * time.Second, MaxQueue: 3}
	p := mustPolicy(t, cfg)
	p.Tick(t0)
	r := p.Ready()
	if len(r.Starts) != 2 {
		t.Fatalf("first tick: %+v, want the minimum of each deployment started", r)
	}
	for _, s := range r.Starts {
		p.Started(t0.Add(time.Millisecond), s.Instance)
	}
	// Five invocations of deployment 0: two fit the warm instance, three
	// wait, and two instances start for them (two slots each).
	for i := 1; i <= 5; i++ {
		p.Invoke(t0.Add(time.Second), 0, InvocationID(i))
	}
	r = p.Ready()
	if len(r.Assigns) != 2 || len(r.Starts) != 2 || p.Queued(0) != 3 {
		t.Fatalf("burst: %+v, queued %d", r, p.Queued(0))
	}
	// The queue is full (3): a sixth is refused while no slot is free.
	p.Invoke(t0.Add(time.Second), 0, 6)
	if r = p.Ready(); len(r.Refused) != 1 || r.Refused[0] != 6 {
		t.Fatalf("queue full: %+v", r)
	}
	// The cold starts end: the queue drains onto them.
	for _, s := range []InstanceID{3, 4} {
		p.Started(t0.Add(1500*time.Millisecond), s)
	}
	if r = p.Ready(); len(r.Assigns) != 3 || p.Queued(0) != 0 {
		t.Fatalf("after the cold starts: %+v", r)
	}
	// Everything ends; past the keep-alive the extra instances go, the
	// oldest (warmest) stays.
	for _, a := range []InstanceID{1, 1, 3, 3, 4} {
		p.Done(t0.Add(2*time.Second), a)
	}
	p.Tick(t0.Add(13 * time.Second))
	r = p.Ready()
	if len(r.Reclaims) != 2 || len(p.deps[0].instances) != 1 || p.deps[0].instances[0].id != 1 {
		t.Fatalf("after the keep-alive: %+v, instances %+v", r, p.Instances())
	}
}

// At the global cap, a deployment with invocations waiting takes the place
// of another deployment's idle instance at once.
func TestGlobalCapTakesIdleElsewhere(t *testing.T) {
	cfg := Config{Deployments: 2, Concurrency: 1, MaxInstances: 3, MaxPerDeployment: 3, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 10}
	p := mustPolicy(t, cfg)
	p.Tick(t0)
	for _, s := range p.Ready().Starts {
		p.Started(t0, s.Instance)
	}
	p.Invoke(t0, 1, 1)
	p.Invoke(t0, 1, 2) // deployment 1 grows to 2: the cap (3) is reached
	r := p.Ready()
	p.Started(t0, r.Starts[0].Instance)
	p.Done(t0, 3)
	p.Done(t0, r.Starts[0].Instance) // deployment 1's two instances idle
	p.Ready()
	p.Invoke(t0, 0, 3)
	p.Invoke(t0, 0, 4) // deployment 0 needs a second instance
	r = p.Ready()
	if len(r.Reclaims) != 1 || len(r.Starts) != 1 || r.Starts[0].Deployment != 0 {
		t.Fatalf("at the cap: %+v", r)
	}
}

// Load reported by instances (requests over their connections, which the
// policy never dispatched) occupies their slots, scales the deployment out
// with no invocation queued, keeps a loaded instance from the keep-alive,
// and yields to invocations only when the deployment cannot grow.
func TestLoadOccupiesSlotsAndKeeps(t *testing.T) {
	cfg := Config{Deployments: 1, Concurrency: 2, MaxInstances: 3, MaxPerDeployment: 3, MinInstances: 1, KeepAlive: 10 * time.Second, MaxQueue: 10}
	p := mustPolicy(t, cfg)
	p.Tick(t0)
	p.Ready()
	p.Started(t0, 1)
	if err := p.Load(t0, 99, 1, 0); err == nil {
		t.Fatal("a report on an unknown instance accepted")
	}
	// 5 in flight on instance 1's connections at concurrency 2: 3 wanted,
	// once a second report shows it lasted (one report starts nothing).
	p.Load(t0.Add(time.Second), 1, 5, 7)
	if r := p.Ready(); len(r.Starts) != 0 {
		t.Fatalf("one report of load started instances: %+v", r)
	}
	p.Load(t0.Add(time.Second+200*time.Millisecond), 1, 6, 7)
	r := p.Ready()
	if len(r.Starts) != 2 || len(r.Assigns) != 0 {
		t.Fatalf("reported load 5 at concurrency 2: %+v, want 2 starts", r)
	}
	p.Started(t0.Add(2*time.Second), 2)
	p.Started(t0.Add(2*time.Second), 3)
	// An invocation goes to the least occupied instance, not the oldest.
	p.Invoke(t0.Add(2*time.Second), 0, 1)
	if r = p.Ready(); len(r.Assigns) != 1 || r.Assigns[0].Instance != 2 {
		t.Fatalf("invocation beside a loaded instance: %+v, want instance 2", r)
	}
	p.Done(t0.Add(2*time.Second), 2)
	// Long past the keep-alive of instance 1's report, nothing is reclaimed:
	// its report still says 5 in flight, and the load wants 3 instances.
	p.Tick(t0.Add(30 * time.Second))
	if r = p.Ready(); len(r.Reclaims) != 0 {
		t.Fatalf("reclaims under reported load: %+v", r)
	}
	// At the cap with every slot taken by reported load, an invocation
	// is not held back by it.
	for _, id := range []InstanceID{1, 2, 3} {
		p.Load(t0.Add(31*time.Second), id, 2, 1)
	}
	p.Invoke(t0.Add(31*time.Second), 0, 2)
	if r = p.Ready(); len(r.Assigns) != 1 || len(r.Starts) != 0 || p.Queued(0) != 0 {
		t.Fatalf("at the cap, reported load in every slot: %+v, queued %d; want the invocation assigned", r, p.Queued(0))
	}
	p.Done(t0.Add(31*time.Second), r.Assigns[0].Instance)
	// Only short requests between polls on instance 3: not idle either.
	p.Load(t0.Add(40*time.Second), 1, 0, 0)
	p.Load(t0.Add(40*time.Second), 2, 0, 0)
	p.Load(t0.Add(40*time.Second), 3, 0, 3)
	p.Tick(t0.Add(45 * time.Second)) // 14 s after instance 2's last activity
	if r = p.Ready(); len(r.Reclaims) != 2 || !slices.Contains(r.Reclaims, 1) || !slices.Contains(r.Reclaims, 2) {
		t.Fatalf("load gone but for instance 3's short requests: %+v, want instances 1 and 2 reclaimed", r)
	}
	p.Load(t0.Add(41*time.Second), 3, 0, 0) // quiet since 40 s
	p.Tick(t0.Add(49 * time.Second))
	if r = p.Ready(); len(r.Reclaims) != 0 {
		t.Fatalf("the minimum reclaimed: %+v", r)
	}
	if in := p.Instances(); len(in) != 1 || in[0].ID != 3 || in[0].Reported != 0 {
		t.Fatalf("instances %+v, want instance 3 alone", in)
	}
}

// The simulator: a seeded stream of bursts over several deployments, cold
// starts and service times drawn at random, instances crashing; after every
// event the invariants hold, every invocation is assigned or refused once,
// and bursts scale deployments up, idle time back down.
func TestPolicySimulated(t *testing.T) {
	seeds := 40
	if s := os.Getenv("NIMBUS_SIM_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	first := 1
	if s := os.Getenv("NIMBUS_SIM_SEED"); s != "" {
		first, _ = strconv.Atoi(s)
		seeds = 1
	}
	simStats.tcpScaled = 0
	for seed := first; seed < first+seeds; seed++ {
		if err := simulate(uint64(seed)); err != nil {
			t.Fatalf("seed %d: %v\nreplay: NIMBUS_SIM_SEED=%d go test -run TestPolicySimulated ./platform", seed, err, seed)
		}
	}
	t.Logf("%d seeds; reported load alone scaled out %d deployments", seeds, simStats.tcpScaled)
	if seeds >= 10 && simStats.tcpScaled == 0 {
		t.Fatalf("reported load never scaled a deployment out")
	}
}

type event struct {
	at   time.Time
	kind int // evArrive, evStarted, evDone, evCrash, evTick, evCancel, evPoll
	dep  int
	inst InstanceID
	inv  InvocationID // evCancel's
	seq  int
}

const (
	evArrive = iota
	evStarted
	evDone
	evCrash
	evTick
	evCancel
	evPoll // Load reports on every running instance (TCP load)
)

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func simulate(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x9a7f))
	cfg := Config{Deployments: 1 + rng.IntN(3), Concurrency: 1 + rng.IntN(4), MaxPerDeployment: 2 + rng.IntN(6),
		KeepAlive: time.Duration(1+rng.IntN(5)) * time.Second, MaxQueue: 5 + rng.IntN(50)}
	cfg.MaxInstances = cfg.MaxPerDeployment * (1 + rng.IntN(cfg.Deployments))
	cfg.MinInstances = rng.IntN(2)
	if cfg.MinInstances*cfg.Deployments > cfg.MaxInstances {
		cfg.MinInstances = 0
	}
	p, err := New(cfg)
	if err != nil {
		return err
	}
	var q events
	seq := 0
	push := func(e event) { seq++; e.seq = seq; heap.Push(&q, e) }
	// Load: per deployment, bursts of arrivals at a rate drawn per second.
	end := t0.Add(60 * time.Second)
	for dep := 0; dep < cfg.Deployments; dep++ {
		for s := 0; s < 50; s++ {
			n := rng.IntN(5)
			if rng.IntN(8) == 0 {
				n = 20 + rng.IntN(60) // a burst
			}
			for i := 0; i < n; i++ {
				push(event{at: t0.Add(time.Duration(s)*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond), kind: evArrive, dep: dep})
			}
		}
	}
	for at := t0; at.Before(end); at = at.Add(250 * time.Millisecond) {
		push(event{at: at, kind: evTick})
	}
	// TCP load, which bypasses the policy: per deployment, a few stretches
	// in which each running instance serves 0..2·Concurrency requests on
	// its connections; polled every 200 ms (as Local does), until the end.
	type stretch struct{ from, to time.Time }
	tcp := make([][]stretch, cfg.Deployments)
	for dep := range tcp {
		for k := rng.IntN(3); k > 0; k-- {
			from := t0.Add(time.Duration(rng.IntN(45_000)) * time.Millisecond)
			tcp[dep] = append(tcp[dep], stretch{from, from.Add(time.Duration(500+rng.IntN(5000)) * time.Millisecond)})
		}
	}
	tcpOn := func(dep int, at time.Time) bool {
		for _, st := range tcp[dep] {
			if !at.Before(st.from) && at.Before(st.to) {
				return true
			}
		}
		return false
	}
	for at := t0.Add(50 * time.Millisecond); at.Before(end); at = at.Add(200 * time.Millisecond) {
		push(event{at: at, kind: evPoll})
	}

	assigned := map[InvocationID]InstanceID{}
	refused := map[InvocationID]bool{}
	cancelled := map[InvocationID]bool{}
	invDep := map[InvocationID]int{}
	inflight := map[InstanceID]int{}
	alive := map[InstanceID]bool{}
	running := map[InstanceID]bool{}
	depOf := map[InstanceID]int{}
	reported := map[InstanceID]int{}        // the last Load's in flight
	previous := map[InstanceID]int{}        // the one before
	reportedActive := map[InstanceID]bool{} // the last Load showed load
	lastActive := map[InstanceID]time.Time{}
	occ := func(id InstanceID) int { return inflight[id] + reported[id] }
	// sustained counts the reported load that lasted two reports: what
	// scale-out answers to.
	sustained := func(id InstanceID) int { return inflight[id] + min(reported[id], previous[id]) }
	tcpScaled := make([]bool, cfg.Deployments) // reported load alone made it start one
	nextInv := InvocationID(1)
	maxSeen := make([]int, cfg.Deployments)
	apply := func(now time.Time) error {
		r := p.Ready()
		for _, s := range r.Starts {
			alive[s.Instance] = true
			depOf[s.Instance] = s.Deployment
			d := time.Duration(20+rng.IntN(200)) * time.Millisecond
			kind := evStarted
			if rng.IntN(40) == 0 {
				kind = evCrash // failed to start
			}
			push(event{at: now.Add(d), kind: kind, inst: s.Instance})
		}
		for _, a := range r.Assigns {
			if _, dup := assigned[a.Invocation]; dup || refused[a.Invocation] || cancelled[a.Invocation] {
				return fmt.Errorf("invocation %d assigned twice", a.Invocation)
			}
			if !alive[a.Instance] {
				return fmt.Errorf("invocation %d assigned to instance %d, not alive", a.Invocation, a.Instance)
			}
			// Reported load occupies slots: an instance already full with it
			// is handed an invocation only when its deployment cannot grow.
			if occ(a.Instance) >= cfg.Concurrency && p.canGrow(depOf[a.Instance]) {
				return fmt.Errorf("invocation %d assigned to instance %d, full (%d invocations, %d reported), while its deployment can grow",
					a.Invocation, a.Instance, inflight[a.Instance], reported[a.Instance])
			}
			assigned[a.Invocation] = a.Instance
			inflight[a.Instance]++
			if inflight[a.Instance] > cfg.Concurrency {
				return fmt.Errorf("instance %d has %d in flight, concurrency %d", a.Instance, inflight[a.Instance], cfg.Concurrency)
			}
			push(event{at: now.Add(time.Duration(5+rng.IntN(300)) * time.Millisecond), kind: evDone, inst: a.Instance})
			if rng.IntN(500) == 0 {
				push(event{at: now.Add(time.Duration(rng.IntN(100)) * time.Millisecond), kind: evCrash, inst: a.Instance})
			}
		}
		for _, id := range r.Reclaims {
			if inflight[id] != 0 {
				return fmt.Errorf("instance %d reclaimed with %d in flight", id, inflight[id])
			}
			if reported[id] != 0 || reportedActive[id] {
				return fmt.Errorf("instance %d reclaimed with reported load (%d in flight on connections, active %v)", id, reported[id], reportedActive[id])
			}
			// Within the keep-alive of its last reported activity only to
			// make room for another deployment's start.
			if at, ok := lastActive[id]; ok && now.Sub(at) < cfg.KeepAlive {
				other := false
				for _, s := range r.Starts {
					other = other || s.Deployment != depOf[id]
				}
				if !other {
					return fmt.Errorf("instance %d reclaimed %v after reporting load, keep-alive %v", id, now.Sub(at), cfg.KeepAlive)
				}
			}
			delete(alive, id)
			delete(running, id)
		}
		for _, inv := range r.Refused {
			if _, dup := assigned[inv]; dup || refused[inv] {
				return fmt.Errorf("invocation %d refused after an answer", inv)
			}
			refused[inv] = true
		}
		return check(p, cfg, now, maxSeen, occ, sustained)
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		switch e.kind {
		case evArrive:
			inv := nextInv
			nextInv++
			invDep[inv] = e.dep
			if err := p.Invoke(e.at, e.dep, inv); err != nil {
				return err
			}
			if rng.IntN(15) == 0 { // its caller gives up after a while
				push(event{at: e.at.Add(time.Duration(rng.IntN(400)) * time.Millisecond), kind: evCancel, dep: e.dep, inv: inv})
			}
		case evCancel:
			_, wasAssigned := assigned[e.inv]
			queued := p.Cancel(e.at, e.dep, e.inv)
			if queued && (wasAssigned || refused[e.inv]) {
				return fmt.Errorf("invocation %d cancelled from the queue after its answer", e.inv)
			}
			if !queued && !wasAssigned && !refused[e.inv] {
				return fmt.Errorf("invocation %d neither queued nor answered when cancelled", e.inv)
			}
			cancelled[e.inv] = queued
		case evStarted:
			if alive[e.inst] {
				running[e.inst] = true
				if err := p.Started(e.at, e.inst); err != nil {
					return err
				}
			}
		case evPoll:
			ids := make([]InstanceID, 0, len(running))
			for id := range running {
				ids = append(ids, id)
			}
			slices.Sort(ids) // the map's order is not seeded
			for _, id := range ids {
				n, served := 0, 0
				if tcpOn(depOf[id], e.at) {
					n, served = rng.IntN(2*cfg.Concurrency+1), rng.IntN(4)
				} else if e.at.Before(t0.Add(50*time.Second)) && rng.IntN(20) == 0 {
					served = 1 // a short request between two polls
				}
				if !running[id] {
					continue // reclaimed for an earlier report's start
				}
				dep := depOf[id]
				instancesBefore := len(p.deps[dep].instances)
				queuedBefore := p.Queued(dep)
				if err := p.Load(e.at, id, n, served); err != nil {
					return err
				}
				previous[id] = reported[id]
				reported[id], reportedActive[id] = n, n > 0 || served > 0
				if reportedActive[id] {
					lastActive[id] = e.at
				}
				if len(p.deps[dep].instances) > instancesBefore && queuedBefore == 0 {
					tcpScaled[dep] = true
				}
				// Each report's Ready is carried out before the next report.
				if err := apply(e.at); err != nil {
					return fmt.Errorf("at %v after a report of %d (%d) on instance %d: %w", e.at.Sub(t0), n, served, id, err)
				}
			}
		case evDone:
			if alive[e.inst] && inflight[e.inst] > 0 {
				inflight[e.inst]--
				if err := p.Done(e.at, e.inst); err != nil {
					return err
				}
			}
		case evCrash:
			if alive[e.inst] {
				delete(alive, e.inst)
				delete(running, e.inst)
				inflight[e.inst] = 0 // the caller fails what was in flight
				reported[e.inst], previous[e.inst], reportedActive[e.inst] = 0, 0, false
				if err := p.Gone(e.at, e.inst); err != nil {
					return err
				}
			}
		case evTick:
			p.Tick(e.at)
		}
		if err := apply(e.at); err != nil {
			return fmt.Errorf("at %v after event %+v: %w", e.at.Sub(t0), e, err)
		}
	}
	// The end: everything arrived was answered, and idle time has taken the
	// deployments back to their minimum.
	for inv := InvocationID(1); inv < nextInv; inv++ {
		_, a := assigned[inv]
		if !a && !refused[inv] && !cancelled[inv] && p.Queued(invDep[inv]) == 0 {
			return fmt.Errorf("invocation %d never assigned nor refused", inv)
		}
	}
	p.Tick(end.Add(time.Hour))
	if err := apply(end.Add(time.Hour)); err != nil {
		return err
	}
	for dep := 0; dep < cfg.Deployments; dep++ {
		n := len(p.deps[dep].instances)
		if p.Queued(dep) == 0 && n > cfg.MinInstances {
			return fmt.Errorf("deployment %d keeps %d instances after an idle hour, minimum %d", dep, n, cfg.MinInstances)
		}
		if maxSeen[dep] < 2 && cfg.MaxPerDeployment >= 2 && cfg.MaxInstances >= cfg.Deployments*2 {
			return fmt.Errorf("deployment %d never scaled past %d instance(s) under bursts", dep, maxSeen[dep])
		}
	}
	simStats.tcpScaled += countTrue(tcpScaled)
	return nil
}

var simStats struct{ tcpScaled int } // deployments that reported load alone scaled out, over the seeds run

func countTrue(b []bool) (n int) {
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// check verifies the policy's invariants at now; occ is an instance's
// occupancy as the simulator counts it (invocations it was handed and has
// not finished, and its last reported load).
func check(p *Policy, cfg Config, now time.Time, maxSeen []int, occ, sustained func(InstanceID) int) error {
	total := 0
	for dep := range p.deps {
		d := &p.deps[dep]
		n := len(d.instances)
		total += n
		maxSeen[dep] = max(maxSeen[dep], n)
		if n > cfg.MaxPerDeployment {
			return fmt.Errorf("deployment %d has %d instances, cap %d", dep, n, cfg.MaxPerDeployment)
		}
		if len(d.queue) > cfg.MaxQueue {
			return fmt.Errorf("deployment %d queues %d, bound %d", dep, len(d.queue), cfg.MaxQueue)
		}
		starting, load := 0, len(d.queue) // load: what scale-out answers to
		for _, in := range d.instances {
			if in.state == Running && occ(in.id) < cfg.Concurrency && len(d.queue) > 0 {
				return fmt.Errorf("deployment %d queues %d while instance %d has a free slot", dep, len(d.queue), in.id)
			}
			if in.state == Starting {
				starting++
			} else {
				load += sustained(in.id)
			}
		}
		// A queue waits only for starting instances or the caps.
		if len(d.queue) > 0 && starting == 0 && n < cfg.MaxPerDeployment && p.total < cfg.MaxInstances {
			return fmt.Errorf("deployment %d queues %d with nothing starting and room to start", dep, len(d.queue))
		}
		// Reported load is served, not queued: at the caps with nothing
		// starting, it does not hold an invocation back from an instance
		// with fewer than Concurrency invocations.
		if len(d.queue) > 0 && starting == 0 && (n >= cfg.MaxPerDeployment || p.total >= cfg.MaxInstances) {
			for _, in := range d.instances {
				if in.state == Running && in.inflight < cfg.Concurrency && !p.canGrow(dep) {
					return fmt.Errorf("deployment %d queues %d at the caps while instance %d has %d invocations of %d", dep, len(d.queue), in.id, in.inflight, cfg.Concurrency)
				}
			}
		}
		// Scale-out on load, queue or not: the deployment has at least the
		// instances its load wants at Concurrency each, or is at a cap.
		if want := (load + cfg.Concurrency - 1) / cfg.Concurrency; want > n && n < cfg.MaxPerDeployment && p.total < cfg.MaxInstances {
			return fmt.Errorf("deployment %d's load %d wants %d instances, it has %d and room to start", dep, load, want, n)
		}
	}
	if total != p.total || total > cfg.MaxInstances {
		return fmt.Errorf("%d instances (counted %d), cap %d", total, p.total, cfg.MaxInstances)
	}
	return nil
}
