package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// TestFSThroughGateway: `nimbus fs` and client.Dial, unchanged, through
// the gateway of `nimbus serve --platform local --hosting process
// --deployments 2` on PostgreSQL and etcd: Dial finds a gateway (its
// /rpc/conn answer says so) and turns hybrid; mkdir, put, ls and cat work;
// a Go client's later requests go over the instances' TCP connect-backs,
// and the instances' caches answer stats.
func TestFSThroughGateway(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process", "--deployments", "2",
		"--concurrency", "4", "--min-instances", "1", "--keep-alive", "10s")...)
	s := newServer(t, gw)

	s.ok("fs", "mkdir", "-p", "/gw/a", "/gw/b")
	local := filepath.Join(t.TempDir(), "hello.txt")
	if err := os.WriteFile(local, []byte("hello through the gateway\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("fs", "put", local, "/gw/a/hello.txt")
	if got := s.ok("fs", "cat", "/gw/a/hello.txt"); got != "hello through the gateway\n" {
		t.Fatalf("cat: %q", got)
	}
	ls := s.ok("fs", "ls", "-R", "/gw")
	for _, want := range []string{"/gw/a", "/gw/b", "/gw/a/hello.txt"} {
		if !strings.Contains(ls, want) {
			t.Fatalf("ls -R /gw lacks %s:\n%s", want, ls)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := meta.User{Name: "root"}
	c, err := client.Dial(ctx, gw.URL(), client.Options{}) // no Hybrid: Dial finds out
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.HybridStats().Gateway {
		t.Fatalf("Dial did not report a gateway: %+v", c.HybridStats())
	}
	for i := 0; ; i++ {
		for _, p := range []string{"/gw/a", "/gw/b", "/gw/a/hello.txt"} {
			if _, err := c.Stat(ctx, u, p); err != nil {
				t.Fatal(err)
			}
		}
		if c.HybridStats().TCP >= 30 {
			break
		}
		if i == 500 {
			t.Fatalf("no requests over TCP after 500 rounds: %+v", c.HybridStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 10 {
		if err := c.Mkdirs(ctx, u, fmt.Sprintf("/gw/b/d%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.List(ctx, u, "/gw/b", "", 0)
	if err != nil || len(l.Entries) != 10 {
		t.Fatalf("listing /gw/b: %v, %v", l, err)
	}
	hs := c.HybridStats()
	cs := clusterStatus(t, gw.URL())
	hits := 0.0
	for _, d := range cs.Deployments {
		for _, in := range d.Instances {
			if in.CacheHitRatio != nil {
				hits = max(hits, *in.CacheHitRatio)
			}
		}
	}
	t.Logf("hybrid client: %+v; best instance cache hit ratio %.2f; cluster totals %+v", hs, hits, cs.Totals)
	if hs.TCP == 0 || hs.Callbacks == 0 {
		t.Fatalf("no connect-back used: %+v", hs)
	}
	if !(hits > 0) {
		t.Fatalf("no cache hits on any instance: %+v", cs)
	}
}

// TestHybridTCPVersusHTTP measures what the hybrid RPC buys (the
// target: a stat over TCP at most a fifth of one over HTTP, at p50): 2,000
// sequential stats of a cached path through `nimbus serve --platform
// local`'s gateway, by two hybrid clients of one process, interleaved in
// rounds of 100: one whose requests go over its instance's TCP
// connect-back (HTTPShare < 0), one whose requests all go as HTTP
// invocations through the gateway (HTTPShare 1). p50 and p99 of each and
// their ratio (t.Log only).
func TestHybridTCPVersusHTTP(t *testing.T) {
	gw := testproc.Start(t, binary, "", "", platformArgs(t, "--platform", "local", "--hosting", "process",
		"--concurrency", "8", "--min-instances", "1", "--keep-alive", "1m")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := meta.User{Name: "root"}
	dial := func(share float64) *client.Client {
		c, err := client.Dial(ctx, gw.URL(), client.Options{Hybrid: true, HTTPShare: share, ThrashFactor: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	tcp, http := dial(-1), dial(1)
	if err := tcp.Mkdirs(ctx, u, "/lat", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; tcp.HybridStats().TCP < 10; i++ {
		if _, err := tcp.Stat(ctx, u, "/lat"); err != nil {
			t.Fatal(err)
		}
		if i == 1000 {
			t.Fatalf("no connect-back: %+v", tcp.HybridStats())
		}
		time.Sleep(time.Millisecond)
	}
	var overTCP, overHTTP []float64
	const rounds, each = 20, 100
	for range rounds {
		for _, side := range []struct {
			c   *client.Client
			out *[]float64
		}{{tcp, &overTCP}, {http, &overHTTP}} {
			for range each {
				begun := time.Now()
				if _, err := side.c.Stat(ctx, u, "/lat"); err != nil {
					t.Fatal(err)
				}
				*side.out = append(*side.out, ms(time.Since(begun)))
			}
		}
	}
	ts, hs := tcp.HybridStats(), http.HybridStats()
	// The TCP client's invocations: its first, and one per instance it
	// meets (the policy may start one under its load): a few, not a share.
	if ts.HTTP*100 > ts.TCP || hs.TCP > 0 {
		t.Fatalf("the paths mixed: TCP client %+v, HTTP client %+v", ts, hs)
	}
	slices.Sort(overTCP)
	slices.Sort(overHTTP)
	n := len(overTCP)
	p50t, p99t, p50h, p99h := overTCP[n/2], overTCP[n*99/100], overHTTP[n/2], overHTTP[n*99/100]
	t.Logf("stat through the gateway's platform, %d each, interleaved: over the TCP connect-back p50 %.3f ms p99 %.3f ms; as HTTP invocations through the gateway p50 %.3f ms p99 %.3f ms; TCP/HTTP at p50 %.2f (1/%.1f)",
		n, p50t, p99t, p50h, p99h, p50t/p50h, p50h/p50t)
}
