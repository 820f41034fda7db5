package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// Short liveness settings, the same for the DataNodes and the test's
// reader: a DataNode killed goes stale and dead within seconds.
var dnLiveness = []string{"--heartbeat", "100ms", "--stale-after", "1s", "--dead-after", "3s"}

// dnReady is the line `nimbus datanode` prints once it serves; its group
// is the HTTP address it got (it binds port 0).
var dnReady = regexp.MustCompile(`nimbus datanode ready .* http=(\S+)`)

// startDatanode starts `nimbus datanode` on dir and db, reads its HTTP
// address from its output and waits until its /healthz answers 200.
func startDatanode(t *testing.T, dir, db string, env []string, args ...string) *testproc.Server {
	t.Helper()
	p := spawnDatanode(t, dir, db, env, args...)
	deadline := time.Now().Add(30 * time.Second)
	for p.Addr == "" {
		if m := dnReady.FindStringSubmatch(p.Log.String()); m != nil {
			p.Addr = m[1]
			break
		}
		if p.Cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("nimbus datanode printed no ready line:\n%s", p.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		resp, err := http.Get(p.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if p.Cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("nimbus datanode did not become healthy: %v\n%s", err, p.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func spawnDatanode(t *testing.T, dir, db string, env []string, args ...string) *testproc.Server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"datanode", "--data", dir, "--store", db, "--addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0"}, append(dnLiveness, args...)...)...)
	cmd.Env = append(os.Environ(), env...)
	return testproc.Launch(t, cmd, dir, "")
}

// TestDatanodesPublishThemselves runs two DataNodes in two zones on one
// PostgreSQL database and watches them through the registry as a NameNode
// would: both live; one killed with SIGKILL goes stale, then dead, while
// the other stays live; restarted on its directory it is the same
// DataNode (UUID and id) and live again; a directory of another cluster is
// refused.
func TestDatanodesPublishThemselves(t *testing.T) {
	db := pgtest.DB(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, db, pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := registry.DefaultConfig()
	cfg.Heartbeat, cfg.StaleAfter, cfg.DeadAfter = 100*time.Millisecond, time.Second, 3*time.Second
	reg, err := registry.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	byZone := func() map[string]registry.Info {
		nodes, err := reg.DataNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]registry.Info{}
		for _, n := range nodes {
			m[n.Zone] = n
		}
		return m
	}
	waitFor := func(what string, cond func(map[string]registry.Info) bool) map[string]registry.Info {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			m := byZone()
			if cond(m) {
				return m
			}
			if time.Now().After(deadline) {
				var s []string
				for z, n := range m {
					s = append(s, fmt.Sprintf("%s: id %d %v beat %d silent %v", z, n.ID, n.Liveness, n.Beat, n.Silent))
				}
				t.Fatalf("waiting for %s: %v", what, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	dir1, dir2 := t.TempDir(), t.TempDir()
	dn1 := startDatanode(t, dir1, db, nil, "--zone", "z1")
	dn2 := startDatanode(t, dir2, db, []string{"NIMBUS_ZONE=z2"}) // the zone from the environment
	m := waitFor("both live", func(m map[string]registry.Info) bool {
		return len(m) == 2 && m["z1"].Liveness == registry.Live && m["z2"].Liveness == registry.Live
	})
	first := m["z1"]
	if first.ID == m["z2"].ID || first.UUID == m["z2"].UUID || !strings.HasPrefix(first.DataAddr, "127.0.0.1:") ||
		first.HTTPAddr != dn1.Addr || first.Capacity <= 0 || first.Version == "" {
		t.Fatalf("rows: %+v and %+v", first.DataNode, m["z2"].DataNode)
	}
	if code, body := testproc.Get(t, dn1.URL()+"/metrics"); code != 200 || !strings.Contains(body, "nimbus_datanode_heartbeats_total") ||
		!strings.Contains(body, "nimbus_blocks_bytes_written_total") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	if v, err := os.ReadFile(dir1 + "/current/VERSION"); err != nil || !strings.Contains(string(v), "datanodeUuid="+first.UUID) {
		t.Fatalf("%s/current/VERSION: %v\n%s", dir1, err, v)
	}

	dn1.Kill()
	waitFor("z1 stale, z2 live", func(m map[string]registry.Info) bool {
		return m["z1"].Liveness == registry.Stale && m["z2"].Liveness == registry.Live
	})
	waitFor("z1 dead, z2 live", func(m map[string]registry.Info) bool {
		return m["z1"].Liveness == registry.Dead && m["z2"].Liveness == registry.Live
	})
	c, err := reg.Counts(ctx)
	if err != nil || c.Live != 1 || c.Dead != 1 {
		t.Fatalf("counts %+v, %v", c, err)
	}

	dn1 = startDatanode(t, dir1, db, nil, "--zone", "z1")
	m = waitFor("z1 live again", func(m map[string]registry.Info) bool { return m["z1"].Liveness == registry.Live })
	if m["z1"].ID != first.ID || m["z1"].UUID != first.UUID || len(m) != 2 {
		t.Fatalf("restarted as id %d uuid %s; was id %d uuid %s (%d rows)", m["z1"].ID, m["z1"].UUID, first.ID, first.UUID, len(m))
	}
	// A clean stop exits 0.
	if err := dn2.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, dn2.Log.String())
	}

	// A directory made by another cluster's DataNode.
	other := t.TempDir()
	dn3 := startDatanode(t, other, pgtest.DB(t), nil, "--zone", "z3")
	if err := dn3.Stop(); err != nil {
		t.Fatal(err)
	}
	p := spawnDatanode(t, other, db, nil, "--zone", "z3")
	err = p.Cmd.Wait()
	if err == nil || !strings.Contains(p.Log.String(), "belongs to cluster") {
		t.Fatalf("a directory of another cluster: exit %v\n%s", err, p.Log.String())
	}
	if _, ok := byZone()["z3"]; ok {
		t.Fatal("the refused DataNode registered")
	}
}

func TestDatanodeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"datanode", "--data", "/tmp/x"}, "--store postgres://... is required"},
		{[]string{"datanode", "--data", "/tmp/x", "--store", "pebble"}, "embedded (pebble) store"},
		{[]string{"datanode", "--store", "postgres://u@127.0.0.1:1/db"}, "--data DIR is required"},
		{[]string{"datanode", "--data", "/tmp/x", "--store", "postgres://u@127.0.0.1:1/db", "--heartbeat", "20s"}, "StaleAfter"},
	} {
		out, err := exec.Command(binary, tc.args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("nimbus %v: %v\n%s\nwant exit 2 and %q", tc.args, err, out, tc.want)
		}
	}
}
