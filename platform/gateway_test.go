package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// httpHost starts instances as httptest servers whose /rpc/call echoes
// the body and the Nimbus-Callback header, and hangs up on a body
// "die" (an instance failing mid-call); "hold" waits until released.
type httpHost struct {
	mu      sync.Mutex
	servers []*httptest.Server
	release chan struct{}
	// scrapes counts GET /metrics; each answers cache counters that grew
	// by 3 hits and 1 miss since the last.
	scrapes atomic.Int64
}

type httpInstance struct {
	s    *httptest.Server
	once sync.Once
	done chan struct{}
}

func (h *httpHost) Start(ctx context.Context, spec Spec) (Instance, error) {
	in := &httpInstance{done: make(chan struct{})}
	in.s = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status/instance" {
			fmt.Fprint(w, `{"usage":{"active_s":1.5,"invocations":10,"uptime_s":100}}`)
			return
		}
		if r.URL.Path == "/metrics" {
			n := h.scrapes.Add(1)
			fmt.Fprintf(w, "nimbus_cache_hits_total{kind=\"entry\"} %d\nnimbus_cache_misses_total{kind=\"entry\"} %d\n", 3*n, n)
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch string(body) {
		case "die":
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		case "hold":
			<-h.release
		}
		w.Header().Set("Nimbus-Callback", r.Header.Get("Nimbus-Callback"))
		w.Header().Set("X-Path", r.URL.Path)
		w.Header().Set("X-Credential", r.Header.Get(HeaderGatewayCredential))
		_, _ = w.Write(body)
	}))
	h.mu.Lock()
	h.servers = append(h.servers, in.s)
	h.mu.Unlock()
	return in, nil
}

func (i *httpInstance) Addr() string { return i.s.URL }
func (i *httpInstance) Stop(context.Context) error {
	i.once.Do(func() { i.s.Close(); close(i.done) })
	return nil
}
func (i *httpInstance) Kill() error           { return i.Stop(context.Background()) }
func (i *httpInstance) Done() <-chan struct{} { return i.done }

func post(t *testing.T, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestGateway: headers through and back, the deployment header's
// default and refusals, busy, an instance failing mid-call, WebHDFS.
func TestGateway(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	cfg := Config{Deployments: 2, Concurrency: 1, MaxInstances: 2, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 1}
	l, reg := newTestLocal(t, cfg, h)
	g, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	defer gw.Close()
	defer func() {
		for _, s := range h.servers {
			s.Close()
		}
	}()

	// The callback endpoint arrives on the host the client connected from
	// (callback_addr.go).
	resp, body := post(t, gw.URL+"/rpc/call", "frame", map[string]string{"Nimbus-Callback": "1.2.3.4:5", HeaderDeployment: "1"})
	if resp.StatusCode != 200 || body != "frame" || resp.Header.Get("Nimbus-Callback") != "127.0.0.1:5" {
		t.Fatalf("call: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	inst := resp.Header.Get(HeaderInstance)
	resp, _ = post(t, gw.URL+"/rpc/call", "x", nil) // no header: deployment 0
	if inst0 := resp.Header.Get(HeaderInstance); inst0 == "" || inst0 == inst {
		t.Fatalf("deployments 0 and 1 answered by %q and %q", inst0, inst)
	}
	for _, bad := range []string{"2", "-1", "x"} {
		if resp, _ := post(t, gw.URL+"/rpc/call", "x", map[string]string{HeaderDeployment: bad}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("deployment %q: %d, want 400", bad, resp.StatusCode)
		}
	}
	if resp, _ := post(t, gw.URL+"/rpc/conn", "", nil); resp.StatusCode != http.StatusNotImplemented {
		t.Fatalf("/rpc/conn: %d", resp.StatusCode)
	}

	// Busy: one slot held, one queued, the third refused with Retry-After.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); post(t, gw.URL+"/rpc/call", "hold", nil) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		q := l.mu.p.Queued(0)
		l.mu.Unlock()
		if q == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	resp, body = post(t, gw.URL+"/rpc/call", "x", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("queue full: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	close(h.release)
	wg.Wait()

	// An instance that hangs up mid-call: 502, outcome unknown.
	resp, body = post(t, gw.URL+"/rpc/call", "die", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "outcome is unknown") || resp.Header.Get(HeaderInstance) == "" {
		t.Fatalf("instance failing mid-call: %d %q", resp.StatusCode, body)
	}

	// WebHDFS goes through, path and query intact.
	r, err := http.Get(gw.URL + "/webhdfs/v1/a/b?op=GETFILESTATUS")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 || r.Header.Get("X-Path") != "/webhdfs/v1/a/b" || r.Header.Get(HeaderInstance) == "" {
		t.Fatalf("webhdfs: %d %v", r.StatusCode, r.Header)
	}
	// An instance that died before the platform saw it: the request it
	// refused (never sent) goes to its replacement.
	for _, st := range l.Instances() {
		if st.Deployment == 1 {
			l.mu.Lock()
			in := l.mu.insts[st.ID].inst
			l.mu.Unlock()
			hs := in.(*httpInstance).s
			_ = hs.Listener.Close() // refuses from now on; Done still open
			hs.CloseClientConnections()
			go func() { time.Sleep(100 * time.Millisecond); _ = in.Kill() }()
		}
	}
	time.Sleep(30 * time.Millisecond) // the gateway's client sees its pooled connection closed
	resp, body = post(t, gw.URL+"/rpc/call", "again", map[string]string{HeaderDeployment: "1"})
	if resp.StatusCode != 200 || body != "again" || resp.Header.Get(HeaderInstance) == inst {
		t.Fatalf("after the instance died: %d %q from %q (the dead one was %q)", resp.StatusCode, body, resp.Header.Get(HeaderInstance), inst)
	}

	for outcome, want := range map[string]float64{outcomeBusy: 1, outcomeFailed: 1, outcomeRefused: 3} {
		if got := testutil.ToFloat64(g.met.requests.WithLabelValues("call", outcome)); got != want {
			t.Errorf("requests_total{kind=call,outcome=%s} = %v, want %v", outcome, got, want)
		}
	}
	if d := WebHDFSDeployment("/webhdfs/v1/a/b", 2); d != WebHDFSDeployment("/webhdfs/v1/a/c", 2) {
		t.Fatal("two files of one directory go to different deployments")
	}
}

// TestGatewayStatusPage: the gateway's status page and its series: the
// instances of each deployment, requests per kind and deployment from the
// gateway's histogram, and the cache hit ratio summed over the instances'
// counters (3 hits and 1 miss between two scrapes: 0.75).
func TestGatewayStatusPage(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	cfg := Config{Deployments: 2, Concurrency: 4, MaxInstances: 2, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 8}
	l, reg := newTestLocal(t, cfg, h)
	g, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second, Registerer: reg, Version: "test-version"})
	if err != nil {
		t.Fatal(err)
	}
	g.opts.Gatherer = reg // sampled by hand below, not by the ticker
	gw := httptest.NewServer(g)
	defer gw.Close()
	defer func() {
		for _, s := range h.servers {
			s.Close()
		}
	}()
	for range 2 { // both deployments serving
		post(t, gw.URL+"/rpc/call", "x", map[string]string{HeaderDeployment: "1"})
		post(t, gw.URL+"/rpc/call", "x", nil)
	}
	t0 := time.Now()
	g.sample(t0)
	for range 3 {
		post(t, gw.URL+"/rpc/call", "x", nil)
	}
	g.sample(t0.Add(time.Second))

	resp, err := http.Get(gw.URL + "/status/series?minutes=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Rate          map[string][]*float64 `json:"rate"`
		Instances     map[string][]*float64 `json:"instances"`
		CacheHitRatio []*float64            `json:"cache_hit_ratio"`
		Cluster       struct {
			Source      string `json:"source"`
			Deployments []struct {
				Instances []struct {
					State         string   `json:"state"`
					CacheHitRatio *float64 `json:"cache_hit_ratio"`
				} `json:"instances"`
			} `json:"deployments"`
		} `json:"cluster"`
		ClusterURL string `json:"cluster_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if r := got.Rate["call d0"]; len(r) != 1 || r[0] == nil || *r[0] != 3 {
		t.Errorf("rate of call d0: %v, want [3]", r)
	}
	if i := got.Instances; len(i) != 2 || *i["0"][0] != 1 || *i["1"][0] != 1 {
		t.Errorf("instances: %v", i)
	}
	if c := got.CacheHitRatio; len(c) != 1 || c[0] == nil || *c[0] != 0.75 {
		t.Errorf("cache hit ratio: %v, want [0.75]", c)
	}
	if got.Cluster.Source != "platform" || len(got.Cluster.Deployments) != 2 || len(got.Cluster.Deployments[1].Instances) != 1 ||
		got.Cluster.Deployments[1].Instances[0].CacheHitRatio == nil || got.ClusterURL != "/status/cluster" {
		t.Errorf("cluster: %+v, cluster_url %q", got.Cluster, got.ClusterURL)
	}
	code, page := get(t, gw.URL+"/")
	for _, want := range []string{"test-version", "the gateway of a local platform", "This platform", "2 deployments", "/status/page.js", "<td>1</td>"} {
		if code != 200 || !strings.Contains(page, want) {
			t.Errorf("status page (%d) lacks %q", code, want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPlatformUsage: the gateway's GET /status/instance sums the usage of
// the instances serving and of those reclaimed (read before their stop),
// and prices it; the most instances at once are reported.
func TestPlatformUsage(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	cfg := Config{Deployments: 1, Concurrency: 1, MaxInstances: 3, MaxPerDeployment: 3, MinInstances: 1, KeepAlive: 100 * time.Millisecond, MaxQueue: 8}
	l, reg := newTestLocal(t, cfg, h)
	g, err := NewGateway(l, GatewayOptions{InvokeTimeout: 5 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	defer gw.Close()
	defer func() {
		for _, s := range h.servers {
			s.Close()
		}
	}()
	// Three held calls need three instances; released, two are reclaimed.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); post(t, gw.URL+"/rpc/call", "hold", nil) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(l.Instances()) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(h.release)
	wg.Wait()
	for time.Now().Before(deadline) {
		l.mu.Lock()
		retired := l.mu.retired.Invocations
		l.mu.Unlock()
		if retired == 20 && len(l.Instances()) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, body := get(t, gw.URL+"/status/instance")
	var doc struct {
		Usage PlatformUsage `json:"usage"`
		Cost  Cost          `json:"cost"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	u := doc.Usage
	if u.Invocations != 30 || u.ActiveS != 4.5 || u.UptimeS != 300 || u.Instances != 1 || u.InstancesMax != 3 || u.Lost != 0 {
		t.Errorf("usage %+v, want 3 instances' (two reclaimed, one serving), at most 3 at once", u)
	}
	if want := DefaultPrices().CostOf(u.Usage); doc.Cost != want || want.ServerlessUSD <= 0 {
		t.Errorf("cost %+v, want %+v", doc.Cost, want)
	}
}

// TestGatewayCredential: the gateway sends its credential on what it
// forwards, /rpc/call and WebHDFS alike, in place of a client's copy; a
// gateway without one drops the client's.
func TestGatewayCredential(t *testing.T) {
	for _, cred := range []string{"the-gateways", ""} {
		h := &httpHost{release: make(chan struct{})}
		cfg := Config{Deployments: 1, Concurrency: 1, MaxInstances: 1, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 4}
		l, reg := newTestLocal(t, cfg, h)
		g, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second, Registerer: reg, Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		gs := httptest.NewServer(g)
		for _, u := range []string{gs.URL + "/rpc/call", gs.URL + "/webhdfs/v1/a?op=APPEND"} {
			resp, _ := post(t, u, "x", map[string]string{HeaderGatewayCredential: "forged"})
			if got := resp.Header.Get("X-Credential"); resp.StatusCode != http.StatusOK || got != cred {
				t.Errorf("%s through a gateway with credential %q: %s, the instance got %q", u, cred, resp.Status, got)
			}
		}
		gs.Close()
	}
}
