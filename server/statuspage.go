package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

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

//go:embed statuspage.html
var statusPageHTML string

//go:embed statuspage.js
var statusPageJS []byte

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"ratio": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", *v*100)
	},
	"age": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return time.Duration(*v * float64(time.Second)).Round(time.Second).String()
	},
	"ms": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f ms", *v)
	},
	"count": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f", *v)
	},
}).Parse(statusPageHTML))

// statusPager is the page's state: the ring of samples and what the table
// shows about this instance.
type statusPager struct {
	created time.Time // New: the start of this instance's cold start
	series  seriesRing
	mu      struct {
		sync.Mutex
		readyAt  time.Time // Start's end: the end of the cold start
		inflight float64   // RPC requests in flight at the last sample
	}
	stop, done chan struct{}
	// clusterRoute reports whether the mux serves GET /status/cluster (the
	// platform's view of the cluster), which the page then polls.
	clusterRoute func() bool
}

func newStatusPager(now time.Time) *statusPager {
	return &statusPager{created: now, clusterRoute: func() bool { return false }}
}

// routeStatusPage registers the page, its script and GET /status/series.
func (s *Server) routeStatusPage(mux *http.ServeMux) {
	mux.HandleFunc("/{$}", s.statusPage)
	mux.HandleFunc("GET /status/page.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(statusPageJS)
	})
	mux.HandleFunc("GET /status/series", s.statusSeries)
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
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	s.sample(time.Now())
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				s.sample(now)
			}
		}
	}()
}

func (s *Server) stopSampler() {
	if p := s.page; p.stop != nil {
		close(p.stop)
		<-p.done
		p.stop = nil
	}
}

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

// readMetrics gathers the registry and picks out the latency histograms
// (their counts are the requests), the cache's lookups and the RPC
// requests in flight.
func (s *Server) readMetrics() (metricsSnapshot, float64, error) {
	snap := metricsSnapshot{Ops: map[string]opCounts{}}
	var inflight float64
	fams, err := s.reg.Gather() // partial results on error
	for _, f := range fams {
		switch f.GetName() {
		case "nimbus_rpc_request_duration_seconds":
			addHistograms(snap.Ops, "rpc ", "method", f)
		case "nimbus_webhdfs_request_seconds":
			addHistograms(snap.Ops, "webhdfs ", "op", f)
		case "nimbus_rpc_inflight_requests":
			for _, m := range f.GetMetric() {
				inflight += m.GetGauge().GetValue()
			}
		case "nimbus_cache_hits_total", "nimbus_cache_misses_total":
			snap.Cache = true
			var n uint64
			for _, m := range f.GetMetric() {
				n += uint64(m.GetCounter().GetValue())
			}
			if f.GetName() == "nimbus_cache_hits_total" {
				snap.CacheHits = n
			} else {
				snap.CacheMisses = n
			}
		}
	}
	return snap, inflight, err
}

func addHistograms(ops map[string]opCounts, prefix, label string, f *dto.MetricFamily) {
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil || h.GetSampleCount() == 0 {
			continue
		}
		name := prefix
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				name += l.GetValue()
			}
		}
		b := make([]histBucket, 0, len(h.GetBucket())+1)
		for _, x := range h.GetBucket() {
			b = append(b, histBucket{Upper: x.GetUpperBound(), Count: x.GetCumulativeCount()})
		}
		b = append(b, histBucket{Upper: math.Inf(1), Count: h.GetSampleCount()})
		ops[name] = opCounts{Buckets: b}
	}
}

// pageCluster is the cluster as the page's table and its instances chart
// show it (the "cluster" field of GET /status/series). Its JSON has the
// names of GET /status/cluster's (the platform's ClusterStatus), so that
// the page reads either.
type pageCluster struct {
	// Source says where it comes from: "coordinator" (the members this
	// server's coordinator lists, only this server in detail) or "local"
	// (the coordinator could not be asked: this server alone).
	Source      string           `json:"source"`
	Deployments []pageDeployment `json:"deployments"`
}

type pageDeployment struct {
	Name      string         `json:"name"` // "d" and the index
	Index     int            `json:"index"`
	Instances []pageInstance `json:"instances"`
}

// pageInstance is one row of the table; what is unknown is null.
type pageInstance struct {
	ID            string   `json:"id"`
	Address       string   `json:"address"`
	AgeSeconds    *float64 `json:"age_seconds"`
	InFlight      *float64 `json:"inflight"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"` // over the last minute
	ColdStartMS   *float64 `json:"cold_start_ms"`
	State         string   `json:"state"`
	This          bool     `json:"this,omitempty"` // the server that answered
}

// clusterForPage is the one seam between the page and the cluster's
// data: the instances chart counts its deployments' instances once a
// second and the table lists them. Until the platform's view of the
// cluster (GET /status/cluster) is in package server, it is the
// coordinator's members, with this server's own row filled in
// (localInstance); wire the platform's view here (docs/OPERATIONS.md, "The
// status page").
func (s *Server) clusterForPage(ctx context.Context) pageCluster {
	self := s.localInstance()
	n := max(s.cfg.Deployments, 1)
	c := pageCluster{Source: "coordinator", Deployments: make([]pageDeployment, n)}
	for i := range c.Deployments {
		c.Deployments[i] = pageDeployment{Name: "d" + strconv.Itoa(i), Index: i, Instances: []pageInstance{}}
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
		in := pageInstance{ID: m.ID, Address: m.Addr, State: "member"}
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
func (s *Server) localInstance() pageInstance {
	p := s.page
	p.mu.Lock()
	readyAt, inflight := p.mu.readyAt, p.mu.inflight
	p.mu.Unlock()
	// The states are the platform's (starting, serving, stopping) and
	// failed (fail-stop: the store failed).
	in := pageInstance{Address: s.Addr(), State: "starting", This: true, InFlight: &inflight}
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

// statusSeries answers GET /status/series?minutes=N (1 to 15, default 5):
// the samples of the last N minutes and the cluster (docs/OPERATIONS.md).
func (s *Server) statusSeries(w http.ResponseWriter, r *http.Request) {
	minutes := 5
	if v := r.URL.Query().Get("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > seriesCapacity/60 {
			http.Error(w, fmt.Sprintf("minutes=%q: want a whole number from 1 to %d", v, seriesCapacity/60), http.StatusBadRequest)
			return
		}
		minutes = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out := struct {
		seriesJSON
		Cluster    pageCluster `json:"cluster"`
		ClusterURL string      `json:"cluster_url,omitempty"`
	}{seriesJSON: s.page.series.Series(time.Now().Add(-time.Duration(minutes)*time.Minute), minutes), Cluster: s.clusterForPage(ctx)}
	if s.page.clusterRoute() {
		out.ClusterURL = "/status/cluster"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// pageTotals are the figures above the table (the page recomputes them in
// the browser from the same data as it polls).
type pageTotals struct {
	Deployments, Instances int
	InFlight               float64
	Rate                   string // requests per second over the last sample, all operations
	CacheHitRatio          *float64
}

func totalsOf(c pageCluster, last seriesJSON) pageTotals {
	t := pageTotals{Deployments: len(c.Deployments), Rate: "–"}
	for _, d := range c.Deployments {
		t.Instances += len(d.Instances)
		for _, in := range d.Instances {
			if in.InFlight != nil {
				t.InFlight += *in.InFlight
			}
		}
	}
	if k := len(last.T) - 1; k >= 0 {
		var r float64
		for _, v := range last.Rate {
			r += float64(v[k])
		}
		t.Rate = fmt.Sprintf("%.0f", r)
	}
	if r := float64(last.CacheHitRatioWindow); !math.IsNaN(r) {
		t.CacheHitRatio = &r
	}
	return t
}
