package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
)

// BenchmarkHybridStat compares, in one run, a stat of a depth-7 path on
// the real engine over the hybrid client's TCP connection (the instance's
// connect-back) with the same stat as an HTTP invocation, through a
// gateway (the platform's path: client -> gateway -> instance) and straight
// to the server's /rpc/call (a plain server standing for one instance).
// Each iteration makes one of each, one caller at a time; it reports the
// medians and their ratios (tcp/http: the issue asks for at most 0.2).
func BenchmarkHybridStat(b *testing.B) {
	srv := serve(b, engine(b), nil)
	g := newGateway(b, map[int]string{0: srv})
	ctx := context.Background()
	p := "/a/b/c/d/e/f/g"
	opts := func(share float64) client.Options {
		o := hybridOpts(share)
		o.StragglerFactor = 0 // the default, as the pool has it
		return o
	}
	tcp := dial(b, g.hs.URL, opts(-1))
	viaGateway := dial(b, g.hs.URL, opts(1))
	direct := dial(b, srv, opts(1))
	pooled := dial(b, srv, client.Options{Conns: 1}) // the non-hybrid client, for reference
	if err := tcp.Mkdirs(ctx, root, p, 0o755); err != nil {
		b.Fatal(err)
	}
	awaitTCP(b, tcp, 0)
	clients := []*client.Client{tcp, viaGateway, direct, pooled}
	for _, c := range clients { // warm the HTTP connections and caches
		for range 100 {
			if _, err := c.Stat(ctx, root, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	s0 := []client.HybridStats{tcp.HybridStats(), viaGateway.HybridStats(), direct.HybridStats()}
	copies0, _ := tcp.Stragglers()
	lat := make([][]time.Duration, len(clients))
	b.ReportAllocs()
	for b.Loop() {
		for i, c := range clients {
			t0 := time.Now()
			if _, err := c.Stat(ctx, root, p); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	b.StopTimer()
	copies, _ := tcp.Stragglers()
	if d := delta(s0[0], tcp.HybridStats()); d.HTTP != copies-copies0 {
		b.Fatalf("TCP client sent %d over HTTP, %d of them straggler copies", d.HTTP, copies-copies0)
	}
	if d := delta(s0[1], viaGateway.HybridStats()); d.TCP != 0 {
		b.Fatalf("HTTP client sent %d over TCP", d.TCP)
	}
	p50 := make([]float64, len(clients))
	for i, l := range lat {
		slices.Sort(l)
		p50[i] = float64(l[len(l)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50[0], "tcp-p50-µs")
	b.ReportMetric(p50[1], "gateway-http-p50-µs")
	b.ReportMetric(p50[2], "direct-http-p50-µs")
	b.ReportMetric(p50[3], "pool-tcp-p50-µs")
	b.ReportMetric(p50[0]/p50[1], "tcp/gateway-http")
	b.ReportMetric(p50[0]/p50[2], "tcp/direct-http")
}
