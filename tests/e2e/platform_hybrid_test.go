package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
