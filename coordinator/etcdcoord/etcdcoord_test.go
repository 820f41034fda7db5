package etcdcoord

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/coordtest"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
)

func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m)) }

var prefixes atomic.Int64

// newTest returns a coordinator on eps under a prefix of its own.
func newTest(t testing.TB, eps []string, ttl time.Duration) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoints = eps
	cfg.Prefix = fmt.Sprintf("/test/%d-%d/", time.Now().UnixNano(), prefixes.Add(1))
	cfg.TTL = ttl
	cfg.Registerer = prometheus.NewRegistry()
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	const ttl = 2 * time.Second
	coordtest.Run(t, coordtest.Harness{
		New:    func(t *testing.T) coordinator.Coordinator { return newTest(t, eps, ttl) },
		Cut:    func(t *testing.T, s coordinator.Session) { s.(*Session).StopRenewal() },
		Elapse: func(_ coordinator.Coordinator, d time.Duration) { time.Sleep(d) },
		Now:    func(coordinator.Coordinator) time.Time { return time.Now() },
		TTL:    ttl,
		// etcd checks for expired leases every 500 ms, then revokes them
		// through a raft round.
		Wait: 3 * time.Second,
	})
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in     string
		eps    string
		prefix string
		bad    bool
	}{
		{in: "etcd://127.0.0.1:2379", eps: "127.0.0.1:2379", prefix: "/nimbus/coordinator/"},
		{in: "etcd://a:1,b:2,c:3", eps: "a:1,b:2,c:3", prefix: "/nimbus/coordinator/"},
		{in: "etcd://a:1/team/x", eps: "a:1", prefix: "/team/x/"},
		{in: "etcd://a:1/", eps: "a:1", prefix: "/nimbus/coordinator/"},
		{in: "etcd://", bad: true},
		{in: "etcd://a", bad: true},
		{in: "etcd://a:x", bad: true},
		{in: "etcd://a:1,", bad: true},
		{in: "http://a:1", bad: true},
	} {
		cfg, err := ParseURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseURL(%q) accepted", tc.in)
			}
			continue
		}
		if err != nil || strings.Join(cfg.Endpoints, ",") != tc.eps || cfg.Prefix != tc.prefix {
			t.Errorf("ParseURL(%q) = %v %q, %v; want %s %q", tc.in, cfg.Endpoints, cfg.Prefix, err, tc.eps, tc.prefix)
		}
	}
}

func TestNewUnreachable(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{"127.0.0.1:1"}
	cfg.DialTimeout = 300 * time.Millisecond
	start := time.Now()
	if _, err := New(context.Background(), cfg); err == nil {
		t.Fatal("New on a closed port succeeded")
	} else if time.Since(start) > 5*time.Second {
		t.Fatalf("New took %v to fail", time.Since(start))
	}
}

// The local deadline is before the server's expiry: the lease's remaining
// TTL at the server, read right after, covers it.
func TestDeadlineConservative(t *testing.T) {
	c := newTest(t, etcdtest.Endpoints(t), 2*time.Second)
	s, err := c.Join(t.Context(), coordinator.Member{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d := s.Deadline()
		ttl, err := c.cli.TimeToLive(t.Context(), s.(*Session).Lease())
		if err != nil {
			t.Fatal(err)
		}
		// The server's remaining TTL is in whole seconds, rounded down.
		if serverLatest := time.Now().Add(time.Duration(ttl.TTL+1) * time.Second); d.After(serverLatest) {
			t.Fatalf("local deadline %v after the server's expiry (at most %v)", d, serverLatest)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// A watch that must resume from a revision etcd has compacted away gets a
// new Snapshot, then the changes after it.
func TestWatchResyncAfterCompaction(t *testing.T) {
	c := newTest(t, etcdtest.Endpoints(t), 2*time.Second)
	ctx := t.Context()
	a, err := c.Join(ctx, coordinator.Member{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	v0, err := c.Members(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, coordinator.Member{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	v1, err := c.Members(ctx, coordinator.All)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Compact(ctx, v1.Rev); err != nil {
		t.Fatal(err)
	}
	out := make(chan coordinator.Event, 8)
	c.track(func() { c.watch(ctx, coordinator.All, v0.Rev, out) }) // as if it had stopped at v0 and now resumed
	next := func() coordinator.Event {
		select {
		case ev := <-out:
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		panic("unreachable")
	}
	ev := next()
	if ev.Kind != coordinator.Snapshot || ev.Rev < v1.Rev || len(ev.Members) != 1 || ev.Members[0].ID != "b" {
		t.Fatalf("after a compaction: %v %v at %d, want a snapshot of b at %d or later", ev.Kind, ev.Members, ev.Rev, v1.Rev)
	}
	if _, err := c.Join(ctx, coordinator.Member{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if ev2 := next(); ev2.Kind != coordinator.Joined || ev2.Member.ID != "c" || ev2.Rev <= ev.Rev {
		t.Fatalf("after the snapshot: %v %s at %d", ev2.Kind, ev2.Member.ID, ev2.Rev)
	}
}
