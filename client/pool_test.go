package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// TestPoolPrefersIdleConnections checks how requests are spread over the
// pool: one caller at a time stays on one connection, and callers whose
// requests are under way together each get a connection of their own while
// the pool has idle ones.
func TestPoolPrefersIdleConnections(t *testing.T) {
	fs := metatest.NewMemFS()
	ctx := context.Background()
	fs.Mkdirs(ctx, root, "/x", 0)
	p := newProxy(t, serve(t, fs, nil))
	c := dial(t, p.addr(), client.Options{Conns: 4})

	used := func(before []int64) (n int) {
		after := p.sent()
		if len(after) != 4 {
			t.Fatalf("%d connections, want 4", len(after))
		}
		for i := range after {
			if after[i] > before[i] {
				n++
			}
		}
		return n
	}

	before := p.sent()
	for range 20 {
		if _, err := c.Stat(ctx, root, "/x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := used(before); n != 1 {
		t.Fatalf("20 stats one after another used %d connections, want 1", n)
	}

	// Three stats held by the server at once: each finds an idle connection.
	var mu sync.Mutex
	held, release := 0, make(chan struct{})
	arrived := make(chan struct{}, 3)
	fs.Hook = func(ctx context.Context, m string) error {
		mu.Lock()
		hold := held < 3
		held++
		mu.Unlock()
		if hold {
			arrived <- struct{}{}
			<-release
		}
		return nil
	}
	before = p.sent()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Stat(ctx, root, "/x")
			errs <- err
		}()
		// The next caller starts once this one's request is held. (A short
		// request runs on the server's reader of its connection: a second
		// one sent on the same connection would never arrive.)
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("a stat sent while another was held never reached the server: both were sent on one connection")
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := used(before); n != 3 {
		t.Errorf("3 stats under way at once used %d connections, want 3 (bytes sent per connection before %v, after %v)", n, before, p.sent())
	}
}
