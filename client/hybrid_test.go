package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
)

// gateway is a test platform gateway after the contract of `nimbus serve
// --platform local`: it forwards an invocation (POST /rpc/call, its body
// and Nimbus-* headers) to the instance of the deployment named by
// Nimbus-Deployment, and passes the answer back with Nimbus-Instance.
type gateway struct {
	hs        *httptest.Server
	instances map[int]string // deployment -> instance base URL
	// busy answers the next invocations 503 without forwarding them;
	// lost forwards the next ones and answers 502, as a gateway whose
	// instance died after running the request would.
	busy, lost  atomic.Int64
	invocations atomic.Int64 // forwarded
}

func newGateway(t testing.TB, instances map[int]string) *gateway {
	g := &gateway{instances: instances}
	hc := &http.Client{}
	g.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if g.busy.Add(-1) >= 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		g.busy.Store(0)
		d, _ := strconv.Atoi(r.Header.Get(rpc.HeaderDeployment))
		base, ok := g.instances[d]
		if !ok {
			http.Error(w, "no such deployment", http.StatusNotFound)
			return
		}
		fwd, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, base+rpc.CallPath, bytes.NewReader(body))
		for k, v := range r.Header {
			if strings.HasPrefix(k, "Nimbus-") || k == "Content-Type" {
				fwd.Header[k] = v
			}
		}
		g.invocations.Add(1)
		resp, err := hc.Do(fwd)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if g.lost.Add(-1) >= 0 || err != nil {
			http.Error(w, "instance died", http.StatusBadGateway)
			return
		}
		g.lost.Store(0)
		for k, v := range resp.Header {
			if strings.HasPrefix(k, "Nimbus-") || k == "Content-Type" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(out)
	}))
	t.Cleanup(g.hs.Close)
	return g
}

// hybridOpts are the options of the tests' hybrid clients: anti-thrashing
// and straggler copies off unless a test is about them, since real
// latencies (under -race, on a loaded machine) would trip them and move
// requests between the paths the tests count.
func hybridOpts(share float64) client.Options {
	return client.Options{Hybrid: true, HTTPShare: share, ThrashFactor: -1, StragglerFactor: -1}
}

// awaitTCP waits until c has a connection to an instance of deployment d.
func awaitTCP(t testing.TB, c *client.Client, d int) {
	t.Helper()
	for i := 0; !c.HasTCP(d); i++ {
		if i == 1000 {
			t.Fatalf("no connection to deployment %d after 10 s: %+v", d, c.HybridStats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stats(t *testing.T, c *client.Client, n int, p string) {
	t.Helper()
	for range n {
		if _, err := c.Stat(context.Background(), root, p); err != nil {
			t.Fatal(err)
		}
	}
}

func delta(a, b client.HybridStats) client.HybridStats {
	return client.HybridStats{TCP: b.TCP - a.TCP, HTTP: b.HTTP - a.HTTP, Callbacks: b.Callbacks - a.Callbacks,
		CallbacksRefused: b.CallbacksRefused - a.CallbacksRefused, DirectFallbacks: b.DirectFallbacks - a.DirectFallbacks,
		Resubmissions: b.Resubmissions - a.Resubmissions, HTTPRetries: b.HTTPRetries - a.HTTPRetries,
		Thrashing: b.Thrashing - a.Thrashing, Rerouted: b.Rerouted - a.Rerouted}
}

// The first request goes over HTTP and the instance connects back; later
// requests travel over that connection, and a second client of the process
// uses the same connection after its own first invocation.
func TestHybridConnectBack(t *testing.T) {
	srv := serve(t, engine(t), nil)
	g := newGateway(t, map[int]string{0: srv})
	c := dial(t, g.hs.URL, hybridOpts(-1))
	ctx := context.Background()
	s0 := c.HybridStats()
	if err := c.Mkdirs(ctx, root, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if d := delta(s0, c.HybridStats()); d.HTTP != 1 || d.TCP != 0 {
		t.Fatalf("first request: %+v, want one over HTTP", d)
	}
	awaitTCP(t, c, 0)
	s1 := c.HybridStats()
	inv := g.invocations.Load()
	stats(t, c, 50, "/a")
	if d := delta(s1, c.HybridStats()); d.TCP != 50 || d.HTTP != 0 || d.DirectFallbacks != 0 {
		t.Fatalf("50 stats after the connect-back: %+v, want 50 over TCP", d)
	}
	if d := delta(s0, c.HybridStats()); d.Callbacks < 1 || d.DirectFallbacks != 0 {
		t.Fatalf("no connect-back counted: %+v", d)
	}
	if n := g.invocations.Load() - inv; n != 0 {
		t.Fatalf("%d invocations reached the gateway over TCP", n)
	}

	// Another client of the process: one invocation to learn the instance,
	// then the shared connection, with no new connect-back.
	c2 := dial(t, g.hs.URL, hybridOpts(-1))
	s2 := c2.HybridStats()
	stats(t, c2, 1, "/a")
	if !c2.HasTCP(0) {
		t.Fatal("the second client does not see the process's connection")
	}
	stats(t, c2, 10, "/a")
	if d := delta(s2, c2.HybridStats()); d.HTTP != 1 || d.TCP != 10 || d.Callbacks != 0 {
		t.Fatalf("second client: %+v, want 1 over HTTP, 10 over TCP, no new connect-back", d)
	}
}

// HTTPShare sends that share of the requests that have a connection over
// HTTP all the same: none at p=0, all at p=1, some of each in between.
func TestHybridShare(t *testing.T) {
	srv := serve(t, engine(t), nil)
	g := newGateway(t, map[int]string{0: srv})
	for _, p := range []float64{-1, 1, 0.5} {
		c := dial(t, g.hs.URL, hybridOpts(p))
		stats(t, c, 1, "/")
		awaitTCP(t, c, 0)
		s := c.HybridStats()
		stats(t, c, 200, "/")
		d := delta(s, c.HybridStats())
		switch {
		case p < 0 && (d.TCP != 200 || d.HTTP != 0),
			p == 1 && (d.TCP != 0 || d.HTTP != 200),
			p == 0.5 && (d.TCP == 0 || d.HTTP == 0 || d.TCP+d.HTTP != 200):
			t.Fatalf("HTTPShare %v: %d over TCP, %d over HTTP of 200", p, d.TCP, d.HTTP)
		}
		t.Logf("HTTPShare %v: %d over TCP, %d over HTTP", p, d.TCP, d.HTTP)
	}
}

// An instance that does not connect back is dialled directly after
// CallbackWait, and the fallback counted; with the fallback off
// (CallbackWait < 0) every request stays on HTTP.
func TestHybridDirectFallback(t *testing.T) {
	for _, on := range []bool{true, false} {
		// A server each: the process shares the connection dialled to one.
		srv := serveWith(t, engine(t), rpc.ServerOptions{NoConnectBack: true})
		g := newGateway(t, map[int]string{0: srv})
		opts := hybridOpts(-1)
		opts.CallbackWait = 20 * time.Millisecond
		if !on {
			opts.CallbackWait = -1
		}
		c := dial(t, g.hs.URL, opts)
		s := c.HybridStats()
		stats(t, c, 1, "/")
		if on {
			awaitTCP(t, c, 0)
		}
		stats(t, c, 20, "/")
		d := delta(s, c.HybridStats())
		if on && (d.DirectFallbacks != 1 || d.Callbacks != 0 || d.TCP != 20) {
			t.Fatalf("fallback on: %+v, want one direct connection carrying 20 stats", d)
		}
		if !on && (d.DirectFallbacks != 0 || d.TCP != 0 || d.HTTP != 21) {
			t.Fatalf("fallback off: %+v, want every stat over HTTP", d)
		}
	}
}

// gateFS holds the first execution of each create until released, and a
// resubmission of it until the first has finished; the first runs whatever
// became of its connection (its context's cancellation is dropped), so
// that its reply is lost with the connection after the write was applied.
type gateFS struct {
	*namespace.Engine
	release  chan struct{}
	entered  atomic.Int64
	finished atomic.Int64 // first executions done
	mu       sync.Mutex
	done     map[string]chan struct{}
}

func (f *gateFS) Create(ctx context.Context, u meta.User, p string, o meta.CreateOptions) (*meta.FileStatus, error) {
	r, _ := meta.RequestFrom(ctx)
	f.mu.Lock()
	ch, again := f.done[p]
	if !again {
		ch = make(chan struct{})
		f.done[p] = ch
	}
	f.mu.Unlock()
	if again {
		<-ch
		return f.Engine.Create(ctx, u, p, o)
	}
	f.entered.Add(1)
	<-f.release
	defer close(ch)
	defer f.finished.Add(1)
	if r.Resubmitted {
		panic("first execution flagged resubmitted")
	}
	return f.Engine.Create(context.WithoutCancel(ctx), u, p, o)
}

// Creates in flight on a connection that drops are resubmitted (over HTTP,
// the only path left) and complete; each file is created once. With
// resubmission off the callers get outcome-unknown errors.
func TestHybridResubmitOnDrop(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("resubmit=%v", on), func(t *testing.T) {
			e := engine(t)
			fs := &gateFS{Engine: e, release: make(chan struct{}), done: map[string]chan struct{}{}}
			srv := serve(t, fs, nil)
			g := newGateway(t, map[int]string{0: srv})
			opts := hybridOpts(-1)
			opts.Resubmits = 2
			if !on {
				opts.Resubmits = -1
			}
			c := dial(t, g.hs.URL, opts)
			ctx := context.Background()
			if err := c.Mkdirs(ctx, root, "/d", 0o755); err != nil {
				t.Fatal(err)
			}
			awaitTCP(t, c, 0)
			s := c.HybridStats()
			const n = 8
			errs := make(chan error, n)
			for i := range n {
				go func() {
					_, err := c.Create(ctx, root, fmt.Sprintf("/d/f%d", i), meta.CreateOptions{Client: c.ClientName()})
					errs <- err
				}()
			}
			for fs.entered.Load() < n {
				time.Sleep(time.Millisecond)
			}
			if d := delta(s, c.HybridStats()); d.TCP != n {
				t.Fatalf("creates: %+v, want %d over TCP", d, n)
			}
			if k := c.DropTCP(); k == 0 {
				t.Fatal("no connection to drop")
			}
			close(fs.release)
			for range n {
				err := <-errs
				if on && err != nil {
					t.Fatalf("create resubmitted after the drop: %v", err)
				}
				if !on && !errors.Is(err, meta.ErrOutcomeUnknown) {
					t.Fatalf("create with resubmission off: %v, want outcome unknown", err)
				}
			}
			for fs.finished.Load() < n {
				time.Sleep(time.Millisecond)
			}
			d := delta(s, c.HybridStats())
			if on && d.Resubmissions != n {
				t.Fatalf("%+v: want %d resubmissions", d, n)
			}
			if !on && d.Resubmissions != 0 {
				t.Fatalf("%+v: resubmissions with them off", d)
			}
			l, err := e.List(ctx, root, "/d", "", 0)
			if err != nil || len(l.Entries) != n {
				t.Fatalf("listing of /d: %v entries, %v; want %d files", l, err, n)
			}
			if rep, err := e.Fsck(ctx); err != nil || !rep.Clean() {
				t.Fatalf("fsck: %v %v", err, rep)
			}
		})
	}
}

// A 502 (the instance died after running the request) is resubmitted with
// its flag and answered from the record: the create succeeds once. With
// resubmission off the caller hears outcome unknown.
func TestHybridBadGatewayResubmits(t *testing.T) {
	for _, on := range []bool{true, false} {
		srv := serve(t, engine(t), nil)
		g := newGateway(t, map[int]string{0: srv})
		opts := hybridOpts(1) // every request over HTTP
		opts.HTTPRetryBase = time.Millisecond
		if !on {
			opts.Resubmits = -1
		}
		c := dial(t, g.hs.URL, opts)
		ctx := context.Background()
		g.lost.Store(1)
		_, err := c.Create(ctx, root, "/f", meta.CreateOptions{Client: c.ClientName()})
		if on && err != nil {
			t.Fatalf("create after a 502: %v", err)
		}
		if !on && !errors.Is(err, meta.ErrOutcomeUnknown) {
			t.Fatalf("create after a 502 without resubmission: %v, want outcome unknown", err)
		}
		if _, err := c.Stat(ctx, root, "/f"); err != nil {
			t.Fatalf("the create was not applied: %v", err)
		}
		if got := c.HybridStats().Resubmissions; (on && got != 1) || (!on && got != 0) {
			t.Fatalf("resubmissions %d", got)
		}
	}
}

// Busy answers (503) are retried with backoff until one gets through;
// with retries off the busy error surfaces; past the deadline the call
// fails busy.
func TestHybridHTTPRetries(t *testing.T) {
	srv := serve(t, engine(t), nil)
	g := newGateway(t, map[int]string{0: srv})
	opts := hybridOpts(1)
	opts.HTTPRetryBase, opts.HTTPRetryMax = time.Millisecond, 4*time.Millisecond
	c := dial(t, g.hs.URL, opts)
	ctx := context.Background()

	g.busy.Store(5)
	if _, err := c.Stat(ctx, root, "/"); err != nil {
		t.Fatalf("stat after 5 busy answers: %v", err)
	}
	if n := c.HybridStats().HTTPRetries; n != 5 {
		t.Fatalf("%d retries, want 5", n)
	}

	opts.HTTPRetryDeadline = -1
	off := dial(t, g.hs.URL, opts)
	g.busy.Store(1)
	if _, err := off.Stat(ctx, root, "/"); !errors.Is(err, meta.ErrBusy) {
		t.Fatalf("stat with retries off: %v, want busy", err)
	}
	if n := off.HybridStats().HTTPRetries; n != 0 {
		t.Fatalf("%d retries with retries off", n)
	}

	opts.HTTPRetryDeadline = 20 * time.Millisecond
	short := dial(t, g.hs.URL, opts)
	g.busy.Store(1 << 40)
	defer g.busy.Store(0)
	if _, err := short.Stat(ctx, root, "/"); !errors.Is(err, meta.ErrBusy) {
		t.Fatalf("stat busy past the deadline: %v, want busy", err)
	}
	if n := short.HybridStats().HTTPRetries; n == 0 {
		t.Fatal("no retry before the deadline")
	}
}

// The waits are full jitter: uniform in [0, min(max, base·2^n)).
func TestBackoffFullJitter(t *testing.T) {
	base, max := 10*time.Millisecond, time.Second
	for n := range 40 {
		bound := max
		if n < 7 {
			bound = base << n
		}
		if got := client.Backoff(n, base, max, 0); got != 0 {
			t.Fatalf("retry %d at u=0 waits %v, want 0", n, got)
		}
		if got := client.Backoff(n, base, max, 0.5); got != bound/2 {
			t.Fatalf("retry %d at u=0.5 waits %v, want %v", n, got, bound/2)
		}
		if got := client.Backoff(n, base, max, 0.999999); got >= bound || got < bound*99/100 {
			t.Fatalf("retry %d at u→1 waits %v, want just under %v", n, got, bound)
		}
	}
}

// stepClock is a clock whose every call pair (a call's start and end)
// spans step.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	n    int
	step time.Duration
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n%2 == 1 {
		c.t = c.t.Add(time.Hour)
		return c.t
	}
	return c.t.Add(c.step)
}

// With every request sent over HTTP (HTTPShare 1), a call ten times slower
// than the average turns anti-thrashing on: the following requests take
// the existing connection until ten in a row are back within the factor;
// then HTTP again. Off, they all stay on HTTP.
func TestHybridAntiThrashing(t *testing.T) {
	srv := serve(t, engine(t), nil)
	g := newGateway(t, map[int]string{0: srv})
	for _, on := range []bool{true, false} {
		clk := &stepClock{t: time.Unix(0, 0), step: time.Millisecond}
		opts := hybridOpts(1)
		opts.ThrashFactor, opts.Now = 2.5, clk.now
		if !on {
			opts.ThrashFactor = -1
		}
		c := dial(t, g.hs.URL, opts)
		stats(t, c, 1, "/")
		awaitTCP(t, c, 0)
		stats(t, c, 20, "/")
		s := c.HybridStats()
		if s.TCP != 0 || s.Thrashing != 0 {
			t.Fatalf("before the slow call: %+v", s)
		}
		clk.step = 10 * time.Millisecond
		stats(t, c, 1, "/")
		clk.step = time.Millisecond
		if c.Thrashing() != on {
			t.Fatalf("anti-thrashing %v after a call 10 times the average, want %v", c.Thrashing(), on)
		}
		n := 0
		for ; c.Thrashing() && n < 100; n++ {
			stats(t, c, 1, "/")
		}
		d := delta(s, c.HybridStats())
		// The first call over TCP starts its average; ten within it end
		// anti-thrashing.
		if on && (n != 11 || d.TCP != 11 || d.HTTP != 1 || d.Thrashing != 1) {
			t.Fatalf("anti-thrashing: %d calls while on, %+v", n, d)
		}
		stats(t, c, 5, "/")
		d = delta(s, c.HybridStats())
		if on && d.HTTP != 6 {
			t.Fatalf("after recovery: %+v, want HTTP again", d)
		}
		if !on && (d.TCP != 0 || d.Thrashing != 0) {
			t.Fatalf("anti-thrashing off: %+v", d)
		}
	}
}

// A hybrid client learns a directory's owner from a wrong-owner answer and
// sends its requests to that deployment (Nimbus-Deployment), then over the
// owner's connection; while anti-thrashing is on, a request for a
// deployment without a connection goes unrouted over another's.
func TestHybridRouted(t *testing.T) {
	fs, rs, addrs := twoRouted(t, false)
	ctx := context.Background()
	if err := fs.Mkdirs(ctx, root, "/b/x", 0o755); err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, map[int]string{0: addrs[0], 1: addrs[1]})
	c := dial(t, g.hs.URL, hybridOpts(-1))
	if _, err := c.Stat(ctx, root, "/b/x"); err != nil {
		t.Fatal(err)
	}
	if wrong, _ := c.RouteStats(); wrong != 1 || rs[0].refused.Load() != 1 || rs[1].refused.Load() != 0 {
		t.Fatalf("wrong-owner answers: client %d, servers %d %d; want 1, 1, 0", wrong, rs[0].refused.Load(), rs[1].refused.Load())
	}
	// Both instances connect back, each in its own time; the listing
	// below needs deployment 0's connection too.
	awaitTCP(t, c, 1)
	awaitTCP(t, c, 0)
	s := c.HybridStats()
	stats(t, c, 10, "/b/x")
	l, err := c.List(ctx, root, "/b", "", 0) // decoded through the view path
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Path != "/b/x" {
		t.Fatalf("listing of /b: %+v %v", l, err)
	}
	if d := delta(s, c.HybridStats()); d.TCP != 11 || d.HTTP != 0 {
		t.Fatalf("requests to the learnt owner: %+v, want 11 over TCP", d)
	}
	if wrong, owned := c.RouteStats(); wrong != 1 || owned != 11 || rs[1].refused.Load() != 0 {
		t.Fatalf("route stats %d, %d after the owner was learnt", wrong, owned)
	}
	// A listing of a directory not learnt yet goes over deployment 0's
	// connection, is refused there (an error answer decoded in place, then
	// copied out) and follows the owner.
	s = c.HybridStats()
	if err := fs.Mkdirs(ctx, root, "/b/x/y", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err = c.List(ctx, root, "/b/x", "", 0)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].Path != "/b/x/y" {
		t.Fatalf("listing of /b/x: %+v %v", l, err)
	}
	if d := delta(s, c.HybridStats()); d.TCP != 2 || d.HTTP != 0 {
		t.Fatalf("listing of an unlearnt directory: %+v, want 2 over TCP", d)
	}
	if wrong, _ := c.RouteStats(); wrong != 2 || rs[0].refused.Load() != 2 {
		t.Fatalf("wrong-owner answers %d, deployment 0 refused %d; want 2, 2", wrong, rs[0].refused.Load())
	}

	// Anti-thrashing: a fresh client knows deployment 0's instance only.
	clk := &stepClock{t: time.Unix(0, 0), step: time.Millisecond}
	opts := hybridOpts(1)
	opts.ThrashFactor, opts.Now = 2.5, clk.now
	c2 := dial(t, g.hs.URL, opts)
	stats(t, c2, 20, "/")
	clk.step = 10 * time.Millisecond
	stats(t, c2, 1, "/")
	clk.step = time.Millisecond
	if !c2.Thrashing() {
		t.Fatal("not thrashing after a slow call")
	}
	s = c2.HybridStats()
	if _, err := c2.Stat(ctx, root, "/b/x"); err != nil {
		t.Fatal(err)
	}
	// Over deployment 0's connection routed (refused), then unrouted over
	// it again: no invocation for deployment 1.
	if d := delta(s, c2.HybridStats()); d.Rerouted != 1 || d.HTTP != 0 || d.TCP != 2 {
		t.Fatalf("stat of another deployment's directory while thrashing: %+v, want it rerouted over TCP", d)
	}
}

// A stat stuck on the connect-back is sent again as an invocation after
// StragglerFactor times its average, and the copy answers; off, it waits.
func TestHybridStraggler(t *testing.T) {
	for _, on := range []bool{true, false} {
		fs := &stallFS{MemFS: metatest.NewMemFS(), release: make(chan struct{})}
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(fs.release) }) }
		defer release()
		ctx := context.Background()
		if err := fs.Mkdirs(ctx, root, "/slow", 0o755); err != nil {
			t.Fatal(err)
		}
		g := newGateway(t, map[int]string{0: serve(t, fs, nil)})
		opts := hybridOpts(-1)
		opts.StragglerFactor, opts.StragglerFloor = 10, time.Millisecond
		if !on {
			opts.StragglerFactor = -1
		}
		c := dial(t, g.hs.URL, opts)
		stats(t, c, 1, "/")
		awaitTCP(t, c, 0)
		stats(t, c, 50, "/") // the moving average of a stat
		sent0, won0 := c.Stragglers()
		s := c.HybridStats()
		done := make(chan error, 1)
		go func() {
			_, err := c.Stat(ctx, root, "/slow")
			done <- err
		}()
		select {
		case err := <-done:
			if !on {
				t.Fatalf("off: the stalled stat returned (%v) before the server let it go", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			sent, won := c.Stragglers()
			if d := delta(s, c.HybridStats()); sent-sent0 != 1 || won-won0 != 1 || d.HTTP != 1 {
				t.Fatalf("stragglers sent %d, won %d, %+v; want one copy over HTTP, which won", sent-sent0, won-won0, d)
			}
		case <-time.After(map[bool]time.Duration{true: 10 * time.Second, false: 300 * time.Millisecond}[on]):
			if on {
				t.Fatal("on: the stalled stat was not answered by a copy within 10 s")
			}
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if sent, _ := c.Stragglers(); sent != 0 {
				t.Fatalf("off: %d stragglers sent", sent)
			}
		}
		release()
	}
}
