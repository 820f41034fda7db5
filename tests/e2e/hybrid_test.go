package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// TestHybridAgainstBinary: a hybrid client (Options.Hybrid) against the
// real `nimbus serve`, whose /rpc/call stands for one instance: the first
// request is an HTTP invocation, the server connects back, and later
// requests go over that connection. The server is then killed and
// restarted on the same data and address: the next request finds the
// connection broken, goes as an invocation, retried while the server is
// down, and the restarted server connects back again.
func TestHybridAgainstBinary(t *testing.T) {
	s := startServer(t, t.TempDir(), "")
	ctx := context.Background()
	u := meta.User{Name: "root"}
	c, err := client.Dial(ctx, s.url(), client.Options{Hybrid: true, HTTPShare: -1, ThrashFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mkdirs(ctx, u, "/h", 0o755); err != nil {
		t.Fatal(err)
	}
	awaitConn := func() {
		t.Helper()
		for i := 0; ; i++ {
			st := c.HybridStats()
			if _, err := c.Stat(ctx, u, "/h"); err != nil {
				t.Fatal(err)
			}
			if c.HybridStats().TCP > st.TCP {
				return
			}
			if i == 500 {
				t.Fatalf("no request over TCP after 5 s: %+v\n%s", c.HybridStats(), s.log.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	awaitConn()
	s0 := c.HybridStats()
	for i := range 20 {
		if err := c.Mkdirs(ctx, u, fmt.Sprintf("/h/d%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s1 := c.HybridStats()
	if s1.TCP-s0.TCP != 20 || s1.HTTP != s0.HTTP || s1.Callbacks < 1 || s1.DirectFallbacks != 0 {
		t.Fatalf("20 mkdirs after the connect-back: %+v then %+v", s0, s1)
	}

	s.kill()
	done := make(chan error, 1)
	go func() { done <- c.Mkdirs(ctx, u, "/h/after", 0o755) }()
	time.Sleep(100 * time.Millisecond) // the mkdirs retries against a dead address meanwhile
	s2 := startServer(t, s.data, s.addr)
	if err := <-done; err != nil {
		t.Fatalf("mkdirs across the restart: %v\n%s", err, s2.log.String())
	}
	st := c.HybridStats()
	if st.HTTPRetries == s1.HTTPRetries {
		t.Logf("the restarted server was up before the first retry: %+v", st)
	}
	s = s2
	awaitConn()
	l, err := c.List(ctx, u, "/h", "", 0)
	if err != nil || len(l.Entries) != 21 {
		t.Fatalf("listing after the restart: %v entries, %v", l, err)
	}
}
