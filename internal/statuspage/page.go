// Package statuspage is the live status page that a NameNode server and a
// platform's gateway both serve at / (docs/OPERATIONS.md, "The status
// page"): the deployments and their instances, and charts of instances per
// deployment, throughput and p99 latency per operation and the metadata
// cache's hit ratio over the last minutes. The server renders the basics,
// so the page reads without JavaScript; page.js then polls GET
// /status/series every second and draws.
//
// The samples come from the serving process's own Prometheus registry,
// read once a second by a Sampler: the request paths do no work for the
// page. The ring of samples (ring.go) holds no goroutine and reads no
// clock, like the protocol cores.
package statuspage

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

//go:embed page.html
var pageHTML string

//go:embed page.js
var pageJS []byte

var base = template.Must(template.New("status").Funcs(template.FuncMap{
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
}).Parse(pageHTML))

// Template returns the page with its "details" block (what follows the
// instances table: the sections that say what this process is) defined
// by details, a template text of the form {{define "details"}}...{{end}}
// that reads Data.Details.
func Template(details string) *template.Template {
	return template.Must(template.Must(base.Clone()).Parse(details))
}

// Data is what the page shows; html/template escapes every field.
type Data struct {
	Version string
	Role    string // "one process serving", "the gateway of a local platform serving"
	Addr    string
	Started string
	Uptime  string
	Cluster Cluster
	Totals  Totals
	Details any // for the "details" block
}

// Cluster is the cluster as the table and the instances chart show it
// (the "cluster" field of GET /status/series). Its JSON has the names of
// GET /status/cluster's (platform.ClusterStatus).
type Cluster struct {
	// Source says where it comes from: "coordinator" (a server's
	// coordinator's members, only that server in detail), "local" (that
	// server alone) or "platform" (a gateway's instances).
	Source      string       `json:"source"`
	Deployments []Deployment `json:"deployments"`
}

// Deployment is one deployment's instances.
type Deployment struct {
	Name      string     `json:"name"` // "d" and the index
	Index     int        `json:"index"`
	Instances []Instance `json:"instances"`
}

// Instance is one row of the table; what is unknown is null.
type Instance struct {
	ID            string   `json:"id"`
	Address       string   `json:"address"`
	AgeSeconds    *float64 `json:"age_seconds"`
	InFlight      *float64 `json:"inflight"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"` // over the last minute
	ColdStartMS   *float64 `json:"cold_start_ms"`
	State         string   `json:"state"`
	This          bool     `json:"this,omitempty"` // the server that answered
}

// Totals are the figures above the table (the page recomputes them in
// the browser from the same data as it polls).
type Totals struct {
	Deployments, Instances int
	InFlight               float64
	Rate                   string // requests per second over the last sample, all operations
	CacheHitRatio          *float64
}

// TotalsOf sums c and the last sample of s.
func TotalsOf(c Cluster, s Series) Totals {
	t := Totals{Deployments: len(c.Deployments), Rate: "–"}
	for _, d := range c.Deployments {
		t.Instances += len(d.Instances)
		for _, in := range d.Instances {
			if in.InFlight != nil {
				t.InFlight += *in.InFlight
			}
		}
	}
	if k := len(s.T) - 1; k >= 0 {
		var r float64
		for _, v := range s.Rate {
			r += float64(v[k])
		}
		t.Rate = fmt.Sprintf("%.0f", r)
	}
	if r := float64(s.CacheHitRatioWindow); !math.IsNaN(r) {
		t.CacheHitRatio = &r
	}
	return t
}

// Route registers GET /status/page.js and GET /status/series, whose
// cluster comes from cluster; clusterURL, when not empty, is where the
// page may also poll the full cluster (GET /status/cluster).
func Route(mux *http.ServeMux, ring *Ring, cluster func(context.Context) Cluster, clusterURL func() string) {
	mux.HandleFunc("GET /status/page.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(pageJS)
	})
	mux.HandleFunc("GET /status/series", func(w http.ResponseWriter, r *http.Request) {
		serveSeries(w, r, ring, cluster, clusterURL())
	})
}

// serveSeries answers GET /status/series?minutes=N (1 to 15, default 5):
// the samples of the last N minutes and the cluster.
func serveSeries(w http.ResponseWriter, r *http.Request, ring *Ring, cluster func(context.Context) Cluster, clusterURL string) {
	minutes := 5
	if v := r.URL.Query().Get("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > Capacity/60 {
			http.Error(w, fmt.Sprintf("minutes=%q: want a whole number from 1 to %d", v, Capacity/60), http.StatusBadRequest)
			return
		}
		minutes = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	out := struct {
		Series
		Cluster    Cluster `json:"cluster"`
		ClusterURL string  `json:"cluster_url,omitempty"`
	}{Series: ring.Series(time.Now().Add(-time.Duration(minutes)*time.Minute), minutes), Cluster: cluster(ctx), ClusterURL: clusterURL}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}

// Family names a latency histogram whose series count requests per
// operation: Prefix and the values of the Labels labels, space-separated,
// name the operation.
type Family struct {
	Name, Prefix string
	Labels       []string
}

// Read gathers g and returns the snapshot of the histograms in fams, the
// metadata cache's lookups (nimbus_cache_hits_total and misses_total) and
// the sum of the gauge named inflight ("" for none).
func Read(g prometheus.Gatherer, fams []Family, inflight string) (Snapshot, float64, error) {
	snap := Snapshot{Ops: map[string]OpCounts{}}
	var in float64
	got, err := g.Gather() // partial results on error
	for _, f := range got {
		name := f.GetName()
		switch {
		case name == inflight:
			for _, m := range f.GetMetric() {
				in += m.GetGauge().GetValue()
			}
		case name == "nimbus_cache_hits_total", name == "nimbus_cache_misses_total":
			snap.Cache = true
			var n uint64
			for _, m := range f.GetMetric() {
				n += uint64(m.GetCounter().GetValue())
			}
			if name == "nimbus_cache_hits_total" {
				snap.CacheHits = n
			} else {
				snap.CacheMisses = n
			}
		default:
			for _, fam := range fams {
				if fam.Name == name {
					addHistograms(snap.Ops, fam, f)
				}
			}
		}
	}
	return snap, in, err
}

func addHistograms(ops map[string]OpCounts, fam Family, f *dto.MetricFamily) {
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil || h.GetSampleCount() == 0 {
			continue
		}
		name := fam.Prefix
		for i, want := range fam.Labels {
			for _, l := range m.GetLabel() {
				if l.GetName() == want {
					if i > 0 {
						name += " "
					}
					name += l.GetValue()
				}
			}
		}
		b := make([]Bucket, 0, len(h.GetBucket())+1)
		for _, x := range h.GetBucket() {
			b = append(b, Bucket{Upper: x.GetUpperBound(), Count: x.GetCumulativeCount()})
		}
		b = append(b, Bucket{Upper: math.Inf(1), Count: h.GetSampleCount()})
		ops[name] = OpCounts{Buckets: b}
	}
}

// Sampler calls Sample once at Start and then every Every until Stop:
// the thin I/O loop around the ring.
type Sampler struct {
	Every  time.Duration // 0: one second
	Sample func(now time.Time)

	mu         sync.Mutex
	stop, done chan struct{}
}

// Start samples now and starts the ticker.
func (s *Sampler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	every := s.Every
	if every <= 0 {
		every = time.Second
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.Sample(time.Now())
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				s.Sample(now)
			}
		}
	}(s.stop, s.done)
}

// Stop ends the ticker and waits for a sample under way.
func (s *Sampler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
}
