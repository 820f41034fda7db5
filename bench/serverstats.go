package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nimbus-fs/nimbus/internal/cost"
)

// ServerStats are what the server counted itself over one measured run,
// read from its metrics endpoint just before the clients start and just
// after the last one stops. The CPU is the server process's, so it holds
// whatever else that process did meanwhile (nothing, in bench-all.sh).
type ServerStats struct {
	Source     string  `json:"source"`        // the endpoint read
	CPUSeconds float64 `json:"cpu_s"`         // process CPU (user + system) over the run
	CPUUsPerOp float64 `json:"cpu_us_per_op"` // cpu_s / successful operations
	// Nimbus only (HDFS's edit-log counters reach JMX through a cache that
	// lags by up to ten seconds, too coarse for a run of a few).
	Commits      float64 `json:"commits,omitempty"`        // durable store commits
	LogSyncs     float64 `json:"log_syncs,omitempty"`      // write-ahead log fsyncs
	CommitMsMean float64 `json:"commit_ms_mean,omitempty"` // mean commit: batch apply to synced
	// SharedProcess: the server ran inside the driver (the embedded
	// target), so its CPU and the driver's are the same figure.
	SharedProcess bool `json:"shared_process,omitempty"`
}

// counters is one reading of a server's cumulative counters; NaN where the
// server has none.
type counters struct {
	cpu, commits, syncs, commitSum, commitCount float64
}

// ServerProbe reads a server's counters from its metrics endpoint: a
// Prometheus text endpoint (Nimbus's /metrics), or a Hadoop JMX URL (any
// /jmx?... of the server: the OperatingSystem bean is read).
type ServerProbe struct {
	URL string
}

// NewServerProbe returns nil for an empty URL: no probe. For a JMX URL it
// reads the OperatingSystem bean of the same server.
func NewServerProbe(url string) *ServerProbe {
	if url == "" {
		return nil
	}
	if base, _, ok := strings.Cut(url, "/jmx"); ok {
		url = base + jmxOS
	}
	return &ServerProbe{URL: url}
}

const jmxOS = "/jmx?qry=java.lang:type=OperatingSystem"

func (p *ServerProbe) read(ctx context.Context) (counters, error) {
	nan := math.NaN()
	c := counters{nan, nan, nan, nan, nan}
	if strings.HasSuffix(p.URL, jmxOS) {
		resp, err := getOK(ctx, httpClientForSamples, p.URL)
		if err != nil {
			return c, fmt.Errorf("bench: server counters: %w", err)
		}
		defer resp.Body.Close()
		var jmx struct {
			Beans []struct {
				ProcessCPUTime *float64 `json:"ProcessCpuTime"` // ns
			} `json:"beans"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&jmx); err != nil {
			return c, fmt.Errorf("bench: server counters: %s: %w", p.URL, err)
		}
		for _, b := range jmx.Beans {
			if b.ProcessCPUTime != nil {
				c.cpu = *b.ProcessCPUTime / 1e9
				return c, nil
			}
		}
		return c, fmt.Errorf("bench: server counters: no ProcessCpuTime at %s", p.URL)
	}
	resp, err := getOK(ctx, httpClientForSamples, p.URL)
	if err != nil {
		return c, fmt.Errorf("bench: server counters: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return c, fmt.Errorf("bench: server counters: %s: %w", p.URL, err)
	}
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			return nan
		}
		m := f.Metric[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		return nan
	}
	c.cpu = value("process_cpu_seconds_total")
	c.commits = value("nimbus_pebblestore_commits_total")
	c.syncs = value("nimbus_pebblestore_wal_syncs_total")
	if f := fams["nimbus_pebblestore_commit_seconds"]; f != nil && len(f.Metric) > 0 && f.Metric[0].Histogram != nil {
		h := f.Metric[0].Histogram
		c.commitSum, c.commitCount = h.GetSampleSum(), float64(h.GetSampleCount())
	}
	if math.IsNaN(c.cpu) {
		return c, fmt.Errorf("bench: server counters: no process_cpu_seconds_total at %s", p.URL)
	}
	return c, nil
}

// stats turns two readings around a run of ops successful operations into
// ServerStats.
func (p *ServerProbe) stats(before, after counters, ops int64) *ServerStats {
	s := &ServerStats{Source: p.URL, CPUSeconds: after.cpu - before.cpu}
	if ops > 0 {
		s.CPUUsPerOp = s.CPUSeconds * 1e6 / float64(ops)
	}
	known := func(v float64) float64 {
		if math.IsNaN(v) || v < 0 {
			return 0
		}
		return v
	}
	s.Commits = known(after.commits - before.commits)
	s.LogSyncs = known(after.syncs - before.syncs)
	if n := known(after.commitCount - before.commitCount); n > 0 {
		s.CommitMsMean = known(after.commitSum-before.commitSum) * 1000 / n
	}
	return s
}

// processCPU is this process's CPU time (user + system), for the driver's
// own cost per operation; 0 if the kernel will not say.
func processCPU() time.Duration {
	d, _ := cost.ProcessCPU()
	return d
}
