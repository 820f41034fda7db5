package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A Prometheus endpoint whose counters advance by a fixed step per scrape.
func promServer(t *testing.T) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := float64(n.Add(1) - 1)
		fmt.Fprintf(w, `# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total %g
# TYPE nimbus_pebblestore_commits_total counter
nimbus_pebblestore_commits_total %g
# TYPE nimbus_pebblestore_wal_syncs_total counter
nimbus_pebblestore_wal_syncs_total %g
# TYPE nimbus_pebblestore_commit_seconds histogram
nimbus_pebblestore_commit_seconds_bucket{le="+Inf"} %g
nimbus_pebblestore_commit_seconds_sum %g
nimbus_pebblestore_commit_seconds_count %g
`, 10+2*k, 100+1000*k, 50+250*k, 100+1000*k, 1+0.5*k, 100+1000*k)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestServerProbePrometheus(t *testing.T) {
	srv := promServer(t)
	p := NewServerProbe(srv.URL + "/metrics")
	m, err := Run(context.Background(), RunConfig{Clients: 2, OpsPerClient: 500, Probe: p}, func(int) Op {
		return OpFunc(func(context.Context) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Server
	if s == nil {
		t.Fatalf("no server stats (error %q)", m.ServerError)
	}
	// One scrape before, one after: cpu +2 s, 1000 commits in 250 syncs
	// taking 0.5 s together, over 1000 operations.
	if s.CPUSeconds != 2 || s.CPUUsPerOp != 2000 || s.Commits != 1000 || s.LogSyncs != 250 || s.CommitMsMean != 0.5 {
		t.Fatalf("server stats = %+v", *s)
	}
}

func TestServerProbeJMX(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.RawQuery, "java.lang:type=OperatingSystem") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"beans":[{"name":"java.lang:type=OperatingSystem","ProcessCpuTime":%d,"AvailableProcessors":2}]}`,
			3_000_000_000*(n.Add(1)-1)+5)
	}))
	defer srv.Close()
	p := NewServerProbe(srv.URL + "/jmx?qry=java.lang:type=Memory")
	m, err := Run(context.Background(), RunConfig{Clients: 1, OpsPerClient: 300, Probe: p}, func(int) Op {
		return OpFunc(func(context.Context) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Server == nil || m.Server.CPUSeconds != 3 || m.Server.CPUUsPerOp != 10000 || m.Server.Commits != 0 {
		t.Fatalf("server stats = %+v (error %q)", m.Server, m.ServerError)
	}
}

func TestServerProbeFailureIsReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "go_goroutines 12")
	}))
	defer srv.Close()
	m, err := Run(context.Background(), RunConfig{Clients: 1, OpsPerClient: 10, Probe: NewServerProbe(srv.URL + "/metrics")},
		func(int) Op { return OpFunc(func(context.Context) error { return nil }) })
	if err != nil {
		t.Fatal(err)
	}
	if m.Server != nil || !strings.Contains(m.ServerError, "process_cpu_seconds_total") {
		t.Fatalf("server = %+v, error %q; want none and an error naming the missing counter", m.Server, m.ServerError)
	}
	if m.Ops != 10 {
		t.Fatalf("ops = %d: a failed probe must not stop the run", m.Ops)
	}
}
