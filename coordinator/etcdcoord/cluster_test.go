package etcdcoord

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
	"github.com/nimbus-fs/nimbus/coordinator/coordtest"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
)

// TestClusterMemberLoss runs membership, lease and election calls against
// a 3-member etcd cluster while one member (the raft leader, or a
// follower) is killed with SIGKILL. Calls may fail retryably
// (coordinator.ErrUnavailable) or wait, and must resume; the members'
// leases must survive; no two leaders at once (from the history of
// terms); the watch must stay ordered and end equal to the membership.
// The figures it logs (time to the first write after the kill, the
// longest gaps in joins and elections) are in docs/ELASTIC.md.
func TestClusterMemberLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster and runs a load for about 6 s")
	}
	for _, victim := range []string{"leader", "follower"} {
		t.Run(victim, func(t *testing.T) { memberLoss(t, victim) })
	}
}

// history collects what the load saw.
type history struct {
	mu      sync.Mutex
	terms   []coordtest.Term
	joins   []time.Time // successful joins
	errs    map[string]int
	bad     []error // errors that are not retryable
	writes  []time.Time
	started time.Time
}

func (h *history) err(op string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case errors.Is(err, coordinator.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		h.errs[op+": unavailable"]++
	default:
		h.errs[op+": "+err.Error()]++
		h.bad = append(h.bad, fmt.Errorf("%s: %w", op, err))
	}
}

func memberLoss(t *testing.T, victim string) {
	t0 := time.Now()
	cl := etcdtest.NewCluster(t, 3)
	t.Logf("3-member cluster up in %v", time.Since(t0).Round(time.Millisecond))
	const ttl = 5 * time.Second
	c := newTest(t, cl.Endpoints(), ttl)
	c.cfg.OpTimeout = 2 * time.Second
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	h := &history{errs: map[string]int{}, started: time.Now()}

	// Members that stay for the whole test: their leases must survive.
	var stable []coordinator.Session
	for i := range 4 {
		s, err := c.Join(t.Context(), coordinator.Member{ID: fmt.Sprintf("stable-%d", i), Deployment: i % 2, Addr: "http://stable"})
		if err != nil {
			t.Fatal(err)
		}
		stable = append(stable, s)
	}

	// A watcher of every deployment.
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	w, err := c.Watch(wctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	var (
		watchMu  sync.Mutex
		watchRev int64
		watched  = map[string]coordinator.Member{}
		watchErr error
	)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range w {
			watchMu.Lock()
			if ev.Rev <= watchRev && watchErr == nil {
				watchErr = fmt.Errorf("watch event %v %s at rev %d after rev %d", ev.Kind, ev.Member.ID, ev.Rev, watchRev)
			}
			watchRev = ev.Rev
			switch ev.Kind {
			case coordinator.Snapshot:
				watched = map[string]coordinator.Member{}
				for _, m := range ev.Members {
					watched[m.ID] = m
				}
			case coordinator.Joined:
				watched[ev.Member.ID] = ev.Member
			case coordinator.Left:
				delete(watched, ev.Member.ID)
			}
			watchMu.Unlock()
		}
	}()

	var wg sync.WaitGroup
	// Churn: members join, list, and leave.
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				s, err := c.Join(octx, coordinator.Member{ID: fmt.Sprintf("churn-%d-%d", g, i), Deployment: g, Addr: "http://churn"})
				if err != nil {
					cancel()
					if ctx.Err() == nil {
						h.err("join", err)
						time.Sleep(20 * time.Millisecond)
					}
					continue
				}
				h.mu.Lock()
				h.joins = append(h.joins, time.Now())
				h.mu.Unlock()
				if _, err := c.Members(octx, g); err != nil && ctx.Err() == nil {
					h.err("members", err)
				}
				if err := s.Leave(octx); err != nil && ctx.Err() == nil {
					h.err("leave", err)
				}
				cancel()
			}
		}()
	}
	// Elections: three candidates take turns.
	var holder atomic.Int32
	for i := 1; i <= 3; i++ {
		s, err := c.Join(t.Context(), coordinator.Member{ID: fmt.Sprintf("cand-%d", i), Deployment: 0, Addr: "http://cand"})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := s.Campaign(ctx, "duty")
				if err != nil {
					if ctx.Err() == nil {
						h.err("campaign", err)
						time.Sleep(20 * time.Millisecond)
					}
					continue
				}
				start := time.Now()
				if prev := holder.Swap(int32(i)); prev != 0 {
					h.err("campaign", fmt.Errorf("cand-%d elected while cand-%d holds", i, prev))
				}
				// Hold for 20 ms, acting only while the leadership is
				// valid: Done open and before the session's deadline.
				end := start
				for hold := time.Now().Add(20 * time.Millisecond); time.Now().Before(hold); time.Sleep(2 * time.Millisecond) {
					now := time.Now()
					if closed(l.Done()) || !now.Before(s.Deadline()) {
						break
					}
					end = now
				}
				holder.Store(0)
				h.mu.Lock()
				h.terms = append(h.terms, coordtest.Term{Holder: fmt.Sprintf("cand-%d", i), Start: start, End: end})
				h.mu.Unlock()
				for {
					rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := l.Resign(rctx)
					cancel()
					if err == nil || s.Err() != nil {
						break
					}
					h.err("resign", err)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	// A probe of plain etcd writes, for the time writes resume.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			sent := time.Now()
			_, err := c.Client().Put(pctx, c.cfg.Prefix+"probe", sent.String())
			cancel()
			if err == nil {
				h.mu.Lock()
				h.writes = append(h.writes, sent)
				h.mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	// The lowest headroom of the stable members' leases (deadline - now).
	var headroom atomic.Int64
	headroom.Store(int64(time.Hour))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, s := range stable {
				if d := s.Deadline(); !d.IsZero() {
					if left := int64(time.Until(d)); left < headroom.Load() {
						headroom.Store(left)
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	time.Sleep(time.Second)
	lctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	leader := cl.Leader(lctx)
	cancel()
	if leader < 0 {
		t.Fatal("no etcd leader")
	}
	kill := leader
	if victim == "follower" {
		kill = (leader + 1) % 3
	}
	killedAt := time.Now()
	cl.Kill(kill)
	t.Logf("killed etcd member %d (%s; the leader was %d)", kill, victim, leader)
	time.Sleep(3500 * time.Millisecond)
	stopLoad()
	wg.Wait()
	t.Logf("load stopped at %v", time.Since(t0).Round(time.Millisecond))

	// The stable members' leases survived.
	for _, s := range stable {
		if err := s.Err(); err != nil {
			t.Errorf("stable member %s lost its session: %v", s.Member().ID, err)
		} else if !time.Now().Before(s.Deadline()) {
			t.Errorf("stable member %s past its deadline", s.Member().ID)
		}
	}
	v, err := c.Members(t.Context(), coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range v.Members {
		have[m.ID] = true
	}
	for _, s := range stable {
		if !have[s.Member().ID] {
			t.Errorf("stable member %s missing from the membership", s.Member().ID)
		}
	}
	// The watch was ordered, and what it built is the membership. (The
	// revisions cannot be compared: the probe's writes move etcd's revision
	// without a membership event. A churn member whose Leave was cut off
	// by the end of the load leaves when its lease expires: wait for it.)
	if watchErr != nil {
		t.Error(watchErr)
	}
	for deadline := time.Now().Add(ttl + 5*time.Second); ; {
		v, err = c.Members(t.Context(), coordinator.All)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, m := range v.Members {
			want = append(want, m.ID)
		}
		watchMu.Lock()
		var built []string
		for id := range watched {
			built = append(built, id)
		}
		watchMu.Unlock()
		sort.Strings(built)
		sort.Strings(want)
		if reflect.DeepEqual(built, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the watch built %v; the membership is %v", built, want)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopWatch()
	<-watchDone
	t.Logf("checks done at %v", time.Since(t0).Round(time.Millisecond))

	// One leader at a time.
	if err := coordtest.CheckTerms(h.terms); err != nil {
		t.Error(err)
	}
	for _, err := range h.bad {
		t.Errorf("not a retryable error: %v", err)
	}
	// Everything resumed after the kill, and the figures.
	firstAfter := func(ts []time.Time) time.Duration {
		for _, at := range ts {
			if at.After(killedAt) {
				return at.Sub(killedAt)
			}
		}
		return -1
	}
	longestGap := func(ts []time.Time) time.Duration {
		var gap time.Duration
		for i := 1; i < len(ts); i++ {
			if ts[i].After(killedAt.Add(-time.Second)) {
				gap = max(gap, ts[i].Sub(ts[i-1]))
			}
		}
		return gap
	}
	sort.Slice(h.joins, func(i, j int) bool { return h.joins[i].Before(h.joins[j]) })
	sort.Slice(h.writes, func(i, j int) bool { return h.writes[i].Before(h.writes[j]) })
	var starts []time.Time
	for _, tm := range h.terms {
		starts = append(starts, tm.Start)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	if firstAfter(h.joins) < 0 || firstAfter(starts) < 0 || firstAfter(h.writes) < 0 {
		t.Errorf("the load did not resume after the kill: joins %v, terms %v, writes %v",
			firstAfter(h.joins), firstAfter(starts), firstAfter(h.writes))
	}
	t.Logf("victim %s: first write sent after the kill succeeded %v after it; longest gap between joins %v, between leader terms %v; "+
		"lowest lease headroom of a stable member %v (local TTL %v); %d joins, %d terms, %d probe writes; errors %v",
		victim, firstAfter(h.writes).Round(time.Millisecond), longestGap(h.joins).Round(time.Millisecond), longestGap(starts).Round(time.Millisecond),
		time.Duration(headroom.Load()).Round(time.Millisecond), localTTL(ttl, c.cfg.Drift, c.cfg.Margin), len(h.joins), len(h.terms), len(h.writes), h.errs)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
