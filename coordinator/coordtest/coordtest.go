// Package coordtest is the conformance suite of the coordinator seam: every
// implementation of coordinator.Coordinator runs Run from its own tests.
//
//	func TestConformance(t *testing.T) { coordtest.Run(t, coordtest.Harness{...}) }
//
// It checks join and leave, the membership of each deployment, watch order
// and revisions, lease expiry (the member leaves, watchers are told, its own
// session is lost first), renewals that keep a session alive beyond its
// TTL, elections (one leader at a time, first come first served, leader
// loss on lease expiry, resignation), eviction of a member known dead,
// context cancellation and Close.
package coordtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// Harness binds the suite to one implementation.
type Harness struct {
	// New returns a fresh coordinator, sharing nothing with any other New
	// (its own key space), whose sessions have lease TTL. The suite closes
	// it at the test's end (Close must be safe to call twice).
	New func(t *testing.T) coordinator.Coordinator
	// Cut stops s's lease renewals, as a partition between the member and
	// the coordinator would: the lease expires TTL after its last renewal.
	Cut func(t *testing.T, s coordinator.Session)
	// Elapse lets d pass on c's clock (a real sleep, or a manual clock
	// moved forward).
	Elapse func(c coordinator.Coordinator, d time.Duration)
	// Now reads c's clock.
	Now func(c coordinator.Coordinator) time.Time
	// TTL is the lease TTL of the sessions New's coordinators make.
	TTL time.Duration
	// Wait bounds, in real time, how long the suite waits for an effect
	// the backend delivers asynchronously: a watch event after a change,
	// an expiry once TTL has elapsed after a cut (for a server that checks
	// expiries periodically, add its period).
	Wait time.Duration
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("JoinLeave", func(t *testing.T) { testJoinLeave(t, h) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, h) })
	t.Run("Election", func(t *testing.T) { testElection(t, h) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, h) })
	t.Run("Close", func(t *testing.T) { testClose(t, h) })
	t.Run("Evict", func(t *testing.T) { testEvict(t, h) })
	// The rest wait for leases, in real time on a real server: in parallel.
	t.Run("Leases", func(t *testing.T) {
		t.Run("RenewalKeepsSession", func(t *testing.T) { t.Parallel(); testRenewal(t, h) })
		t.Run("Expiry", func(t *testing.T) { t.Parallel(); testExpiry(t, h) })
		t.Run("LeaderLossOnExpiry", func(t *testing.T) { t.Parallel(); testLeaderExpiry(t, h) })
		t.Run("OneLeaderAtATime", func(t *testing.T) { t.Parallel(); testOneLeader(t, h) })
	})
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newC(t *testing.T, h Harness) coordinator.Coordinator {
	c := h.New(t)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func join(t *testing.T, c coordinator.Coordinator, id string, dep int) coordinator.Session {
	t.Helper()
	s, err := c.Join(ctxT(t, 10*time.Second), coordinator.Member{ID: id, Deployment: dep, Addr: "http://" + id + ".test:9870"})
	if err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	return s
}

func ids(ms []coordinator.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func wantMembers(t *testing.T, c coordinator.Coordinator, dep int, want ...string) coordinator.View {
	t.Helper()
	v, err := c.Members(ctxT(t, 10*time.Second), dep)
	if err != nil {
		t.Fatalf("Members(%d): %v", dep, err)
	}
	if want == nil {
		want = []string{}
	}
	if got := ids(v.Members); !reflect.DeepEqual(got, want) {
		t.Fatalf("Members(%d) = %v at rev %d, want %v", dep, got, v.Rev, want)
	}
	return v
}

// next is the next event of ch, failing t after wait.
func next(t *testing.T, ch <-chan coordinator.Event, wait time.Duration) coordinator.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch closed early")
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("no watch event in %v", wait)
	}
	panic("unreachable")
}

func wantEvent(t *testing.T, ev coordinator.Event, kind coordinator.EventKind, id string) {
	t.Helper()
	if ev.Kind != kind || ev.Member.ID != id {
		t.Fatalf("event %v %s at rev %d, want %v %s", ev.Kind, ev.Member.ID, ev.Rev, kind, id)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, wait time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s: not closed after %v", what, wait)
	}
}

func testJoinLeave(t *testing.T, h Harness) {
	c := newC(t, h)
	v0 := wantMembers(t, c, coordinator.All)
	a := join(t, c, "a", 0)
	b := join(t, c, "b", 1)
	if got := a.Member(); got.ID != "a" || got.Deployment != 0 || got.Addr != "http://a.test:9870" {
		t.Fatalf("Member() = %+v", got)
	}
	wantMembers(t, c, 0, "a")
	wantMembers(t, c, 1, "b")
	wantMembers(t, c, 2)
	v := wantMembers(t, c, coordinator.All, "a", "b")
	if v.Rev <= v0.Rev {
		t.Fatalf("rev %d after two joins, %d before", v.Rev, v0.Rev)
	}
	if v.Members[0].Addr != "http://a.test:9870" || v.Members[1].Deployment != 1 {
		t.Fatalf("members %+v", v.Members)
	}
	if _, err := c.Join(ctxT(t, 10*time.Second), coordinator.Member{ID: "a", Deployment: 3}); !errors.Is(err, coordinator.ErrMemberExists) {
		t.Fatalf("second Join of a: %v, want ErrMemberExists", err)
	}
	for _, bad := range []coordinator.Member{{ID: ""}, {ID: "x/y"}, {ID: "x", Deployment: -1}} {
		if _, err := c.Join(ctxT(t, 10*time.Second), bad); !errors.Is(err, coordinator.ErrInvalid) {
			t.Fatalf("Join(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.Members(ctxT(t, time.Second), -2); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("Members(-2): %v, want ErrInvalid", err)
	}
	if d := a.Deadline(); !d.After(h.Now(c)) {
		t.Fatalf("live session's deadline %v not after now %v", d, h.Now(c))
	}
	if a.Err() != nil || closed(a.Lost()) {
		t.Fatalf("live session: Err %v, Lost closed %v", a.Err(), closed(a.Lost()))
	}

	if err := a.Leave(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if !closed(a.Lost()) || !errors.Is(a.Err(), coordinator.ErrClosed) || !a.Deadline().IsZero() {
		t.Fatalf("after Leave: Lost closed %v, Err %v, Deadline %v", closed(a.Lost()), a.Err(), a.Deadline())
	}
	v2 := wantMembers(t, c, coordinator.All, "b")
	if v2.Rev <= v.Rev {
		t.Fatalf("rev %d after a leave, %d before", v2.Rev, v.Rev)
	}
	if _, err := a.Campaign(ctxT(t, time.Second), "e"); err == nil {
		t.Fatal("Campaign on a session that left succeeded")
	}
	if err := a.Leave(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	a2 := join(t, c, "a", 2) // the ID is free again
	wantMembers(t, c, 2, "a")
	_ = a2
	_ = b
}

func testWatch(t *testing.T, h Harness) {
	c := newC(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	all, err := c.Watch(ctx, coordinator.All)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	snap := next(t, all, h.Wait)
	if snap.Kind != coordinator.Snapshot || len(snap.Members) != 0 {
		t.Fatalf("first event %v with %v, want an empty snapshot", snap.Kind, ids(snap.Members))
	}
	a := join(t, c, "a", 0)
	join(t, c, "b", 1)
	if err := a.Leave(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	rev := snap.Rev
	for _, w := range []struct {
		kind coordinator.EventKind
		id   string
	}{{coordinator.Joined, "a"}, {coordinator.Joined, "b"}, {coordinator.Left, "a"}} {
		ev := next(t, all, h.Wait)
		wantEvent(t, ev, w.kind, w.id)
		if ev.Rev <= rev {
			t.Fatalf("event %v %s at rev %d after rev %d: not increasing", ev.Kind, ev.Member.ID, ev.Rev, rev)
		}
		rev = ev.Rev
	}
	// A watch of one deployment, begun later, starts from the membership
	// then; a change reaches both watches with one revision.
	dep0, err := c.Watch(ctx, 0)
	if err != nil {
		t.Fatalf("Watch(0): %v", err)
	}
	snap0 := next(t, dep0, h.Wait)
	if snap0.Kind != coordinator.Snapshot || len(snap0.Members) != 0 || snap0.Rev < rev {
		t.Fatalf("deployment 0 snapshot %v %v at rev %d (last change %d), want empty, not older", snap0.Kind, ids(snap0.Members), snap0.Rev, rev)
	}
	join(t, c, "c", 0)
	join(t, c, "d", 1)
	e1 := next(t, all, h.Wait)
	wantEvent(t, e1, coordinator.Joined, "c")
	e0 := next(t, dep0, h.Wait)
	wantEvent(t, e0, coordinator.Joined, "c")
	if e0.Rev != e1.Rev || e0.Member != e1.Member {
		t.Fatalf("one change seen as %+v and %+v", e0, e1)
	}
	e2 := next(t, all, h.Wait)
	wantEvent(t, e2, coordinator.Joined, "d")
	v := wantMembers(t, c, coordinator.All, "c", "b", "d") // by deployment, then ID
	if v.Rev != e2.Rev {
		t.Fatalf("Members at rev %d, last event at %d", v.Rev, e2.Rev)
	}
	// A later snapshot shows what the events built.
	all2, err := c.Watch(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	s2 := next(t, all2, h.Wait)
	if s2.Kind != coordinator.Snapshot || s2.Rev != v.Rev || !reflect.DeepEqual(s2.Members, v.Members) {
		t.Fatalf("second snapshot %v %v at %d, want %v at %d", s2.Kind, ids(s2.Members), s2.Rev, ids(v.Members), v.Rev)
	}
	// Deployment 0's watch did not see d (deployment 1).
	select {
	case ev := <-dep0:
		t.Fatalf("deployment 0's watch got %v %s of deployment %d", ev.Kind, ev.Member.ID, ev.Member.Deployment)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	for _, ch := range []<-chan coordinator.Event{all, dep0, all2} {
		deadline := time.After(h.Wait)
	drain:
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					break drain
				}
			case <-deadline:
				t.Fatal("watch not closed after its context was cancelled")
			}
		}
	}
}

func testElection(t *testing.T, h Harness) {
	c := newC(t, h)
	a := join(t, c, "a", 0)
	b := join(t, c, "b", 0)
	if _, ok, err := c.Leader(ctxT(t, 10*time.Second), "e"); err != nil || ok {
		t.Fatalf("Leader before any campaign: ok %v, err %v", ok, err)
	}
	la, err := a.Campaign(ctxT(t, 10*time.Second), "e")
	if err != nil {
		t.Fatalf("Campaign(a): %v", err)
	}
	if la.Election() != "e" || closed(la.Done()) {
		t.Fatalf("leadership of %q, done %v", la.Election(), closed(la.Done()))
	}
	wantLeader(t, c, "e", "a")
	if _, err := a.Campaign(ctxT(t, time.Second), "e"); !errors.Is(err, coordinator.ErrCampaigning) {
		t.Fatalf("second Campaign of a: %v, want ErrCampaigning", err)
	}
	if _, err := a.Campaign(ctxT(t, time.Second), "bad/name"); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("Campaign(bad/name): %v, want ErrInvalid", err)
	}
	// Another election is independent.
	lb2, err := b.Campaign(ctxT(t, 10*time.Second), "other")
	if err != nil {
		t.Fatalf("Campaign(b, other): %v", err)
	}
	wantLeader(t, c, "other", "b")

	bwon := make(chan result, 1)
	go func() {
		l, err := b.Campaign(ctxT(t, 30*time.Second), "e")
		bwon <- result{l, err}
	}()
	select {
	case r := <-bwon:
		t.Fatalf("b won e while a leads: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := la.Resign(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !closed(la.Done()) {
		t.Fatal("leadership not done after Resign")
	}
	var lb coordinator.Leadership
	select {
	case r := <-bwon:
		if r.err != nil {
			t.Fatalf("Campaign(b): %v", r.err)
		}
		lb = r.l
	case <-time.After(h.Wait):
		t.Fatalf("b did not win e within %v of a's resignation", h.Wait)
	}
	wantLeader(t, c, "e", "b")

	// Leaders follow in campaign order: x before y.
	x := join(t, c, "x", 0)
	y := join(t, c, "y", 0)
	xwon := make(chan result, 1)
	go func() { l, err := x.Campaign(ctxT(t, 30*time.Second), "e"); xwon <- result{l, err} }()
	time.Sleep(100 * time.Millisecond)
	ywon := make(chan result, 1)
	go func() { l, err := y.Campaign(ctxT(t, 30*time.Second), "e"); ywon <- result{l, err} }()
	time.Sleep(100 * time.Millisecond)
	if err := lb.Resign(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var lx coordinator.Leadership
	select {
	case r := <-xwon:
		if r.err != nil {
			t.Fatal(r.err)
		}
		lx = r.l
	case r := <-ywon:
		t.Fatalf("y (second in line) won before x: %v", r.err)
	case <-time.After(h.Wait):
		t.Fatal("x did not win")
	}
	// A member that leaves gives up its leadership.
	if err := x.Leave(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, lx.Done(), h.Wait, "leadership of a member that left")
	select {
	case r := <-ywon:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(h.Wait):
		t.Fatal("y did not win after x left")
	}
	wantLeader(t, c, "e", "y")
	_ = lb2
}

type result struct {
	l   coordinator.Leadership
	err error
}

func wantLeader(t *testing.T, c coordinator.Coordinator, election, id string) {
	t.Helper()
	m, ok, err := c.Leader(ctxT(t, 10*time.Second), election)
	if err != nil || !ok || m.ID != id {
		t.Fatalf("Leader(%s) = %s (ok %v, err %v), want %s", election, m.ID, ok, err, id)
	}
	if m.Addr != "http://"+id+".test:9870" {
		t.Fatalf("Leader(%s)'s address %q", election, m.Addr)
	}
}

func testCancel(t *testing.T, h Harness) {
	c := newC(t, h)
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Join(dead, coordinator.Member{ID: "a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Join with a cancelled context: %v", err)
	}
	if _, err := c.Members(dead, coordinator.All); !errors.Is(err, context.Canceled) {
		t.Fatalf("Members with a cancelled context: %v", err)
	}
	if _, _, err := c.Leader(dead, "e"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Leader with a cancelled context: %v", err)
	}
	if _, err := c.Watch(dead, coordinator.All); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a cancelled context: %v", err)
	}
	// A campaign waiting behind a leader returns when its context ends,
	// and withdraws: the next one in line leads after the leader.
	a := join(t, c, "a", 0)
	b := join(t, c, "b", 0)
	d := join(t, c, "d", 0)
	la, err := a.Campaign(ctxT(t, 10*time.Second), "e")
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(context.Background())
	bwon := make(chan error, 1)
	go func() { _, err := b.Campaign(bctx, "e"); bwon <- err }()
	time.Sleep(100 * time.Millisecond)
	dwon := make(chan result, 1)
	go func() { l, err := d.Campaign(ctxT(t, 30*time.Second), "e"); dwon <- result{l, err} }()
	time.Sleep(100 * time.Millisecond)
	bcancel()
	select {
	case err := <-bwon:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Campaign: %v, want context.Canceled", err)
		}
	case <-time.After(h.Wait):
		t.Fatal("cancelled Campaign did not return")
	}
	if err := la.Resign(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-dwon:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(h.Wait):
		t.Fatal("the candidate after a withdrawn one did not win")
	}
	wantLeader(t, c, "e", "d")
	// b may campaign again.
	bctx2, bcancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer bcancel2()
	if _, err := b.Campaign(bctx2, "e"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign behind d with a deadline: %v, want context.DeadlineExceeded", err)
	}
}

func testClose(t *testing.T, h Harness) {
	c := h.New(t)
	a := join(t, c, "a", 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	next(t, w, h.Wait)
	la, err := a.Campaign(ctxT(t, 10*time.Second), "e")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !closed(a.Lost()) || !errors.Is(a.Err(), coordinator.ErrClosed) || !closed(la.Done()) {
		t.Fatalf("after Close: Lost closed %v, Err %v, leadership done %v", closed(a.Lost()), a.Err(), closed(la.Done()))
	}
	deadline := time.After(h.Wait)
	for {
		select {
		case _, ok := <-w:
			if !ok {
				goto watchClosed
			}
		case <-deadline:
			t.Fatal("watch not closed by Close")
		}
	}
watchClosed:
	if _, err := c.Members(ctxT(t, time.Second), coordinator.All); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Members after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Join(ctxT(t, time.Second), coordinator.Member{ID: "b"}); !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Join after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testRenewal(t *testing.T, h Harness) {
	c := newC(t, h)
	a := join(t, c, "a", 0)
	d0 := a.Deadline()
	h.Elapse(c, 2*h.TTL)
	if a.Err() != nil {
		t.Fatalf("session renewing itself lost after 2 TTLs: %v", a.Err())
	}
	d1 := a.Deadline()
	if !d1.After(d0) || !d1.After(h.Now(c)) {
		t.Fatalf("deadline %v did not move past %v (now %v)", d1, d0, h.Now(c))
	}
	wantMembers(t, c, coordinator.All, "a")
}

func testExpiry(t *testing.T, h Harness) {
	c := newC(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	next(t, w, h.Wait)
	a := join(t, c, "a", 0)
	join(t, c, "b", 0)
	wantEvent(t, next(t, w, h.Wait), coordinator.Joined, "a")
	wantEvent(t, next(t, w, h.Wait), coordinator.Joined, "b")

	h.Cut(t, a)
	cutAt := h.Now(c)
	h.Elapse(c, h.TTL)
	ev := next(t, w, h.Wait)
	// The member learnt that its lease was lost before its peers heard
	// that it left: it had fenced itself.
	lostFirst := closed(a.Lost())
	wantEvent(t, ev, coordinator.Left, "a")
	if !lostFirst {
		t.Fatal("peers were told a member left before its own session was lost")
	}
	if h.Now(c).Sub(cutAt) < h.TTL {
		t.Fatalf("member left %v after its last renewal, before its TTL %v", h.Now(c).Sub(cutAt), h.TTL)
	}
	if !errors.Is(a.Err(), coordinator.ErrSessionLost) || !a.Deadline().IsZero() {
		t.Fatalf("expired session: Err %v, Deadline %v", a.Err(), a.Deadline())
	}
	if _, err := a.Campaign(ctxT(t, time.Second), "e"); !errors.Is(err, coordinator.ErrSessionLost) {
		t.Fatalf("Campaign on a lost session: %v, want ErrSessionLost", err)
	}
	wantMembers(t, c, coordinator.All, "b")
	// The ID is free for the instance's next incarnation.
	join(t, c, "a", 0)
}

// testEvict: Evict removes a member whose lease is being renewed (so it
// would never expire by itself) at once, without any time passing on the
// coordinator's clock: watchers see it leave, its leadership passes on,
// its own session is lost; evicting it again, or an unknown ID, is a no-op.
func testEvict(t *testing.T, h Harness) {
	c := newC(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	next(t, w, h.Wait)
	a := join(t, c, "a", 0)
	b := join(t, c, "b", 1)
	wantEvent(t, next(t, w, h.Wait), coordinator.Joined, "a")
	wantEvent(t, next(t, w, h.Wait), coordinator.Joined, "b")
	la, err := a.Campaign(ctxT(t, 10*time.Second), "e")
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan coordinator.Leadership, 1)
	go func() {
		l, err := b.Campaign(ctx, "e")
		if err == nil {
			elected <- l
		}
	}()
	wantLeader(t, c, "e", "a")

	before := h.Now(c)
	began := time.Now()
	if err := c.Evict(ctxT(t, 10*time.Second), "a"); err != nil {
		t.Fatalf("Evict(a): %v", err)
	}
	wantEvent(t, next(t, w, h.Wait), coordinator.Left, "a")
	t.Logf("evicted member left %v (real time) after Evict was called; its lease TTL is %v", time.Since(began).Round(time.Millisecond), h.TTL)
	if d := h.Now(c).Sub(before); d >= h.TTL {
		t.Fatalf("%v passed on the coordinator's clock: the member may have expired rather than been evicted", d)
	}
	wantMembers(t, c, coordinator.All, "b")
	waitClosed(t, la.Done(), h.Wait, "the evicted member's leadership")
	select {
	case <-elected:
	case <-time.After(h.Wait):
		t.Fatal("the next candidate was not elected after the leader was evicted")
	}
	wantLeader(t, c, "e", "b")
	// The evicted member's own session is lost (etcd: at its next renewal).
	waitClosed(t, a.Lost(), h.TTL+h.Wait, "the evicted member's session")
	if !errors.Is(a.Err(), coordinator.ErrSessionLost) {
		t.Fatalf("evicted session: Err %v, want ErrSessionLost", a.Err())
	}
	if err := c.Evict(ctxT(t, 10*time.Second), "a"); err != nil {
		t.Fatalf("Evict(a) again: %v", err)
	}
	if err := c.Evict(ctxT(t, 10*time.Second), "nobody"); err != nil {
		t.Fatalf("Evict(nobody): %v", err)
	}
	if err := c.Evict(ctxT(t, 10*time.Second), "bad/id"); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("Evict(bad/id): %v, want ErrInvalid", err)
	}
	wantMembers(t, c, coordinator.All, "b")
	if b.Err() != nil {
		t.Fatalf("the other member's session: %v", b.Err())
	}
}

func testLeaderExpiry(t *testing.T, h Harness) {
	c := newC(t, h)
	a := join(t, c, "a", 0)
	b := join(t, c, "b", 0)
	la, err := a.Campaign(ctxT(t, 10*time.Second), "e")
	if err != nil {
		t.Fatal(err)
	}
	bwon := make(chan result, 1)
	go func() { l, err := b.Campaign(ctxT(t, 60*time.Second), "e"); bwon <- result{l, err} }()
	time.Sleep(50 * time.Millisecond)
	h.Cut(t, a)
	h.Elapse(c, h.TTL)
	select {
	case r := <-bwon:
		if r.err != nil {
			t.Fatalf("Campaign(b): %v", r.err)
		}
		if !closed(la.Done()) || !closed(a.Lost()) {
			t.Fatal("b was elected while a's leadership was not yet over in a's own view")
		}
	case <-time.After(h.Wait):
		t.Fatalf("b not elected within %v after a's lease expired", h.Wait)
	}
	wantLeader(t, c, "e", "b")
}

// testOneLeader: members campaign, hold and resign in a loop; no two
// hold at once (an in-process check, and the history of terms).
func testOneLeader(t *testing.T, h Harness) {
	c := newC(t, h)
	const n, rounds = 3, 8
	var (
		holder atomic.Int32
		mu     sync.Mutex
		terms  []Term
		wg     sync.WaitGroup
	)
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		s := join(t, c, fmt.Sprintf("m%d", i), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := s.Campaign(ctx, "one")
				if err != nil {
					cancel()
					errs <- err
					return
				}
				start := h.Now(c)
				if prev := holder.Swap(int32(i)); prev != 0 {
					errs <- fmt.Errorf("m%d elected while m%d holds", i, prev)
				}
				time.Sleep(2 * time.Millisecond)
				holder.Store(0)
				end := h.Now(c)
				err = l.Resign(ctx)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				terms = append(terms, Term{fmt.Sprintf("m%d", i), start, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := CheckTerms(terms); err != nil {
		t.Fatal(err)
	}
	if len(terms) != n*rounds {
		t.Fatalf("%d terms, want %d", len(terms), n*rounds)
	}
}

// Term is one leadership of an election, as its holder saw it: it acted as
// leader from Start (after Campaign returned) to End (before it resigned,
// or its session's last deadline when the session was lost).
type Term struct {
	Holder     string
	Start, End time.Time
}

// CheckTerms reports two terms of different holders that overlap: two
// leaders at once. Times must come from one clock.
func CheckTerms(terms []Term) error {
	ts := append([]Term(nil), terms...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Start.Before(ts[j].Start) })
	for i, a := range ts {
		if a.End.Before(a.Start) {
			return fmt.Errorf("coordtest: term of %s ends (%v) before it starts (%v)", a.Holder, a.End, a.Start)
		}
		for _, b := range ts[i+1:] {
			if !b.Start.Before(a.End) {
				break
			}
			if b.Holder != a.Holder {
				return fmt.Errorf("coordtest: two leaders at once: %s from %v to %v, %s from %v (%v before the first's end)",
					a.Holder, a.Start.Format(time.RFC3339Nano), a.End.Format(time.RFC3339Nano), b.Holder, b.Start.Format(time.RFC3339Nano), a.End.Sub(b.Start))
			}
		}
	}
	return nil
}
