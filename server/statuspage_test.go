package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/statuspage"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

func startPageServer(t testing.TB, cacheBytes int64) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	cfg.CacheBytes = cacheBytes
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

// TestStatusSeries: GET /status/series answers the samples and the
// cluster (this server, serving, in deployment 0), refuses a bad minutes,
// and names /status/cluster only when the server has it; the page renders
// the table and totals without JavaScript.
func TestStatusSeries(t *testing.T) {
	s := startPageServer(t, 1<<20)
	u := meta.User{Name: s.cfg.Namespace.Superuser}
	if err := s.Engine().Mkdirs(context.Background(), u, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	s.sample(time.Now()) // one point without waiting for the ticker
	code, body := testproc.Get(t, s.Addr()+"/status/series?minutes=2")
	if code != 200 {
		t.Fatalf("GET /status/series: %d %s", code, body)
	}
	var got struct {
		Minutes    int                 `json:"minutes"`
		T          []int64             `json:"t"`
		Cache      bool                `json:"cache"`
		Instances  map[string][]*int   `json:"instances"`
		Rate       map[string][]*int64 `json:"rate"`
		ClusterURL string              `json:"cluster_url"`
		Cluster    statuspage.Cluster  `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if got.Minutes != 2 || len(got.T) == 0 || !got.Cache || len(got.Instances["0"]) != len(got.T) {
		t.Errorf("series %s", body)
	}
	// cluster_url names GET /status/cluster exactly when this server has it.
	hasCluster, _ := testproc.Get(t, s.Addr()+"/status/cluster")
	if (got.ClusterURL == "/status/cluster") != (hasCluster == 200) {
		t.Errorf("cluster_url %q, GET /status/cluster: %d", got.ClusterURL, hasCluster)
	}
	if d := got.Cluster.Deployments; len(d) != 1 || d[0].Index != 0 || d[0].Name != "d0" || len(d[0].Instances) != 1 || d[0].Instances[0].State != "serving" ||
		!d[0].Instances[0].This || d[0].Instances[0].Address != s.Addr() || d[0].Instances[0].ColdStartMS == nil || got.Cluster.Source != "coordinator" {
		t.Errorf("cluster %+v", got.Cluster)
	}
	for _, bad := range []string{"0", "16", "x", "-1"} {
		if code, _ := testproc.Get(t, s.Addr()+"/status/series?minutes="+bad); code != 400 {
			t.Errorf("minutes=%s: %d, want 400", bad, code)
		}
	}
	code, page := testproc.Get(t, s.Addr()+"/")
	if code != 200 {
		t.Fatalf("GET /: %d", code)
	}
	id := s.Member().Member().ID
	for _, want := range []string{`<tr class="this"><td>0</td><td><code>` + id + `</code></td><td><code>` + s.Addr() + `</code>`,
		`<b id="t-instances">1</b>`, `<script src="/status/page.js" defer></script>`, `id="chart-throughput"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	code, js := testproc.Get(t, s.Addr()+"/status/page.js")
	if code != 200 || !strings.Contains(js, "__nimbusCharts") {
		t.Errorf("GET /status/page.js: %d", code)
	}
}

// BenchmarkSampleMetrics is the cost of one tick of the page's sampler
// (a Gather of the whole registry, the coordinator's members): paid once
// a second, off the request paths.
func BenchmarkSampleMetrics(b *testing.B) {
	s := startPageServer(b, 1<<20)
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		s.sample(now.Add(time.Duration(i) * time.Second))
	}
}

// TestClusterForPageDeployments: every deployment is listed, one with no
// instance too (the instances chart draws it at 0), and this server is in
// its own.
func TestClusterForPageDeployments(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	cfg.Deployments, cfg.Deployment = 3, 1
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	c := s.clusterForPage(context.Background())
	if len(c.Deployments) != 3 || len(c.Deployments[0].Instances) != 0 || len(c.Deployments[2].Instances) != 0 ||
		len(c.Deployments[1].Instances) != 1 || !c.Deployments[1].Instances[0].This || c.Deployments[2].Name != "d2" {
		t.Errorf("cluster %+v", c)
	}
	s.sample(time.Now())
	s.sample(time.Now().Add(time.Second))
	got := s.page.series.Series(time.Time{}, 1).Instances
	if len(got) != 3 || got["0"][0] != 0 || got["1"][0] != 1 {
		t.Errorf("instances %v", got)
	}
}
