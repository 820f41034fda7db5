package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ElasticConfig is one elasticity run (the λFS evaluation's Figures 8 and 14): the spotify driver's open loop with
// a step in place of the Pareto draws — BaseRate for Warm, Step times it
// for Burst, then nothing for Idle, long enough for the platform's
// keep-alive to reclaim what the burst started — while the platform's GET
// /status/cluster is sampled for instances per deployment, their states,
// cold starts and cache hit ratios.
type ElasticConfig struct {
	Mix      Mix
	BaseRate float64       // ops/s before and after the burst
	Step     float64       // the burst's rate, in multiples of BaseRate (λFS's step is 8)
	Warm     time.Duration // at BaseRate first; whole seconds
	Burst    time.Duration // at Step × BaseRate; whole seconds
	Idle     time.Duration // nothing offered; whole seconds
	Workers  int           // the open loop's clients (most operations in flight)
	Seed     int64
	// StatusURL is the gateway's base URL (http://host:port) whose
	// /status/cluster is sampled every SampleEvery; "" samples nothing.
	StatusURL   string
	SampleEvery time.Duration
	// Transport, when set, reads the client's requests sent so far over
	// TCP and over HTTP (a hybrid client's HybridStats), sampled with the
	// cluster.
	Transport func() (tcp, http int64)
	// KillEvery, when positive, makes it a fault run (faults.go): one
	// serving instance killed every KillEvery, round robin over the
	// deployments, through StatusURL's POST /platform/kill, from the
	// schedule's start to the end of the burst; Verify is then implied.
	KillEvery time.Duration
	// KillFor, when positive, stops the kills that long after the
	// schedule's start, so that the end of the load shows the recovery;
	// 0: until the burst ends.
	KillFor time.Duration
	// Verify checks the namespace against what the clients were told
	// after the run, and runs fsck (SpotifyConfig.Verify).
	Verify bool
}

// DefaultElasticConfig returns the paper's mix, 100 ops/s stepping 8× for
// 20 s after 10 s, then 40 s idle.
func DefaultElasticConfig() ElasticConfig {
	m, _ := LookupMix("paper")
	return ElasticConfig{Mix: m, BaseRate: 100, Step: 8, Warm: 10 * time.Second, Burst: 20 * time.Second,
		Idle: 40 * time.Second, Workers: 128, Seed: 1, SampleEvery: 500 * time.Millisecond}
}

// Validate reports a configuration the run cannot follow.
func (c ElasticConfig) Validate() error {
	whole := func(d time.Duration) bool { return d >= 0 && d%time.Second == 0 }
	switch {
	case !(c.Step >= 1):
		return fmt.Errorf("bench: elastic: step %v, want at least 1", c.Step)
	case !whole(c.Warm) || !whole(c.Burst) || !whole(c.Idle) || c.Burst == 0:
		return fmt.Errorf("bench: elastic: phases %v, %v, %v: want whole seconds, a burst of at least one", c.Warm, c.Burst, c.Idle)
	case c.SampleEvery <= 0:
		return fmt.Errorf("bench: elastic: sample interval %v, want more than 0", c.SampleEvery)
	case c.KillEvery < 0 || c.KillFor < 0:
		return fmt.Errorf("bench: elastic: kill interval %v for %v, want 0 (none) or more", c.KillEvery, c.KillFor)
	}
	return c.spotify().Validate()
}

// spotify is the driver's configuration: one-second intervals following
// the step.
func (c ElasticConfig) spotify() SpotifyConfig {
	sc := DefaultSpotifyConfig()
	sc.Mix, sc.BaseRate, sc.Workers, sc.Seed = c.Mix, c.BaseRate, c.Workers, c.Seed
	sc.Interval = time.Second
	sc.Duration = c.Warm + c.Burst + c.Idle
	sc.MaxBurst = max(c.Step, 1)
	sc.Verify = c.Verify || c.KillEvery > 0
	for range int(c.Warm / time.Second) {
		sc.Schedule = append(sc.Schedule, c.BaseRate)
	}
	for range int(c.Burst / time.Second) {
		sc.Schedule = append(sc.Schedule, c.Step*c.BaseRate)
	}
	for range int(c.Idle / time.Second) {
		sc.Schedule = append(sc.Schedule, 0)
	}
	return sc
}

// ElasticStats is what an elastic result adds to the spotify one.
type ElasticStats struct {
	BaseRate float64 `json:"base_rate_ops_s"`
	Step     float64 `json:"step"`
	WarmS    int     `json:"warm_s"`
	BurstS   int     `json:"burst_s"`
	IdleS    int     `json:"idle_s"`
	// ReachS is how long after the step the served rate first reached
	// 90% of the offered one, in whole seconds of the run (the second in
	// which it did, counted from the step); -1: it never did.
	ReachS  int             `json:"reach_s"`
	Samples []ElasticSample `json:"samples"`
	// ColdStarts lists every instance first seen during the run, with its
	// cold start as the platform timed it.
	ColdStarts []ColdStart `json:"cold_starts"`
	// InstancesMax and InstancesEnd count serving and starting instances
	// per deployment: the most at one sample, and at the last.
	InstancesMax map[string]int `json:"instances_max"`
	InstancesEnd map[string]int `json:"instances_end"`
	// Requests sent over each path of the hybrid RPC, when known.
	TCPRequests  int64  `json:"tcp_requests"`
	HTTPRequests int64  `json:"http_requests"`
	SampleError  string `json:"sample_error,omitempty"`
	// LoadStartS is when the schedule began, in the samples' time (the
	// spares are made in between): a sample at T is at T - LoadStartS in
	// the throughput's seconds.
	LoadStartS float64 `json:"load_start_s"`
	// Faults: the kills of a fault run and the dip and recovery of the
	// served rate.
	Faults *FaultStats `json:"faults,omitempty"`
}

// ElasticSample is the cluster at one moment of the run.
type ElasticSample struct {
	T float64 `json:"t_s"` // since the run began
	// Instances per deployment name, serving or starting.
	Instances map[string]int `json:"instances"`
	Starting  int            `json:"starting"`
	// CacheHitRatio averages the instances' ratios that were known.
	CacheHitRatio *float64 `json:"cache_hit_ratio,omitempty"`
	TCP           int64    `json:"tcp"`  // requests sent over TCP so far
	HTTP          int64    `json:"http"` // over HTTP invocations so far
}

// ColdStart is one instance's start.
type ColdStart struct {
	ID          string  `json:"id"`
	Deployment  string  `json:"deployment"`
	SeenS       float64 `json:"seen_s"` // when a sample first listed it
	ColdStartMs float64 `json:"cold_start_ms,omitempty"`
}

// clusterDoc is the part of GET /status/cluster a run reads.
type clusterDoc struct {
	Deployments []struct {
		Name      string `json:"name"`
		Instances []struct {
			ID            string   `json:"id"`
			State         string   `json:"state"`
			ColdStartMS   *float64 `json:"cold_start_ms"`
			CacheHitRatio *float64 `json:"cache_hit_ratio"`
		} `json:"instances"`
	} `json:"deployments"`
}

// Elastic runs cfg against the prepared tree: one spotify result whose
// Elastic field holds the samples.
func Elastic(ctx context.Context, env *Env, cfg ElasticConfig, tree *Tree, progress *Progress) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	st := &ElasticStats{BaseRate: cfg.BaseRate, Step: cfg.Step, WarmS: int(cfg.Warm / time.Second),
		BurstS: int(cfg.Burst / time.Second), IdleS: int(cfg.Idle / time.Second), ReachS: -1,
		InstancesMax: map[string]int{}, InstancesEnd: map[string]int{}}
	var tcp0, http0 int64
	if cfg.Transport != nil {
		tcp0, http0 = cfg.Transport()
	}
	s := &sampler{cfg: cfg, st: st, t0: time.Now(), tcp0: tcp0, http0: http0, seen: map[string]int{}}
	sc := cfg.spotify()
	var kl *killer
	if cfg.KillEvery > 0 {
		if cfg.StatusURL == "" {
			return Result{}, errors.New("bench: elastic: killing instances needs the gateway's URL")
		}
		doc, err := readCluster(ctx, cfg.StatusURL)
		if err != nil {
			return Result{}, fmt.Errorf("bench: elastic: the deployments to kill instances of: %w", err)
		}
		kl = &killer{url: cfg.StatusURL, every: cfg.KillEvery, deps: len(doc.Deployments), hc: httpClientForSamples}
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.run(sctx) }()
	sc.OnStart = func(t0 time.Time) {
		st.LoadStartS = t0.Sub(s.t0).Seconds()
		if kl != nil {
			wg.Add(1)
			until := cfg.Warm + cfg.Burst
			if cfg.KillFor > 0 {
				until = min(until, cfg.KillFor)
			}
			go func() { defer wg.Done(); kl.run(sctx, t0, until) }()
		}
	}
	res, err := Spotify(ctx, env, sc, tree, progress)
	stop()
	wg.Wait()
	s.sample(ctx) // the end
	res.Workload, res.Op = "elastic", cfg.Mix.Name
	if cfg.Transport != nil {
		tcp, http := cfg.Transport()
		st.TCPRequests, st.HTTPRequests = tcp-tcp0, http-http0
	}
	if sp := res.Spotify; sp != nil {
		st.ReachS = reach(sp.Seconds, st.WarmS, st.BurstS)
		if kl != nil {
			st.Faults = faultStats(cfg.KillEvery, kl.kills, sp.Seconds, st.WarmS+st.BurstS)
		}
	}
	res.Elastic = st
	return res, err
}

// reach returns the second, counted from the step, in which the served
// rate first reached 90% of the offered one, or -1.
func reach(secs []SpotifySecond, warm, burst int) int {
	for i := warm; i < warm+burst && i < len(secs); i++ {
		if s := secs[i]; s.TargetOpsS > 0 && float64(s.Served) >= 0.9*s.TargetOpsS {
			return i - warm
		}
	}
	return -1
}

// sampler reads /status/cluster and the transport counts every
// SampleEvery.
type sampler struct {
	cfg         ElasticConfig
	st          *ElasticStats
	t0          time.Time
	tcp0, http0 int64
	seen        map[string]int // instance -> its index in ColdStarts, -1: there from the start
	failed      int
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample(ctx context.Context) {
	smp := ElasticSample{T: time.Since(s.t0).Seconds(), Instances: map[string]int{}}
	if s.cfg.Transport != nil {
		tcp, http := s.cfg.Transport()
		smp.TCP, smp.HTTP = tcp-s.tcp0, http-s.http0
	}
	if s.cfg.StatusURL != "" {
		doc, err := readCluster(ctx, s.cfg.StatusURL)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.failed++
			s.st.SampleError = fmt.Sprintf("%d samples failed, the last: %v", s.failed, err)
		} else {
			var ratios []float64
			for _, d := range doc.Deployments {
				n := 0
				for _, in := range d.Instances {
					if in.State != "serving" && in.State != "starting" {
						continue
					}
					n++
					if in.State == "starting" {
						smp.Starting++
					}
					if in.CacheHitRatio != nil {
						ratios = append(ratios, *in.CacheHitRatio)
					}
					s.coldStart(d.Name, in.ID, smp.T, in.ColdStartMS)
				}
				smp.Instances[d.Name] = n
				s.st.InstancesMax[d.Name] = max(s.st.InstancesMax[d.Name], n)
				s.st.InstancesEnd[d.Name] = n
			}
			if len(ratios) > 0 {
				sum := 0.0
				for _, r := range ratios {
					sum += r
				}
				avg := sum / float64(len(ratios))
				smp.CacheHitRatio = &avg
			}
		}
	}
	s.st.Samples = append(s.st.Samples, smp)
}

// coldStart notes instance id of deployment dep seen at t: a new entry in
// ColdStarts unless it was there at the first sample (started before the
// run), and its cold start once the platform has timed it.
func (s *sampler) coldStart(dep, id string, t float64, ms *float64) {
	key := dep + "/" + id
	i, ok := s.seen[key]
	if !ok {
		i = -1
		if len(s.st.Samples) > 0 {
			i = len(s.st.ColdStarts)
			s.st.ColdStarts = append(s.st.ColdStarts, ColdStart{ID: id, Deployment: dep, SeenS: t})
		}
		s.seen[key] = i
	}
	if i >= 0 && ms != nil && s.st.ColdStarts[i].ColdStartMs == 0 {
		s.st.ColdStarts[i].ColdStartMs = *ms
	}
}

// readCluster fetches base's GET /status/cluster.
func readCluster(ctx context.Context, base string) (*clusterDoc, error) {
	url := strings.TrimSuffix(base, "/") + "/status/cluster"
	var doc clusterDoc
	if err := getJSON(ctx, url, 2*time.Second, &doc); err != nil {
		return nil, err
	}
	if len(doc.Deployments) == 0 {
		return nil, errors.New(url + ": no deployments")
	}
	return &doc, nil
}
