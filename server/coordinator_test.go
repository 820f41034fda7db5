package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/etcdcoord"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
)

func TestMain(m *testing.M) {
	code := etcdtest.Main(m)
	pgtest.Stop()
	os.Exit(code)
}

func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	return cfg
}

func TestCoordinatorConfig(t *testing.T) {
	for _, tc := range []struct {
		coord string
		ttl   time.Duration
		ok    bool
	}{
		{"", 0, true}, {"inprocess", 0, true}, {"etcd://127.0.0.1:2379", 0, true},
		{"etcd://a:1,b:2/x", 3 * time.Second, true},
		{"etcd://a:1", 1500 * time.Millisecond, false}, {"etcd://", 0, false}, {"zk://a:1", 0, false}, {"memory", 0, false},
	} {
		cfg := testConfig(t)
		cfg.Coordinator, cfg.CoordinatorTTL = tc.coord, tc.ttl
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate with coordinator %q, TTL %v: %v, want ok %v", tc.coord, tc.ttl, err, tc.ok)
		}
	}
}

// By default the server registers with the in-process coordinator: a
// member of deployment 0 under its engine's instance id, at its address,
// shown on the status page and in the metrics; Stop ends the session.
func TestCoordinatorInProcess(t *testing.T) {
	s, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	sess := s.Member()
	m := sess.Member()
	if want := fmt.Sprintf("%016x", s.Engine().Instance()); m.ID != want || m.Deployment != 0 || m.Addr != s.Addr() {
		t.Fatalf("member %+v, want ID %s, deployment 0, address %s", m, want, s.Addr())
	}
	_, page := testproc.Get(t, s.Addr()+"/")
	if want := "Coordinator: inprocess; this server is member " + m.ID + " of deployment 0 (1 members in all)"; !strings.Contains(page, want) {
		t.Errorf("status page lacks %q:\n%s", want, page)
	}
	_, metrics := testproc.Get(t, s.Addr()+"/metrics")
	if !strings.Contains(metrics, `nimbus_coordinator_sessions{backend="inprocess"} 1`) {
		t.Errorf("metrics lack the coordinator's session gauge")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(sess.Err(), coordinator.ErrClosed) {
		t.Fatalf("session after Stop: %v", sess.Err())
	}
}

// Two servers on one etcd are both members; one that stops leaves; one
// whose session is lost (renewals stopped, as if cut off from etcd) joins
// again as a new incarnation.
func TestCoordinatorEtcd(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	url := fmt.Sprintf("etcd://%s/test-server-%d", strings.Join(eps, ","), time.Now().UnixNano())
	start := func() *Server {
		cfg := testConfig(t)
		cfg.Coordinator, cfg.CoordinatorTTL = url, 2*time.Second
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
	a, b := start(), start()
	ec, err := etcdcoord.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := etcdcoord.New(t.Context(), ec)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := obs.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap := <-w
	addrs := map[string]string{}
	for _, m := range snap.Members {
		addrs[m.ID] = m.Addr
	}
	for _, s := range []*Server{a, b} {
		if id := s.Member().Member().ID; addrs[id] != s.Addr() {
			t.Fatalf("etcd's members %v lack %s at %s", addrs, id, s.Addr())
		}
	}

	aID := a.Member().Member().ID
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Kind != coordinator.Left || ev.Member.ID != aID {
		t.Fatalf("after a stopped: %v %s, want a left", ev.Kind, ev.Member.ID)
	}

	old := b.Member()
	old.(*etcdcoord.Session).StopRenewal()
	for _, want := range []struct {
		kind coordinator.EventKind
		id   string
	}{{coordinator.Left, old.Member().ID}, {coordinator.Joined, old.Member().ID + ".2"}} {
		select {
		case ev := <-w:
			if ev.Kind != want.kind || ev.Member.ID != want.id {
				t.Fatalf("after b's session was cut: %v %s, want %v %s", ev.Kind, ev.Member.ID, want.kind, want.id)
			}
		case <-ctx.Done():
			t.Fatalf("no %v %s", want.kind, want.id)
		}
	}
	// The watch may see the join before Join has returned to b.
	for b.Member() == old && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.Member(); got.Err() != nil || got.Member().Addr != b.Addr() {
		t.Fatalf("b's new session: %v at %s", got.Err(), got.Member().Addr)
	}
}
