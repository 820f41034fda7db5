package platform

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/internal/statuspage"
)

// The gateway's status page (GET /): the same live page a NameNode server
// shows (internal/statuspage), here for the platform: the instances of
// each deployment as the policy has them (starting, serving, stopping),
// with their cold starts and invocations in flight; throughput and p99
// per kind of request and deployment from the gateway's own histogram
// (nimbus_gateway_request_seconds: a call's time includes the hop and the
// instance's answer); and the metadata cache's hit ratio summed over the
// instances, whose /metrics the sampler reads once a second (each within
// StatusTimeout). The table's hit ratio of an instance is its own since
// it started.

var gatewayTemplate = statuspage.Template(`{{define "details"}}
<h2>This platform</h2>
<ul>
<li>Policy: {{.Details.Deployments}} deployments; {{.Details.Concurrency}} invocations at once per instance; at most {{.Details.MaxInstances}} instances ({{.Details.MaxPerDeployment}} per deployment); {{.Details.MinInstances}} kept per deployment; an idle instance is reclaimed after {{.Details.KeepAlive}}</li>
<li>Invocations so far: {{.Details.Invocations}}; cold starts: {{.Details.ColdStarts}}</li>
</ul>
<h2>Endpoints</h2>
<ul>
<li>RPC: <code>POST {{.Addr}}/rpc/call</code>, one request frame, the deployment in the <code>Nimbus-Deployment</code> header (the hybrid client's invocations; its TCP connections go to the instances)</li>
<li><a href="/webhdfs/v1/?op=LISTSTATUS">WebHDFS</a>: <code>/webhdfs/v1</code>, forwarded to the deployment of the path's parent directory</li>
<li><a href="/status/cluster">/status/cluster</a>: the deployments and their instances (JSON)</li>
<li><a href="/metrics">/metrics</a>: the platform's and the gateway's Prometheus metrics</li>
<li><a href="/status/series?minutes=5">/status/series</a>: the charts' samples (JSON)</li>
<li><a href="/readyz">/readyz</a>: 200 while serving</li>
</ul>
{{end}}`)

// gatewayPage is the page's state.
type gatewayPage struct {
	started time.Time
	ring    statuspage.Ring
	sampler statuspage.Sampler
	mu      struct {
		sync.Mutex
		ratios map[string]float64 // instance address -> its cache hit ratio at the last sample
	}
}

// gatewayFamilies is the histogram the charts count requests with.
var gatewayFamilies = []statuspage.Family{{Name: "nimbus_gateway_request_seconds", Labels: []string{"kind", "deployment"}}}

// routePage registers the page (NewGateway) and starts its sampler when
// the options give the registry to read (GatewayOptions.Gatherer).
func (g *Gateway) routePage() {
	g.page = &gatewayPage{started: time.Now()}
	g.mux.HandleFunc("GET /{$}", g.statusPage)
	statuspage.Route(g.mux, &g.page.ring, g.pageCluster, func() string { return "/status/cluster" })
	if g.opts.Gatherer != nil {
		g.page.sampler.Sample = g.sample
		g.page.sampler.Start()
	}
}

// Close stops the status page's sampler.
func (g *Gateway) Close() {
	if g.page != nil {
		g.page.sampler.Stop()
	}
}

// sample reads the gateway's registry and the instances' cache counters.
func (g *Gateway) sample(now time.Time) {
	// The histogram's series are per kind and deployment: "call d0".
	snap, _, err := statuspage.Read(g.opts.Gatherer, gatewayFamilies, "")
	if err != nil {
		g.opts.Logger.Debug("status page: reading metrics", "err", err)
	}
	insts := g.l.Instances()
	snap.Instances = map[int]int{}
	for d := range g.l.Config().Deployments {
		snap.Instances[d] = 0
	}
	type counts struct {
		addr         string
		hits, misses float64
		ok           bool
	}
	got := make([]counts, 0, len(insts))
	for _, in := range insts {
		snap.Instances[in.Deployment]++
		if in.State == StateServing && in.Addr != "" {
			got = append(got, counts{addr: in.Addr})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.opts.StatusTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i].hits, got[i].misses, got[i].ok = CacheCounts(ctx, g.hc, got[i].addr)
		}()
	}
	wg.Wait()
	ratios := map[string]float64{}
	for _, c := range got {
		if !c.ok {
			continue
		}
		snap.Cache = true
		snap.CacheHits += uint64(c.hits)
		snap.CacheMisses += uint64(c.misses)
		if c.hits+c.misses > 0 {
			ratios[c.addr] = c.hits / (c.hits + c.misses)
		}
	}
	g.page.mu.Lock()
	g.page.mu.ratios = ratios
	g.page.mu.Unlock()
	g.page.ring.Sample(now, snap)
}

// pageCluster is the platform's instances as the page shows them, with
// the hit ratios of the last sample.
func (g *Gateway) pageCluster(context.Context) statuspage.Cluster {
	n := g.l.Config().Deployments
	c := statuspage.Cluster{Source: "platform", Deployments: make([]statuspage.Deployment, n)}
	for i := range c.Deployments {
		c.Deployments[i] = statuspage.Deployment{Name: "d" + strconv.Itoa(i), Index: i, Instances: []statuspage.Instance{}}
	}
	g.page.mu.Lock()
	ratios := g.page.mu.ratios
	g.page.mu.Unlock()
	now := g.l.opts.Now()
	for _, s := range g.l.Instances() {
		age := now.Sub(s.StartedAt).Seconds()
		inflight := float64(s.InFlight)
		in := statuspage.Instance{ID: strconv.FormatUint(uint64(s.ID), 10), Address: s.Addr, State: s.State, AgeSeconds: &age, InFlight: &inflight}
		if s.ColdStart > 0 {
			ms := float64(s.ColdStart.Microseconds()) / 1e3
			in.ColdStartMS = &ms
		}
		if r, ok := ratios[s.Addr]; ok {
			in.CacheHitRatio = &r
		}
		c.Deployments[s.Deployment].Instances = append(c.Deployments[s.Deployment].Instances, in)
	}
	return c
}

// gatewayDetails is the page's "This platform" section.
type gatewayDetails struct {
	Config
	KeepAlive               string
	Invocations, ColdStarts int64
}

func (g *Gateway) statusPage(w http.ResponseWriter, r *http.Request) {
	cfg := g.l.Config()
	inv, cold := g.l.Totals()
	version := g.opts.Version
	if version == "" {
		version = "(version unknown)"
	}
	d := statuspage.Data{Version: version, Role: "the gateway of a local platform, serving", Addr: "http://" + r.Host,
		Started: g.page.started.UTC().Format(time.RFC3339), Uptime: time.Since(g.page.started).Round(time.Second).String(),
		Cluster: g.pageCluster(r.Context()),
		Details: gatewayDetails{Config: cfg, KeepAlive: cfg.KeepAlive.String(), Invocations: inv, ColdStarts: cold}}
	d.Totals = statuspage.TotalsOf(d.Cluster, g.page.ring.Series(time.Now().Add(-time.Minute), 1))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := gatewayTemplate.Execute(w, d); err != nil {
		g.opts.Logger.Warn("status page", "err", fmt.Errorf("platform: %w", err))
	}
}
