package webhdfs

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probe tells which server answers WebHDFS at addr ("http://host:port") by
// its other endpoints: a Prometheus /metrics with
// process_resident_memory_bytes is Nimbus ("nimbus-webhdfs"), a Hadoop /jmx is
// HDFS ("hdfs-webhdfs"); anything else is "webhdfs". metricsURL is where the
// server's memory can be sampled ("" when nowhere).
func Probe(ctx context.Context, addr string) (system, metricsURL string) {
	hc := &http.Client{Timeout: 3 * time.Second}
	base := strings.TrimRight(addr, "/")
	get := func(u string) (string, bool) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", false
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return string(b), resp.StatusCode == http.StatusOK
	}
	if body, ok := get(base + "/metrics"); ok && strings.Contains(body, "process_resident_memory_bytes") {
		return "nimbus-webhdfs", base + "/metrics"
	}
	jmx := base + "/jmx?qry=java.lang:type=Memory"
	if body, ok := get(jmx); ok && strings.Contains(body, "HeapMemoryUsage") {
		return "hdfs-webhdfs", jmx
	}
	return "webhdfs", ""
}
