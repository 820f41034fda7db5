package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/coordinator/etcdcoord"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
)

// `nimbus serve --coordinator etcd://...` registers the server with etcd
// (deployment 0, its address); a clean stop leaves at once; a server
// killed with SIGKILL leaves once its lease expires, and not before its
// TTL; a bad --coordinator exits 2.
func TestServeCoordinatorEtcd(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	url := fmt.Sprintf("etcd://%s/e2e-%d", strings.Join(eps, ","), time.Now().UnixNano())
	cfg, err := etcdcoord.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := etcdcoord.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := obs.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := func() coordinator.Event {
		t.Helper()
		select {
		case ev, ok := <-w:
			if !ok {
				t.Fatal("watch closed")
			}
			return ev
		case <-ctx.Done():
			t.Fatal("no membership event")
		}
		panic("unreachable")
	}
	if snap := next(); len(snap.Members) != 0 {
		t.Fatalf("members before any server: %v", snap.Members)
	}

	a := startServer(t, "", "", "--coordinator", url, "--coordinator-ttl", "2s")
	b := startServer(t, "", "", "--coordinator", url, "--coordinator-ttl", "2s")
	joined := map[string]string{}
	for range 2 {
		ev := next()
		if ev.Kind != coordinator.Joined || ev.Member.Deployment != 0 {
			t.Fatalf("event %v %+v, want a join in deployment 0", ev.Kind, ev.Member)
		}
		joined[ev.Member.Addr] = ev.Member.ID
	}
	if joined[a.url()] == "" || joined[b.url()] == "" {
		t.Fatalf("members %v, want %s and %s", joined, a.url(), b.url())
	}

	a.stop()
	if ev := next(); ev.Kind != coordinator.Left || ev.Member.ID != joined[a.url()] {
		t.Fatalf("after a clean stop: %v %+v", ev.Kind, ev.Member)
	}
	b.kill()
	killed := time.Now()
	ev := next()
	if ev.Kind != coordinator.Left || ev.Member.ID != joined[b.url()] {
		t.Fatalf("after SIGKILL: %v %+v", ev.Kind, ev.Member)
	}
	// The lease was renewed at most a quarter TTL before the kill.
	if gone := time.Since(killed); gone < 2*time.Second*3/4 {
		t.Fatalf("a killed server left the membership %v after the kill, before its lease could expire", gone)
	} else {
		t.Logf("a server killed with SIGKILL left the membership %v after the kill (TTL 2 s)", gone.Round(time.Millisecond))
	}

	bad := run(t, nil, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--coordinator", "zk://127.0.0.1:2181")
	if bad.code != 2 || !strings.Contains(bad.stderr, "bad --coordinator") {
		t.Fatalf("serve --coordinator zk://...: exit %d, stderr %q", bad.code, bad.stderr)
	}
}
