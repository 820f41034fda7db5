package server

import (
	"context"
	"github.com/nimbus-fs/nimbus/internal/statuspage"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/coordinator"
)

// The status page (GET /) shows this server, the deployments and their
// instances, and live charts of instances per deployment, throughput and
// p99 latency per operation and the cache hit ratio (docs/OPERATIONS.md,
// "The status page"). The server renders the basics, so the page reads
// without JavaScript; statuspage.js then polls GET /status/series (and GET
// /status/cluster when this server has it) every second and draws.
//
// The samples come from the server's own Prometheus registry, read once a
// second by a ticker (startSampler): the request paths do no work for the
// page. A Gather reads every collector, the Go runtime's and the store's
// included; BenchmarkSampleMetrics measures it.

// statusPage is the page's template: the shared page with this server's
// details (the data directory, the store, the coordinator, the
// endpoints) under the table.
var statusTemplate = statuspage.Template(`{{define "details"}}
<h2>This server</h2>
<ul>
<li>Data directory: <code>{{.Details.DataDir}}</code> (the metadata store is in <code>meta/</code>, block replicas in <code>blocks/</code>)</li>
<li>Metadata store: {{.Details.Commits}} committed transactions since start, {{.Details.DiskUsage}} on disk; {{.Details.RootEntries}} in <code>/</code> (<code>nimbus fs count /</code> counts everything, by walking it)</li>
<li>Files up to {{.Details.InlineThreshold}} bytes are kept in the metadata store beside their inode; larger files are cut into blocks under <code>{{.Details.BlocksDir}}</code>. There is no limit on a file's size.</li>
<li>Superuser: <code>{{.Details.Superuser}}</code></li>
<li>Coordinator: {{.Details.Coordinator}}</li>
</ul>
{{if .Details.DataNodes}}
<h2>DataNodes</h2>
<table class="datanodes">
<tr><th>id</th><th>address</th><th>zone</th><th>capacity</th><th>used</th><th>blocks</th><th>last heartbeat</th><th>state</th></tr>
{{range .Details.DataNodes}}<tr><td>{{.ID}}</td><td><code>{{.Address}}</code></td><td>{{.Zone}}</td><td>{{.CapacityH}}</td><td>{{.UsedH}}</td><td>{{.Blocks}}</td><td>{{.LastHeartbeat}}</td><td>{{.State}}</td></tr>
{{end}}</table>
{{else if .Details.DataNodesErr}}
<p>DataNodes: unknown ({{.Details.DataNodesErr}})</p>
{{end}}
<h2>Endpoints</h2>
<ul>
<li><a href="/webhdfs/v1/?op=LISTSTATUS">WebHDFS</a>: <code>/webhdfs/v1</code> (hadoop fs, Spark, Python's hdfs and fsspec)</li>
<li>RPC: <code>{{.Addr}}/rpc/</code> (nimbus fs, the Go client; it upgrades the connection, a browser gets a note)</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
<li><a href="/status/series?minutes=5">/status/series</a>: the charts' samples (JSON)</li>
<li><a href="/status/datanodes">/status/datanodes</a>: the store's DataNodes (JSON)</li>
<li><a href="/readyz">/readyz</a>: 200 while serving</li>
</ul>
{{end}}`)

// statusPager is the page's state: the ring of samples and what the table
// shows about this instance.
type statusPager struct {
	created time.Time // New: the start of this instance's cold start
	series  statuspage.Ring
	sampler statuspage.Sampler
	mu      struct {
		sync.Mutex
		readyAt  time.Time // Start's end: the end of the cold start
		inflight float64   // RPC requests in flight at the last sample
	}
	// clusterRoute reports whether the mux serves GET /status/cluster (the
	// full view of the cluster), which the page then polls.
	clusterRoute func() bool
}

func newStatusPager(now time.Time) *statusPager {
	return &statusPager{created: now, clusterRoute: func() bool { return false }}
}

// routeStatusPage registers the page, its script and GET /status/series.
func (s *Server) routeStatusPage(mux *http.ServeMux) {
	mux.HandleFunc("/{$}", s.statusPage)
	statuspage.Route(mux, &s.page.series, s.clusterForPage, func() string {
		if s.page.clusterRoute() {
			return "/status/cluster"
		}
		return ""
	})
	s.page.clusterRoute = func() bool {
		_, pattern := mux.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/status/cluster"}, Host: "localhost"})
		return strings.Contains(pattern, "/status/cluster")
	}
}

// startSampler samples once a second until stopSampler (Start, shutdown).
func (s *Server) startSampler() {
	p := s.page
	p.mu.Lock()
	p.mu.readyAt = time.Now()
	p.mu.Unlock()
	p.sampler.Sample = s.sample
	p.sampler.Start()
}

func (s *Server) stopSampler() { s.page.sampler.Stop() }

// sample reads the counters and the cluster and feeds the ring.
func (s *Server) sample(now time.Time) {
	snap, inflight, err := s.readMetrics()
	if err != nil {
		s.log.Debug("status page: reading metrics", "err", err)
	}
	s.page.mu.Lock()
	s.page.mu.inflight = inflight
	s.page.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	snap.Instances = map[int]int{}
	for _, d := range s.clusterForPage(ctx).Deployments {
		snap.Instances[d.Index] = len(d.Instances)
	}
	s.page.series.Sample(now, snap)
}

// pageFamilies are the latency histograms whose counts are the requests
// the page charts.
var pageFamilies = []statuspage.Family{
	{Name: "nimbus_rpc_request_duration_seconds", Prefix: "rpc ", Labels: []string{"method"}},
	{Name: "nimbus_webhdfs_request_seconds", Prefix: "webhdfs ", Labels: []string{"op"}},
}

// readMetrics gathers the registry: the latency histograms, the cache's
// lookups and the RPC requests in flight.
func (s *Server) readMetrics() (statuspage.Snapshot, float64, error) {
	return statuspage.Read(s.reg, pageFamilies, "nimbus_rpc_inflight_requests")
}

// clusterForPage is the one seam between the page and the cluster's
// data: the instances chart counts its deployments' instances once a
// second and the table lists them. Until the platform's view of the
// cluster (GET /status/cluster) is in package server, it is the
// coordinator's members, with this server's own row filled in
// (localInstance); wire the platform's view here (docs/OPERATIONS.md, "The
// status page").
func (s *Server) clusterForPage(ctx context.Context) statuspage.Cluster {
	self := s.localInstance()
	n := max(s.cfg.Deployments, 1)
	c := statuspage.Cluster{Source: "coordinator", Deployments: make([]statuspage.Deployment, n)}
	for i := range c.Deployments {
		c.Deployments[i] = statuspage.Deployment{Name: "d" + strconv.Itoa(i), Index: i, Instances: []statuspage.Instance{}}
	}
	var members []coordinator.Member
	if s.ready.Load() && s.coord != nil { // ready: s.coord is set
		v, err := s.coord.Members(ctx, coordinator.All)
		if err != nil {
			self.State += " (coordinator: " + err.Error() + ")"
		}
		members = v.Members
	}
	if len(members) == 0 {
		c.Source = "local"
	}
	found := false
	for _, m := range members {
		if m.Deployment < 0 || m.Deployment >= n {
			continue
		}
		in := statuspage.Instance{ID: m.ID, Address: m.Addr, State: "member"}
		if m.ID == self.ID {
			in, found = self, true
		}
		c.Deployments[m.Deployment].Instances = append(c.Deployments[m.Deployment].Instances, in)
	}
	if !found { // not (or no longer) a member: still this server
		d := &c.Deployments[s.cfg.Deployment]
		d.Instances = append(d.Instances, self)
	}
	for _, d := range c.Deployments {
		sort.Slice(d.Instances, func(i, j int) bool { return d.Instances[i].ID < d.Instances[j].ID })
	}
	return c
}

// localInstance is this server's row.
func (s *Server) localInstance() statuspage.Instance {
	p := s.page
	p.mu.Lock()
	readyAt, inflight := p.mu.readyAt, p.mu.inflight
	p.mu.Unlock()
	// The states are the platform's (starting, serving, stopping) and
	// failed (fail-stop: the store failed).
	in := statuspage.Instance{Address: s.Addr(), State: "starting", This: true, InFlight: &inflight}
	if sess := s.Member(); sess != nil {
		in.ID = sess.Member().ID
	}
	switch {
	case s.fatal.failed():
		in.State = "failed"
	case s.ready.Load():
		in.State = "serving"
	case !readyAt.IsZero():
		in.State = "stopping"
	}
	if !readyAt.IsZero() {
		age := time.Since(p.created).Seconds()
		cold := float64(readyAt.Sub(p.created).Microseconds()) / 1000
		in.AgeSeconds, in.ColdStartMS = &age, &cold
	}
	if r := p.series.Series(time.Now().Add(-time.Minute), 1).CacheHitRatioWindow; !math.IsNaN(float64(r)) {
		f := float64(r)
		in.CacheHitRatio = &f
	}
	return in
}
