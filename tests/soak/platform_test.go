package soak

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The soak of the local platform: `nimbus serve --platform local --hosting
// process` over PostgreSQL and etcd, two deployments of one `nimbus
// namenode` instance each (a fixed set: no scaling, so that an instance
// that dies under the load shows as a new one). Well-behaved clients reach
// it through the gateway only; hostile ones at the gateway and straight at
// an instance, whose address the gateway's /status/cluster publishes.

// The hostile share past the caps, each part on when its constant is true
// (off, it stays within the limit it would pass):
//
//   - floodPastCaps: connection floods past the gateway's
//     --max-connections and direct callers past an instance's. A
//     connection over a cap is answered 503 once its request's head was
//     read (server.LimitListener; Go's http.Transport takes an answer
//     that comes before its request as a broken connection and fails the
//     request), and the gateway reaches an instance whose client slots
//     are all held through the slots the instance reserves for it.
//   - fillBodyBudget: slow /rpc/call bodies that fill the gateway's body
//     budget, so that it answers well-behaved calls 503 before reading
//     their bodies (and net/http may still be writing a body after Do
//     returned: rpc.Invoke's request frame is its own, not pooled).
const (
	floodPastCaps  = true
	fillBodyBudget = true
)

// The hostile share's sizes that the constants above choose.
var (
	// gatewayFloods waves of floodConns idle connections at the gateway:
	// 600, past its cap, or 48, which with the rest of the hostile share
	// and the well-behaved clients (about 80 connections) stay within it.
	gatewayFloods, gatewayFlood = choose(floodPastCaps, 3, 1), choose(floodPastCaps, floodConns, 48)
	// directConns clients calling one instance straight: twice its cap, or
	// half of it.
	directConns = choose(floodPastCaps, 2*instanceMaxConns, instanceMaxConns/2)
	// slowInLimit slow bodies within the frame limit (inLimitBody each):
	// 96 MiB, past the gateway's budget, or 32 MiB.
	slowInLimit = choose(fillBodyBudget, 24, 8)
)

func choose(b bool, yes, no int) int {
	if b {
		return yes
	}
	return no
}

// The platform's limits, set on its command line, and the bounds they give.
const (
	platformDeployments = 2
	platformConcurrency = 4
	// gatewayMaxConns is the gateway's --max-connections.
	gatewayMaxConns = 128
	// instanceMaxConns is each instance's --instance-max-connections.
	instanceMaxConns = 48
	// bodyBudgetMB is --rpc-server-max-mb: the bytes of /rpc/call bodies
	// the gateway holds at once, and each instance's RPC bytes in flight.
	bodyBudgetMB         = 64
	platformFrameTimeout = 2 * time.Second
	platformUploadIdle   = 3 * time.Second

	// gatewayFDBound: each client connection the gateway holds
	// (gatewayMaxConns) may hold one to an instance; up to 64 connections
	// over the cap are read and answered 503 at once (the listener's
	// maxScreening, and one accepted waiting for them); 64 for the rest (listener, epoll, the etcd client,
	// three pipes per instance, the runtime).
	gatewayFDBound = 2*gatewayMaxConns + 64 + 64
	// instanceFDBound: its client connections (instanceMaxConns), 64
	// over the cap being read and answered 503, 64 reserved for the
	// gateway (server.DefaultGatewayConnections), 64 connect-back dials in progress to the
	// one host every endpoint here is on (the connect-back table's bound
	// per host), its PostgreSQL pool (16: serve's 32 over two instances),
	// 64 for the rest (etcd, connect-backs established, the runtime).
	instanceFDBound = instanceMaxConns + 64 + 64 + 64 + 16 + 64
	// The RSS bounds: gateway and instances run with a soft memory limit
	// of platformMemMB, which their collectors work to (idle or not, their
	// RSS settles below it), so a process stays under it plus 64 MiB of
	// slack unless what it holds live passes the limit. The gateway holds
	// at most bodyBudgetMB of /rpc/call bodies; the slow large bodies,
	// were they all held, are 272 MiB or more (slowOversize of
	// oversizeBody, slowInLimit of inLimitBody). An instance holds at most
	// bodyBudgetMB of RPC bytes, its 4 MiB metadata cache and a bounded
	// connect-back table.
	platformMemMB    = 256
	gatewayRSSBound  = (platformMemMB + 64) << 20
	instanceRSSBound = (platformMemMB + 64) << 20

	// Slow large /rpc/call bodies: slowOversize clients send oversizeBody
	// bytes, over the frame limit, at 5 MiB/s; slowInLimit send
	// inLimitBody, within it, at 1 MiB/s, taking twice the frame timeout.
	slowOversize = 6
	oversizeBody = 40 << 20
	inLimitBody  = 4 << 20

	// Well-behaved workers: over hybrid clients (TCP connect-backs, a
	// share over /rpc/call), over /rpc/call only, over WebHDFS.
	goodHybrid   = 2
	goodCallOnly = 2
	goodPlatHTTP = 2
)

// TestSoakPlatform: with connection floods, stalled and slow bodies,
// garbage frames and refused connect-back endpoints at the gateway, and a
// flood of direct calls and garbage at one instance, the well-behaved
// clients through the gateway see no error; the gateway's and every
// instance's RSS and descriptors stay under their bounds at every sample;
// no instance dies; the gateway cuts stalled bodies; no failed upload
// leaves a file, and fsck is clean, through the gateway and on the store.
func TestSoakPlatform(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: a minute of load; run without -short")
	}
	baseDur, hostileDur := phases()
	db := pgtest.DB(t)
	coord := fmt.Sprintf("etcd://%s/soak-plat-%d", strings.Join(etcdtest.Endpoints(t), ","), time.Now().UnixNano())
	p := testproc.Start(t, binary, "", "", "--superuser", "root", "--store", db, "--coordinator", coord, "--cache-bytes", "4m",
		"--platform", "local", "--hosting", "process", "--deployments", strconv.Itoa(platformDeployments),
		"--concurrency", strconv.Itoa(platformConcurrency), "--max-queue", "64",
		"--max-instances", strconv.Itoa(platformDeployments), "--max-instances-per-deployment", "1", "--min-instances", "1",
		"--instance-procs", "1", "--instance-max-connections", strconv.Itoa(instanceMaxConns),
		"--max-connections", strconv.Itoa(gatewayMaxConns), "--rpc-server-max-mb", strconv.Itoa(bodyBudgetMB),
		"--rpc-frame-timeout", platformFrameTimeout.String(), "--upload-idle-timeout", platformUploadIdle.String(),
		"--http-header-timeout", "3s", "--memory-limit-mb", strconv.Itoa(platformMemMB), "--log-level", "warn")
	s := &server{t: t, data: p.Data, addr: p.Addr, cmd: p.Cmd, log: p.Log, proc: p}
	gw := s.url()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Every deployment's instance serving, and its address.
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	var insts []string
	for {
		cs, err := clusterStatus(wctx, gw)
		if err != nil {
			t.Fatal(err)
		}
		insts = insts[:0]
		for _, d := range cs.Deployments {
			for _, in := range d.Instances {
				if in.State == platform.StateServing {
					insts = append(insts, strings.TrimPrefix(in.Address, "http://"))
				}
			}
		}
		if len(insts) == platformDeployments {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("instances serving after a minute: %v, want %d", insts, platformDeployments)
		}
		time.Sleep(100 * time.Millisecond)
	}
	target := insts[0] // the instance the direct flood is at

	root := meta.User{Name: "root"}
	goodOpts := client.Options{HTTPRetryDeadline: opTimeout}
	hyb, err := client.Dial(ctx, gw, goodOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer hyb.Close()
	if !hyb.HybridStats().Gateway {
		t.Fatalf("client.Dial did not find the gateway: %+v", hyb.HybridStats())
	}
	callOpts := goodOpts
	// Every request an invocation through /rpc/call: HTTPShare 1, and no
	// anti-thrashing, which would prefer the instances' connect-backs when
	// invocations are slow.
	callOpts.Hybrid, callOpts.HTTPShare, callOpts.ThrashFactor = true, 1, -1
	calls, err := client.Dial(ctx, gw, callOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	for _, d := range []string{"/good", "/hostile"} {
		if err := hyb.Mkdirs(ctx, root, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}

	// Samples of the gateway and of every `nimbus namenode` child.
	type peak struct{ rss, fds int64 }
	var mu sync.Mutex
	peaks := map[int]*peak{} // by pid; the gateway's is s.cmd.Process.Pid
	sample := func(pid int) {
		rss, err1 := procRSS(pid)
		fds, err2 := procFDs(pid)
		if err1 != nil || err2 != nil {
			return // it exited between the listing and the read
		}
		mu.Lock()
		pk := peaks[pid]
		if pk == nil {
			pk = &peak{}
			peaks[pid] = pk
		}
		pk.rss, pk.fds = max(pk.rss, rss), max(pk.fds, int64(fds))
		mu.Unlock()
	}
	gwPid := s.cmd.Process.Pid
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			sample(gwPid)
			for _, pid := range namenodeChildren(gwPid) {
				sample(pid)
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				return
			}
		}
	}()

	var goodErrs, busyRetries atomic.Int64
	var errKinds struct {
		sync.Mutex
		m map[string]int // by message with its numbers replaced by N
	}
	errKinds.m = map[string]int{}
	digits := regexp.MustCompile(`[0-9]+`)
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if goodErrs.Add(1) <= 10 {
			t.Errorf("well-behaved client: %s", msg)
		}
		errKinds.Lock()
		errKinds.m[digits.ReplaceAllString(msg, "N")]++
		errKinds.Unlock()
	}
	runGood := func(phase string, d time.Duration, lat *latencies) {
		end := time.Now().Add(d)
		var wg sync.WaitGroup
		for i := range goodHybrid {
			wg.Go(func() { goodRPCWorker(end, hyb, fmt.Sprintf("/good/%s-hyb%d", phase, i), lat, fail) })
		}
		for i := range goodCallOnly {
			wg.Go(func() { goodRPCWorker(end, calls, fmt.Sprintf("/good/%s-call%d", phase, i), lat, fail) })
		}
		for i := range goodPlatHTTP {
			wg.Go(func() { goodHTTPWorker(end, gw, fmt.Sprintf("/good/%s-http%d", phase, i), lat, fail, &busyRetries) })
		}
		wg.Wait()
	}

	var base latencies
	runGood("alone", baseDur, &base)
	baseP99, baseN := base.p99()

	hctx, hcancel := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	var st struct {
		floodWaves, cut, garbage, directGarbage, callbacks           atomic.Int64
		stallCallCut, stallCallHeld, stallCreateCut, stallCreateHeld atomic.Int64
		directServed, directRefused, directFailed                    atomic.Int64
		slowMu                                                       sync.Mutex
		slow                                                         map[string]int
	}
	st.slow = map[string]int{}
	hostileLoop := func(every time.Duration, f func(ctx context.Context, i int)) {
		hwg.Go(func() {
			for i := 0; hctx.Err() == nil; i++ {
				f(hctx, i)
				select {
				case <-hctx.Done():
				case <-time.After(every):
				}
			}
		})
	}
	// At the gateway.
	for range gatewayFloods {
		hostileLoop(time.Second, func(ctx context.Context, i int) {
			floodWave(ctx, s.addr, gatewayFlood)
			st.floodWaves.Add(1)
		})
	}
	const stallers = 2
	for i := range stallers {
		hostileLoop(100*time.Millisecond, func(ctx context.Context, j int) {
			if stalledBody(ctx, s.addr, callHeader(0, 64<<10), 1<<10) {
				st.stallCallCut.Add(1)
			} else {
				st.stallCallHeld.Add(1)
			}
		})
		hostileLoop(100*time.Millisecond, func(ctx context.Context, j int) {
			if stalledUpload(ctx, s.addr, fmt.Sprintf("/hostile/stall-%d-%d", i, j)) {
				st.stallCreateCut.Add(1)
			} else {
				st.stallCreateHeld.Add(1)
			}
		})
	}
	hostileLoop(100*time.Millisecond, func(ctx context.Context, i int) {
		cutUpload(s.addr, fmt.Sprintf("/hostile/cut-%d", i))
		st.cut.Add(1)
	})
	slowOutcome := func(kind, outcome string) {
		st.slowMu.Lock()
		st.slow[kind+" "+outcome]++
		st.slowMu.Unlock()
	}
	for range slowOversize {
		hostileLoop(100*time.Millisecond, func(ctx context.Context, i int) {
			slowOutcome("oversize", slowBody(ctx, s.addr, i%platformDeployments, oversizeBody, 1<<20, 200*time.Millisecond))
		})
	}
	for range slowInLimit {
		hostileLoop(100*time.Millisecond, func(ctx context.Context, i int) {
			slowOutcome("in-limit", slowBody(ctx, s.addr, i%platformDeployments, inLimitBody, 256<<10, 250*time.Millisecond))
		})
	}
	hostileLoop(50*time.Millisecond, func(ctx context.Context, i int) {
		garbageCall(s.addr, i)
		st.garbage.Add(1)
	})
	ports := closedPorts(t, 64)
	for range 2 {
		hostileLoop(10*time.Millisecond, func(ctx context.Context, i int) {
			refusedCallback(ctx, gw, i%platformDeployments, ports[i%len(ports)])
			st.callbacks.Add(1)
		})
	}
	// Straight at one instance.
	for range directConns {
		hwg.Go(func() { directCaller(hctx, target, &st.directServed, &st.directRefused, &st.directFailed) })
	}
	hostileLoop(50*time.Millisecond, func(ctx context.Context, i int) {
		garbageAfterUpgrade(target, i)
		st.directGarbage.Add(1)
	})

	time.Sleep(500 * time.Millisecond) // let the hostile share set in
	var withHostile latencies
	runGood("hostile", hostileDur, &withHostile)
	// A hybrid client that arrives now, with a callback endpoint of its
	// own and no direct fallback (it waits for connect-backs alone), is
	// connected back to while the refused endpoints keep coming: the
	// instances' connect-back tables still take new endpoints.
	var late client.HybridStats
	lateOpts := goodOpts
	lateOpts.CallbackAddr, lateOpts.CallbackWait = testproc.FreeAddr(t), -1
	if lc, err := client.Dial(ctx, gw, lateOpts); err != nil {
		t.Errorf("a late hybrid client: %v", err)
	} else {
		lctx, lcancel := context.WithTimeout(ctx, opTimeout)
		for lctx.Err() == nil {
			if _, err := lc.Stat(lctx, root, "/good"); err != nil {
				t.Errorf("a late hybrid client: %v", err)
				break
			}
			if late = lc.HybridStats(); late.Callbacks > 0 && late.TCP > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		lcancel()
		lc.Close()
	}
	hcancel()
	hwg.Wait()
	close(stopSampling)
	<-sampled
	hostP99, hostN := withHostile.p99()

	mu.Lock()
	gwPeak := *peaks[gwPid]
	var instPids []int
	for pid := range peaks {
		if pid != gwPid {
			instPids = append(instPids, pid)
		}
	}
	slices.Sort(instPids)
	var instReport []string
	var instPeak peak
	for _, pid := range instPids {
		pk := peaks[pid]
		instReport = append(instReport, fmt.Sprintf("pid %d: RSS %d MiB, %d fds", pid, pk.rss>>20, pk.fds))
		instPeak.rss, instPeak.fds = max(instPeak.rss, pk.rss), max(instPeak.fds, pk.fds)
	}
	mu.Unlock()
	st.slowMu.Lock()
	slowKinds := make([]string, 0, len(st.slow))
	for k, n := range st.slow {
		slowKinds = append(slowKinds, fmt.Sprintf("%s: %d", k, n))
	}
	st.slowMu.Unlock()
	slices.Sort(slowKinds)
	hs, cs := hyb.HybridStats(), calls.HybridStats()
	t.Logf("p99 alone %v (%d ops), with the hostile share %v (%d ops), slowest %v; WebHDFS busy retries %d; hybrid client %+v; call-only client %+v",
		baseP99, baseN, hostP99, hostN, withHostile.max(), busyRetries.Load(), hs, cs)
	t.Logf("a hybrid client arriving at the end of the hostile phase: %+v", late)
	t.Logf("gateway peak: RSS %d MiB (bound %d), %d fds (bound %d); instances (bound RSS %d MiB, %d fds): %s",
		gwPeak.rss>>20, gatewayRSSBound>>20, gwPeak.fds, gatewayFDBound, instanceRSSBound>>20, instanceFDBound, strings.Join(instReport, "; "))
	t.Logf("hostile: %d flood waves of %d, stalled calls %d cut / %d held to the end, stalled creates %d cut / %d held, %d cut-off uploads, "+
		"%d garbage calls, %d refused-callback calls, direct calls at %s %d served / %d refused 503 / %d failed, %d garbage connections there; slow bodies: %s",
		st.floodWaves.Load(), gatewayFlood, st.stallCallCut.Load(), st.stallCallHeld.Load(), st.stallCreateCut.Load(), st.stallCreateHeld.Load(),
		st.cut.Load(), st.garbage.Load(), st.callbacks.Load(), target, st.directServed.Load(), st.directRefused.Load(), st.directFailed.Load(),
		st.directGarbage.Load(), strings.Join(slowKinds, ", "))

	if n := goodErrs.Load(); n > 0 {
		errKinds.Lock()
		var kinds []string
		for k, n := range errKinds.m {
			kinds = append(kinds, fmt.Sprintf("%d× %s", n, k))
		}
		errKinds.Unlock()
		slices.Sort(kinds)
		t.Errorf("%d errors seen by well-behaved clients:\n%s", n, strings.Join(kinds, "\n"))
	}
	if baseN == 0 || hostN == 0 {
		t.Fatalf("no operations measured (%d alone, %d with the hostile share)", baseN, hostN)
	}
	if hs.TCP == 0 || cs.TCP != 0 || cs.HTTP == 0 {
		t.Errorf("the hybrid client sent %d requests over connect-backs, the call-only client %d (and %d over /rpc/call): the clients did not take the paths they are for",
			hs.TCP, cs.TCP, cs.HTTP)
	}
	if late.Callbacks == 0 || late.TCP == 0 {
		t.Errorf("a hybrid client arriving beside the refused connect-back endpoints was not connected back to within %v: %+v", opTimeout, late)
	}
	if gwPeak.rss > gatewayRSSBound {
		t.Errorf("gateway RSS reached %d MiB, bound %d MiB", gwPeak.rss>>20, gatewayRSSBound>>20)
	}
	if gwPeak.fds > gatewayFDBound {
		t.Errorf("gateway held %d descriptors, bound %d", gwPeak.fds, gatewayFDBound)
	}
	if instPeak.rss > instanceRSSBound {
		t.Errorf("an instance's RSS reached %d MiB, bound %d MiB", instPeak.rss>>20, instanceRSSBound>>20)
	}
	if instPeak.fds > instanceFDBound {
		t.Errorf("an instance held %d descriptors, bound %d", instPeak.fds, instanceFDBound)
	}
	if len(instPids) != platformDeployments {
		t.Errorf("%d instance processes ran (pids %v), want the %d started first: one died under the load and was replaced",
			len(instPids), instPids, platformDeployments)
	}
	// The hostile phase is many times the timeouts: every stalled body but
	// the one each staller holds at its end was cut by the gateway.
	if st.stallCallCut.Load() == 0 || st.stallCallHeld.Load() > stallers {
		t.Errorf("stalled /rpc/call bodies: %d cut, %d held until the phase ended: the gateway does not cut a body that stalls (frame timeout %v)",
			st.stallCallCut.Load(), st.stallCallHeld.Load(), platformFrameTimeout)
	}
	if st.stallCreateCut.Load() == 0 || st.stallCreateHeld.Load() > stallers {
		t.Errorf("stalled WebHDFS CREATE bodies: %d cut, %d held until the phase ended: a body that stalls is not cut (upload idle timeout %v)",
			st.stallCreateCut.Load(), st.stallCreateHeld.Load(), platformUploadIdle)
	}
	if st.directServed.Load() == 0 {
		t.Errorf("no direct call at %s was served: the flood was refused whole, or never reached it", target)
	}

	// Nothing a failed upload sent is published.
	var leftovers []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := hyb.List(ctx, root, "/hostile", "", 1000)
		if err != nil {
			t.Fatalf("listing /hostile: %v", err)
		}
		leftovers = leftovers[:0]
		for _, e := range l.Entries {
			leftovers = append(leftovers, fmt.Sprintf("%s (%d bytes, under construction %v)", e.Name(), e.Length, e.UnderConstruction))
		}
		if len(leftovers) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(leftovers) > 0 {
		t.Errorf("failed uploads left %d files in /hostile, e.g. %q", len(leftovers), leftovers[:min(5, len(leftovers))])
	}

	if out, err := s.nimbus("fsck"); err != nil || !strings.Contains(out, "HEALTHY") {
		t.Errorf("fsck through the gateway: %v\n%s", err, out)
	}
	hyb.Close()
	calls.Close()
	s.stop()
	if out, err := s.nimbus("fsck", "--store", db); err != nil || !strings.Contains(out, "HEALTHY") {
		t.Errorf("fsck of the store: %v\n%s", err, out)
	}
	if log := s.log.String(); strings.Contains(strings.ToLower(log), "too many open files") || strings.Contains(log, "panic:") {
		t.Errorf("platform log:\n%s", log)
	}
}

// clusterStatus reads the gateway's /status/cluster.
func clusterStatus(ctx context.Context, base string) (platform.ClusterStatus, error) {
	var cs platform.ClusterStatus
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status/cluster", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return cs, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return cs, fmt.Errorf("/status/cluster: %s", resp.Status)
	}
	return cs, json.NewDecoder(resp.Body).Decode(&cs)
}

// namenodeChildren returns the pids of the gateway's `nimbus namenode`
// children.
func namenodeChildren(gatewayPid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", gatewayPid))
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

// callHeader is the head of a POST /rpc/call for deployment dep with a
// body of length bytes, and extra header lines (each ending in CRLF).
func callHeader(dep, length int, extra ...string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n%s: %d\r\nContent-Length: %d\r\n%s\r\n",
		rpc.CallPath, rpc.ContentType, platform.HeaderDeployment, dep, length, strings.Join(extra, ""))
}

// statFrame is a request frame that stats the root.
func statFrame() []byte {
	f, _ := rpc.AppendFrame(nil, &api.Request{RequestId: 1, User: "root", Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}}, 0)
	return f
}

// slowBody sends a /rpc/call body of size bytes, chunk bytes every
// interval, and returns how it ended: the answer's status, or how the
// sending or the reading failed.
func slowBody(ctx context.Context, addr string, dep, size, chunk int, every time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "dial failed"
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	br := bufio.NewReader(c)
	answered := make(chan string, 1)
	go func() { // the server may answer before the body's end
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			answered <- "no answer"
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.Status
	}()
	c.SetWriteDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(c, callHeader(dep, size)); err != nil {
		return "refused"
	}
	buf := make([]byte, chunk)
	for sent := 0; sent < size; sent += chunk {
		select {
		case a := <-answered:
			return a + " before the body's end"
		case <-time.After(every):
		}
		if _, err := c.Write(buf[:min(chunk, size-sent)]); err != nil {
			if ctx.Err() != nil {
				return "phase ended"
			}
			select {
			case a := <-answered:
				return a + " before the body's end"
			case <-time.After(5 * time.Second):
				return "cut without an answer"
			}
		}
	}
	select {
	case a := <-answered:
		return a
	case <-ctx.Done():
		return "phase ended"
	}
}

// garbageCall posts a body that is not one request frame to /rpc/call:
// random bytes, a length with too little body, text, or a frame
// announcing a gigabyte.
func garbageCall(addr string, i int) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	var junk []byte
	switch i % 4 {
	case 0:
		junk = make([]byte, 64)
		rand.Read(junk)
	case 1:
		junk = []byte{0xe8, 0x07, 1, 2, 3} // 1000 bytes announced, 3 sent
	case 2:
		junk = []byte("GET / HTTP/1.1\r\n")
	case 3:
		junk = []byte{0x80, 0x80, 0x80, 0x80, 0x04, 1} // 1 GiB announced
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, callHeader(i%platformDeployments, len(junk), "Connection: close\r\n"))
	c.Write(junk)
	io.Copy(io.Discard, c) // the answer, an error
}

// closedPorts returns n loopback ports nobody listened on a moment ago.
func closedPorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	return ports
}

// refusedCallback invokes a stat through the gateway naming a callback
// endpoint at port, where nobody listens, with a fresh token: the
// instance that serves it dials a port that refuses.
func refusedCallback(ctx context.Context, base string, dep, port int) {
	var tok [8]byte
	rand.Read(tok[:])
	hdr := http.Header{}
	hdr.Set(rpc.HeaderDeployment, strconv.Itoa(dep))
	hdr.Set(rpc.HeaderCallback, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	hdr.Set(rpc.HeaderCallbackToken, hex.EncodeToString(tok[:]))
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, _, _ = rpc.Invoke(cctx, hostileClient, base, &api.Request{RequestId: 1, User: "root",
		Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}}, 0, hdr)
}

// hostileClient is the HTTP client of the hostile invocations.
var hostileClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}

// directCaller calls an instance straight (POST /rpc/call, a stat of the
// root) four times a second on a kept-alive connection until ctx ends; a
// connection refused with 503 is closed and dialled again after a pause.
func directCaller(ctx context.Context, addr string, served, refused, failed *atomic.Int64) {
	frame := statFrame()
	req := callHeader(0, len(frame)) + string(frame)
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
			return true
		}
	}
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			failed.Add(1)
			if !pause() {
				return
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		br := bufio.NewReader(c)
		for {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			var status int
			_, err := io.WriteString(c, req)
			if err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(br, nil); err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
			}
			switch {
			case ctx.Err() != nil:
			case err != nil:
				failed.Add(1)
			case status == http.StatusOK:
				served.Add(1)
			case status == http.StatusServiceUnavailable:
				refused.Add(1)
				err = io.EOF
			default:
				failed.Add(1)
			}
			if err != nil || !pause() {
				break
			}
		}
		stop()
		c.Close()
		if !pause() {
			return
		}
	}
}
