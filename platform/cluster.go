package platform

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ClusterStatus is GET /status/cluster, on the gateway of the local
// platform and on a plain server alike (`nimbus status` prints it): the
// deployments and their instances. Fields a source cannot know are null.
type ClusterStatus struct {
	Deployments []DeploymentStatus `json:"deployments"`
	Totals      ClusterTotals      `json:"totals"`
}

// DeploymentStatus is one deployment: its name ("d" and its index) and its
// instances.
type DeploymentStatus struct {
	Name      string            `json:"name"`
	Index     int               `json:"index"`
	Instances []ClusterInstance `json:"instances"`
}

// ClusterInstance is one instance of a deployment.
type ClusterInstance struct {
	ID            string   `json:"id"`
	Address       string   `json:"address"`
	State         string   `json:"state"`
	AgeSeconds    *float64 `json:"age_seconds"`
	Inflight      *int     `json:"inflight"`
	ColdStartMS   *float64 `json:"cold_start_ms"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"`
}

// ClusterTotals sums the cluster: instances listed, invocations (the
// platform's, or the server's own requests) and cold starts.
type ClusterTotals struct {
	Instances   int   `json:"instances"`
	Invocations int64 `json:"invocations"`
	ColdStarts  int64 `json:"cold_starts"`
}

// NewClusterStatus returns the shape with n empty deployments.
func NewClusterStatus(n int) ClusterStatus {
	cs := ClusterStatus{Deployments: make([]DeploymentStatus, n)}
	for i := range cs.Deployments {
		cs.Deployments[i] = DeploymentStatus{Name: "d" + strconv.Itoa(i), Index: i, Instances: []ClusterInstance{}}
	}
	return cs
}

// FillHitRatios asks each instance with an address for its cache counters
// (GET /metrics), all at once and each bounded by timeout, and fills
// CacheHitRatio where they could be read and count at least one lookup.
// The status is read rarely (by people, `nimbus status`), so it is fetched
// when asked, not kept.
func FillHitRatios(ctx context.Context, hc *http.Client, cs *ClusterStatus, timeout time.Duration) {
	var wg sync.WaitGroup
	for d := range cs.Deployments {
		for i := range cs.Deployments[d].Instances {
			in := &cs.Deployments[d].Instances[i]
			if in.Address == "" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				in.CacheHitRatio = HitRatio(cctx, hc, in.Address)
			}()
		}
	}
	wg.Wait()
}

// HitRatio reads an instance's /metrics and returns hits/(hits+misses) of
// its metadata cache (nimbus_cache_hits_total and misses_total, every
// kind), or nil when it cannot be read or has seen no lookup.
func HitRatio(ctx context.Context, hc *http.Client, base string) *float64 {
	hits, misses, ok := CacheCounts(ctx, hc, base)
	if !ok || hits+misses == 0 {
		return nil
	}
	r := hits / (hits + misses)
	return &r
}

// CacheCounts reads an instance's /metrics and returns its metadata
// cache's hits and misses so far (every kind); ok is false when they
// cannot be read.
func CacheCounts(ctx context.Context, hc *http.Client, base string) (hits, misses float64, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/metrics", nil)
	if err != nil {
		return 0, 0, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum *float64
		switch {
		case strings.HasPrefix(line, "nimbus_cache_hits_total"):
			sum = &hits
		case strings.HasPrefix(line, "nimbus_cache_misses_total"):
			sum = &misses
		default:
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				*sum += v
			}
		}
	}
	return hits, misses, sc.Err() == nil
}
