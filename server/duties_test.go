package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/memcoord"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// metric reads s's unlabelled gauge or counter name.
func metric(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func monitorLeader(t *testing.T, s *Server) float64 {
	return metric(t, s, "nimbus_namespace_lease_monitor_leader")
}

// waitMonitor waits until exactly the servers in want run the lease monitor
// among all (hang guard only: the test's own deadline).
func waitMonitor(t *testing.T, want *Server, all ...*Server) {
	t.Helper()
	for {
		ok := true
		for _, s := range all {
			if (monitorLeader(t, s) == 1) != (s == want) {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeaseMonitorElected: two servers on one PostgreSQL database and one
// etcd: exactly one runs the lease monitor (the first to start); a writer
// renewing through the other keeps its file for three hard limits, and
// once it stops renewing the monitor recovers it; when the monitor's
// server stops, the other takes the duty over and recovers the file of a
// writer gone silent. The embedded server alone runs its monitor through the
// in-process coordinator.
func TestLeaseMonitorElected(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	db := pgtest.DB(t)
	url := fmt.Sprintf("etcd://%s/test-duties-%d", strings.Join(eps, ","), time.Now().UnixNano())
	start := func() *Server {
		cfg := testConfig(t)
		cfg.StoreURL = db
		cfg.Coordinator, cfg.CoordinatorTTL = url, 2*time.Second
		cfg.Namespace.Superuser = "root"
		cfg.Namespace.LeaseSoftLimit = 300 * time.Millisecond
		cfg.Namespace.LeaseHardLimit = time.Second
		cfg.Namespace.LeaseCheckInterval = 50 * time.Millisecond
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Stop(context.Background()) })
		return s
	}
	a := start()
	waitMonitor(t, a, a)
	b := start()
	waitMonitor(t, a, a, b)

	ctx := context.Background()
	root := meta.User{Name: "root"}
	fs := b.Engine()
	if err := fs.Mkdirs(ctx, root, "/w", 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/w/live", "/w/silent"} {
		if _, err := fs.Create(ctx, root, p, meta.CreateOptions{Client: p}); err != nil {
			t.Fatal(err)
		}
		if err := fs.Write(ctx, root, p, p, 0, []byte("bytes")); err != nil {
			t.Fatal(err)
		}
	}
	// /w/live's writer renews through b for three hard limits while a
	// monitors, and until a has recovered /w/silent, whose writer never
	// renews; after each renewal /w/live is still open.
	until := time.Now().Add(3 * time.Second)
	for {
		if err := fs.RenewLease(ctx, root, "/w/live"); err != nil {
			t.Fatal(err)
		}
		if st, err := fs.Stat(ctx, root, "/w/live"); err != nil || !st.UnderConstruction {
			t.Fatalf("/w/live, renewed through b, was recovered by a's monitor: %+v %v", st, err)
		}
		st, err := fs.Stat(ctx, root, "/w/silent")
		if err != nil {
			t.Fatal(err)
		}
		if !st.UnderConstruction && time.Now().After(until) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// /w/live's writer stops renewing: a, the monitor, recovers it past
	// the hard limit; b, which saw every renewal, recovers nothing.
	waitClosed := func(p string) {
		t.Helper()
		for {
			st, err := fs.Stat(ctx, root, p)
			if err != nil {
				t.Fatal(err)
			}
			if !st.UnderConstruction {
				if st.Length != 5 {
					t.Fatalf("%s recovered at %d bytes, want 5", p, st.Length)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitClosed("/w/live")
	if got := metric(t, a, "nimbus_namespace_lease_recoveries_total"); got != 2 {
		t.Fatalf("a, the monitor, recovered %v files, want 2", got)
	}
	if got := metric(t, b, "nimbus_namespace_lease_recoveries_total"); got != 0 {
		t.Fatalf("b, which does not lead, recovered %v files", got)
	}

	// a stops: b takes the monitor over and recovers a file whose writer
	// fell silent.
	if _, err := fs.Create(ctx, root, "/w/late", meta.CreateOptions{Client: "late"}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Write(ctx, root, "/w/late", "late", 0, []byte("bytes")); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitMonitor(t, b, b)
	waitClosed("/w/late")

	// The embedded server runs the monitor alone.
	c, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	waitMonitor(t, c, c)
	if _, page := testproc.Get(t, c.Addr()+"/"); !strings.Contains(page, "lease monitor: this server") {
		t.Errorf("the status page does not say this server runs the lease monitor:\n%s", page)
	}
	if _, page := testproc.Get(t, b.Addr()+"/"); !strings.Contains(page, "lease monitor: this server") {
		t.Errorf("b's status page does not say it runs the lease monitor:\n%s", page)
	}
}

// TestMemberLiveness: an engine is a member under its instance id, or
// under an incarnation of it after a lost session; no other is.
func TestMemberLiveness(t *testing.T) {
	c, err := memcoord.New(memcoord.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, id := range []string{"00000000000000ab", "00000000000000cd.2", "00000000000000e0f"} {
		if _, err := c.Join(ctx, coordinator.Member{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	l := memberLiveness{c}
	for _, tc := range []struct {
		id   uint64
		want bool
	}{{0xab, true}, {0xcd, true}, {0xe0, false}, {0xe0f, false}, {0xac, false}} {
		if got, err := l.Alive(ctx, tc.id); err != nil || got != tc.want {
			t.Errorf("Alive(%016x) = %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
}
