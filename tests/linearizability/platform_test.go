package linearizability

import (
	"bufio"
	"cmp"
	"slices"

	"context"
	"encoding/json"
	"fmt"
	"github.com/anishathalye/porcupine"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/platform"
)

// Linearizability with the platform scaling instances in and out and the
// hybrid RPC losing its connections: the
// local platform's gateway (`nimbus serve --platform local`, process
// hosting, PostgreSQL and etcd, cached instances of two deployments,
// concurrency 1 and a keep-alive of 1 s), hybrid clients whose first
// requests are invocations through the gateway and whose later ones go
// over the instances' TCP connect-backs. During the histories the
// clients' share of invocations starts instances (a second invocation of a
// deployment waits for a new one), idle instances are reclaimed (a
// graceful stop: their connect-backs close under the clients), and an
// instance process is SIGKILLed now and then (its connections break with
// requests in flight, which the clients resubmit, as invocations or over
// another instance's connection, answered once by the request records).

// platformGateway is the gateway process and what the test did to it.
type platformGateway struct {
	t      *testing.T
	proc   *testproc.Server
	mu     sync.Mutex
	seen   map[string]bool // instance ids /status/cluster listed
	killed int
}

// namenodes returns the pids of the gateway's `nimbus namenode` children.
func (g *platformGateway) namenodes() []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", g.proc.Cmd.Process.Pid))
	var pids []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(s)
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if args := strings.Split(string(cl), "\x00"); len(args) > 1 && args[1] == "namenode" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// kill SIGKILLs one instance process, chosen by rng.
func (g *platformGateway) kill(rng *rand.Rand) {
	pids := g.namenodes()
	if len(pids) == 0 {
		return
	}
	if syscall.Kill(pids[rng.IntN(len(pids))], syscall.SIGKILL) == nil {
		g.mu.Lock()
		g.killed++
		g.mu.Unlock()
	}
}

// cluster reads /status/cluster and notes the instance ids it lists.
func (g *platformGateway) cluster() (platform.ClusterStatus, error) {
	var cs platform.ClusterStatus
	resp, err := http.Get(g.proc.URL() + "/status/cluster")
	if err != nil {
		return cs, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil {
		return cs, err
	}
	g.mu.Lock()
	for _, d := range cs.Deployments {
		for _, in := range d.Instances {
			g.seen[in.ID] = true
		}
	}
	g.mu.Unlock()
	return cs, nil
}

// metric reads one unlabelled counter from the gateway's /metrics.
func (g *platformGateway) metric(name string) float64 {
	resp, err := http.Get(g.proc.URL() + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestLinearizableOnPlatform: seeds of six workers on three hybrid clients
// through the local platform's gateway, with instances started by load,
// reclaimed by the keep-alive and SIGKILLed (two per seed). Every history is
// linearizable and no call ends outside the contract; the test fails if no
// instance was started beyond the minimum, none was reclaimed, or no
// connection was dropped.
func TestLinearizableOnPlatform(t *testing.T) {
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/lin-plat-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	g := &platformGateway{t: t, seen: map[string]bool{}, proc: testproc.Start(t, binary, "", "", "--superuser", linmodel.Superuser,
		"--store", db, "--coordinator", coord, "--coordinator-ttl", "2s", "--cache-bytes", "4m",
		"--platform", "local", "--hosting", "process", "--deployments", "2", "--concurrency", "1",
		"--min-instances", "1", "--keep-alive", "1s", "--max-instances", "8", "--max-instances-per-deployment", "4")}
	ctx := context.Background()
	dial := func() *client.Client {
		// HTTPShare 0.3: enough invocations for the platform to see the
		// load and start instances; Resubmits 8: a call may meet more than
		// one dying instance.
		c, err := client.Dial(ctx, g.proc.URL(), client.Options{Hybrid: true, HTTPShare: 0.3, Resubmits: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	clients := []*client.Client{dial(), dial(), dial()}
	fss := make([]meta.FileSystem, len(clients))
	for i, c := range clients {
		fss[i] = c
	}
	ss := seeds(t, 4)
	ops := 0
	start := time.Now()
	for _, seed := range ss {
		base := fmt.Sprintf("/plat%d", seed)
		prepare(t, clients[0], base)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			rng := rand.New(rand.NewPCG(seed, 0x9a))
			poll := time.NewTicker(100 * time.Millisecond)
			defer poll.Stop()
			// Two kills per seed, the first early (a history may be short):
			// a member that dies holds its peers' writes until its lease
			// expires (--coordinator-ttl 2s), so kills every few hundred
			// milliseconds would stall the histories rather than test them.
			kills := []time.Time{time.Now().Add(300 * time.Millisecond), time.Now().Add(1800 * time.Millisecond)}
			for {
				select {
				case <-stop:
					return
				case <-poll.C:
				}
				_, _ = g.cluster()
				if len(kills) > 0 && time.Now().After(kills[0]) {
					g.kill(rng)
					kills = kills[1:]
				}
			}
		}()
		t0 := time.Now()
		h := recordPrepared(fss, base, seed, mix{clients: 6, ops: 40})
		close(stop)
		<-done
		t.Logf("seed %d: %d operations in %s; slowest: %s", seed, len(h), time.Since(t0).Round(time.Millisecond), slowest(h, 3))
		check(t, "platform", seed, h, linmodel.Initial())
		ops += len(h)
		// Idle long enough for the keep-alive to reclaim what the burst
		// started: the next seed's clients find their connections gone.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if cs, err := g.cluster(); err == nil && cs.Totals.Instances <= 2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cs, err := g.cluster()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, d := range cs.Deployments {
		for _, in := range d.Instances {
			live[in.ID] = true
		}
	}
	coldStarts, crashes := g.metric("nimbus_platform_cold_starts_total"), g.metric("nimbus_platform_crashes_total")
	g.mu.Lock()
	gone := 0
	for id := range g.seen {
		if !live[id] {
			gone++
		}
	}
	killed := g.killed
	reclaimed := gone - max(int(crashes), killed) // a kill may land on an instance being stopped
	g.mu.Unlock()
	var hs client.HybridStats
	for _, c := range clients {
		s := c.HybridStats()
		hs.TCP += s.TCP
		hs.HTTP += s.HTTP
		hs.Resubmissions += s.Resubmissions
		hs.HTTPRetries += s.HTTPRetries
		hs.DirectFallbacks += s.DirectFallbacks
		hs.Callbacks = s.Callbacks // the process's endpoint, shared
	}
	t.Logf("%d operations over %d seeds in %s; instances: %d cold starts (%d seen), %d reclaimed by the keep-alive, %d SIGKILLed (%d crashes seen by the platform), %d live at the end; clients: %d requests over TCP, %d over HTTP, %d connect-backs, %d resubmissions, %d HTTP retries, %d direct fallbacks",
		ops, len(ss), time.Since(start).Round(time.Millisecond), int(coldStarts), len(g.seen), reclaimed, killed, int(crashes), len(live),
		hs.TCP, hs.HTTP, hs.Callbacks, hs.Resubmissions, hs.HTTPRetries, hs.DirectFallbacks)
	if int(coldStarts) <= 2+killed {
		t.Errorf("no instance started by load: %d cold starts, %d of them the minimum and %d replacing killed ones", int(coldStarts), 2, killed)
	}
	if reclaimed <= 0 {
		t.Errorf("no instance reclaimed by the keep-alive (%d gone, %d crashed)", gone, int(crashes))
	}
	if killed == 0 || hs.TCP == 0 {
		t.Errorf("no connection dropped (%d instances killed) or none used (%d requests over TCP)", killed, hs.TCP)
	}
}

// slowest describes the n longest operations of h.
func slowest(h []porcupine.Operation, n int) string {
	h = slices.Clone(h)
	slices.SortFunc(h, func(a, b porcupine.Operation) int { return cmp.Compare(b.Return-b.Call, a.Return-a.Call) })
	var parts []string
	for _, op := range h[:min(n, len(h))] {
		parts = append(parts, fmt.Sprintf("%s -> %v (%s)", op.Input, op.Output, time.Duration(op.Return-op.Call).Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}
