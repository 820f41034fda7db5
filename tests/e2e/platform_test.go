package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The local platform end to end: `nimbus serve --platform local --hosting
// process` over PostgreSQL and etcd, its instances `nimbus namenode`
// children, driven through the gateway's POST /rpc/call with the
// Nimbus-Deployment header, WebHDFS and `nimbus status`. (client.Dial and
// `nimbus fs` reach it as hybrid clients: platform_hybrid_test.go.)

// gatewayCall sends req to the gateway for deployment dep and returns the
// response and the instance that answered (Nimbus-Instance).
func gatewayCall(ctx context.Context, base string, dep int, req *api.Request) (*api.Response, string, error) {
	rt := &headerRT{dep: dep}
	resp, err := rpc.CallHTTP(ctx, &http.Client{Transport: rt}, base, req, 0)
	return resp, rt.instance, err
}

// headerRT adds Nimbus-Deployment and keeps the answer's Nimbus-Instance.
type headerRT struct {
	dep      int
	instance string
}

func (h *headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Header.Set(platform.HeaderDeployment, strconv.Itoa(h.dep))
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		h.instance = resp.Header.Get(platform.HeaderInstance)
	}
	return resp, err
}

var reqID atomic.Uint64

func rootReq(req *api.Request) *api.Request {
	req.User = "root"
	req.RequestId = reqID.Add(1)
	return req
}

func mustCall(t *testing.T, base string, dep int, req *api.Request) (*api.Response, string) {
	t.Helper()
	resp, inst, err := gatewayCall(context.Background(), base, dep, rootReq(req))
	if err != nil {
		t.Fatalf("deployment %d: %v", dep, err)
	}
	if resp.GetError() != nil {
		t.Fatalf("deployment %d: %v", dep, rpc.ErrorFromProto(resp.GetError()))
	}
	return resp, inst
}

func clusterStatus(t *testing.T, base string) platform.ClusterStatus {
	t.Helper()
	code, body := testproc.Get(t, base+"/status/cluster")
	if code != http.StatusOK {
		t.Fatalf("/status/cluster: %d %s", code, body)
	}
	var cs platform.ClusterStatus
	if err := json.Unmarshal([]byte(body), &cs); err != nil {
		t.Fatalf("/status/cluster: %v\n%s", err, body)
	}
	return cs
}

func serving(cs platform.ClusterStatus, dep int) []platform.ClusterInstance {
	var out []platform.ClusterInstance
	for _, in := range cs.Deployments[dep].Instances {
		if in.State == platform.StateServing {
			out = append(out, in)
		}
	}
	return out
}

// namenodeChildren returns the pids of the gateway's `nimbus namenode`
// children of deployment dep.
func namenodeChildren(t *testing.T, gatewayPid, dep int) []int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", gatewayPid))
	var pids []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(s)
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			args := strings.Split(string(cl), "\x00")
			if i := slices.Index(args, "--deployment"); len(args) > 1 && args[1] == "namenode" && i > 0 && i+1 < len(args) && args[i+1] == strconv.Itoa(dep) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func platformArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/e2e-plat-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	return append([]string{"--superuser", "root", "--store", db, "--coordinator", coord, "--coordinator-ttl", "2s", "--cache-bytes", "4m"}, extra...)
}

// TestLocalPlatformProcesses: files created and listed through the
// gateway on both deployments; a burst scales deployment 0 past one
// instance and the keep-alive takes it back to one; a SIGKILLed instance
// is replaced and operations go on; `nimbus status --json` lists the
// deployments and instances.
func TestLocalPlatformProcesses(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process", "--deployments", "2",
		"--concurrency", "2", "--max-instances", "6", "--max-instances-per-deployment", "3", "--min-instances", "1", "--keep-alive", "2s")...)
	base := gw.URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Creates and listings, on both deployments.
	mustCall(t, base, 0, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/p/d", Perm: 0o755}}})
	for i := range 6 {
		_, inst := mustCall(t, base, i%2, &api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
			Path: fmt.Sprintf("/p/d/f%d", i), Client: "e2e", Perm: 0o644, Data: []byte("hello"), Complete: true}}})
		if inst == "" {
			t.Fatal("no Nimbus-Instance header on the answer")
		}
	}
	for dep := range 2 {
		resp, inst := mustCall(t, base, dep, &api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: "/p/d"}}})
		if n := len(resp.GetListing().GetEntries()); n != 6 {
			t.Fatalf("deployment %d (instance %s) lists %d entries, want 6", dep, inst, n)
		}
		t.Logf("deployment %d answered by instance %s", dep, inst)
	}
	// WebHDFS through the gateway.
	code, body := testproc.Get(t, base+"/webhdfs/v1/p/d?op=LISTSTATUS&user.name=root")
	if code != http.StatusOK || strings.Count(body, `"pathSuffix"`) != 6 {
		t.Fatalf("WebHDFS LISTSTATUS through the gateway: %d %s", code, body)
	}
	// A bad deployment is refused.
	if _, _, err := gatewayCall(ctx, base, 7, rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}})); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("deployment 7 of 2: %v, want 400", err)
	}

	// A burst on deployment 0: 32 callers at concurrency 2 queue, and the
	// policy starts instances for them.
	maxSeen := 0
	var wg sync.WaitGroup
	var errs atomic.Int64
	burstEnd := time.Now().Add(3 * time.Second)
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(burstEnd); i++ {
				_, _, err := gatewayCall(ctx, base, 0, rootReq(&api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: fmt.Sprintf("/p/d/f%d", (c+i)%6)}}}))
				if err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	for time.Now().Before(burstEnd) {
		maxSeen = max(maxSeen, len(serving(clusterStatus(t, base), 0)))
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if maxSeen < 2 {
		t.Fatalf("the burst kept deployment 0 at %d instance(s)", maxSeen)
	}
	t.Logf("burst: deployment 0 reached %d serving instances; %d calls failed", maxSeen, errs.Load())
	if errs.Load() > 0 {
		t.Errorf("%d calls failed during the burst", errs.Load())
	}
	waitFor(ctx, t, "the keep-alive to take deployment 0 back to one instance", func() bool {
		cs := clusterStatus(t, base)
		return len(cs.Deployments[0].Instances) == 1 && len(serving(cs, 0)) == 1
	})

	// SIGKILL deployment 0's instance: it is replaced, operations go on.
	before := serving(clusterStatus(t, base), 0)[0]
	pids := namenodeChildren(t, gw.Cmd.Process.Pid, 0)
	if len(pids) != 1 {
		t.Fatalf("deployment 0's namenode children: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after string
	failures := 0
	waitFor(ctx, t, "an operation on deployment 0 after the kill", func() bool {
		resp, inst, err := gatewayCall(ctx, base, 0, rootReq(&api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: "/p/d"}}}))
		if err != nil || resp.GetError() != nil {
			failures++
			t.Logf("after the kill: %v %v", err, resp.GetError())
			return false
		}
		after = inst
		return len(resp.GetListing().GetEntries()) == 6
	})
	if strings.HasPrefix(after, before.ID+" ") {
		t.Fatalf("answered by the killed instance %s", after)
	}
	t.Logf("instance %s killed; deployment 0 answered by %s after %d failed calls", before.ID, after, failures)
	mustCall(t, base, 0, &api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
		Path: "/p/d/after-kill", Client: "e2e", Perm: 0o644, Data: []byte("x"), Complete: true}}})

	// nimbus status --json on the gateway.
	cmd := exec.Command(binary, "status", "--json")
	cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+base)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nimbus status --json: %v\n%s", err, out)
	}
	var doc struct {
		Deployments []platform.DeploymentStatus `json:"deployments"`
		Totals      platform.ClusterTotals      `json:"totals"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("nimbus status --json: %v\n%s", err, out)
	}
	if len(doc.Deployments) != 2 || doc.Totals.ColdStarts < 4 || doc.Totals.Invocations == 0 {
		t.Fatalf("nimbus status --json: %s", out)
	}
	for _, d := range doc.Deployments {
		if len(d.Instances) == 0 {
			t.Fatalf("deployment %s has no instance: %s", d.Name, out)
		}
		for _, in := range d.Instances {
			if in.ID == "" || in.State == "" || (in.State == platform.StateServing && (in.Address == "" || in.ColdStartMS == nil)) {
				t.Fatalf("instance without id, address, state or cold start: %+v", in)
			}
		}
	}
	cmd = exec.Command(binary, "status")
	cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+base)
	out, _ = cmd.CombinedOutput()
	t.Logf("nimbus status:\n%s", out)
	if !bytes.Contains(out, []byte("d1")) {
		t.Fatalf("nimbus status does not list deployment d1:\n%s", out)
	}

	// The gateway stops every instance on SIGTERM.
	if err := gw.Stop(); err != nil {
		t.Fatalf("gateway exit: %v\n%s", err, gw.Log.String())
	}
	if left := append(namenodeChildren(t, gw.Cmd.Process.Pid, 0), namenodeChildren(t, gw.Cmd.Process.Pid, 1)...); len(left) != 0 {
		t.Fatalf("namenodes left after the gateway stopped: %v", left)
	}
}

// TestLocalPlatformInProcess: the same gateway with its instances as
// servers in its own process: creates and listings on both deployments,
// each deployment answered by an instance of its own.
func TestLocalPlatformInProcess(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "inprocess", "--deployments", "2",
		"--concurrency", "4", "--min-instances", "1")...)
	base := gw.URL()
	mustCall(t, base, 1, &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/q", Perm: 0o755}}})
	for i := range 4 {
		mustCall(t, base, i%2, &api.Request{Body: &api.Request_Create{Create: &api.CreateRequest{
			Path: fmt.Sprintf("/q/f%d", i), Client: "e2e", Perm: 0o644, Data: []byte("hi"), Complete: true}}})
	}
	seen := map[string]bool{}
	for dep := range 2 {
		resp, inst := mustCall(t, base, dep, &api.Request{Body: &api.Request_List{List: &api.ListRequest{Path: "/q"}}})
		if n := len(resp.GetListing().GetEntries()); n != 4 {
			t.Fatalf("deployment %d lists %d entries, want 4", dep, n)
		}
		seen[inst] = true
	}
	if len(seen) != 2 {
		t.Fatalf("both deployments answered by %v, want an instance each", seen)
	}
	cs := clusterStatus(t, base)
	for d := range 2 {
		if len(serving(cs, d)) != 1 {
			t.Fatalf("deployment %d: %+v", d, cs.Deployments[d])
		}
	}
	if err := gw.Stop(); err != nil {
		t.Fatalf("gateway exit: %v\n%s", err, gw.Log.String())
	}
}

// TestNamenodeExitsWithItsParent: `nimbus namenode` prints its ready line
// (with its member ID) and serves; when its standard input (a pipe from its parent) reaches
// EOF, as when the parent dies, it stops and exits 0.
func TestNamenodeExitsWithItsParent(t *testing.T) {
	cmd := exec.Command(binary, "namenode", "--data", t.TempDir(), "--superuser", "root")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &testproc.Log{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make([]byte, 256)
	n, err := stdout.Read(line)
	if err != nil {
		t.Fatalf("reading the ready line: %v\n%s", err, log.String())
	}
	u, member, ok := platform.ParseReady(string(line[:n]))
	if !ok || member == "" {
		t.Fatalf("first line %q, want %qURL member=ID", line[:n], platform.ReadyPrefix)
	}
	if code, _ := testproc.Get(t, strings.TrimSpace(u)+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz of %s: %d", u, code)
	}
	stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("namenode exit after its stdin closed: %v\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("namenode still running 20 s after its stdin closed\n%s", log.String())
	}
}

// TestLocalPlatformChildrenDieWithGateway: a SIGKILLed gateway leaves no
// `nimbus namenode` running (Pdeathsig, and their stdin pipe's EOF).
func TestLocalPlatformChildrenDieWithGateway(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--deployments", "2", "--min-instances", "1")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pids []int
	waitFor(ctx, t, "an instance of each deployment", func() bool {
		pids = append(namenodeChildren(t, gw.Cmd.Process.Pid, 0), namenodeChildren(t, gw.Cmd.Process.Pid, 1)...)
		return len(pids) == 2
	})
	gw.Kill()
	waitFor(ctx, t, "the namenodes to exit", func() bool {
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue // gone
			}
			// pid (comm) state ...: a zombie nobody reaps is gone too.
			if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
				continue
			}
			return false
		}
		return true
	})
}
