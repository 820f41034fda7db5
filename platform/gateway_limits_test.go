package platform

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// rawCall opens a connection to addr and sends a /rpc/call whose headers
// announce n bytes of body and whose body stops after sent bytes.
func rawCall(t *testing.T, addr string, n, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST /rpc/call HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", n, strings.Repeat("x", sent)); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the HTTP answer on c, failing the test when none comes
// (the guard is against a hang, not a measure of speed).
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestGatewayBodyLimits: a /rpc/call body that stalls is answered 400 at
// the frame timeout; bodies in flight are bounded by the budget (the one
// past it is answered 503 before its body is read, and the gauge never
// passes the budget, and a small one's connection is kept for the next
// request); a frame over the instances' limit is answered 413
// by the gateway, without an invocation.
func TestGatewayBodyLimits(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	t.Cleanup(func() {
		for _, s := range h.servers {
			s.Close()
		}
	})
	cfg := Config{Deployments: 1, Concurrency: 4, MaxInstances: 1, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 8}
	l, reg := newTestLocal(t, cfg, h)
	gateway := func(opts GatewayOptions) (*Gateway, string) {
		opts.InvokeTimeout, opts.Registerer = 2*time.Second, nil
		g, err := NewGateway(l, opts)
		if err != nil {
			t.Fatal(err)
		}
		gw := httptest.NewServer(g)
		t.Cleanup(gw.Close) // after the connections' own cleanups
		return g, gw.Listener.Addr().String()
	}
	_ = reg
	_, addr := gateway(GatewayOptions{FrameTimeout: 300 * time.Millisecond})
	// A stalled body: 400 at the frame timeout.
	if code, body := answer(t, rawCall(t, addr, 100, 10)); code != http.StatusBadRequest || !strings.Contains(body, "did not arrive within") {
		t.Fatalf("stalled body: %d %q, want 400", code, body)
	}
	// Too large for an instance: 413 from the gateway itself.
	g, addr := gateway(GatewayOptions{FrameTimeout: time.Minute, BodyBudget: 10 << 10, MaxBody: 8 << 10})
	if code, body := answer(t, rawCall(t, addr, 9<<10, 0)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a frame over MaxBody: %d %q, want 413", code, body)
	}
	// The budget: two slow 4 KiB bodies are in; a third is turned away.
	slow := []net.Conn{rawCall(t, addr, 4<<10, 100), rawCall(t, addr, 4<<10, 100)}
	waitFor(t, "two bodies reserved", func() bool { return g.held.Load() == 8<<10 })
	c := rawCall(t, addr, 4<<10, 100)
	if code, body := answer(t, c); code != http.StatusServiceUnavailable || !strings.Contains(body, "budget") {
		t.Fatalf("a third body over the budget: %d %q, want 503", code, body)
	}
	if held := testutil.ToFloat64(g.met.requests.WithLabelValues("call", outcomeBusy)); held != 1 {
		t.Fatalf("busy outcomes %v, want 1", held)
	}
	// A small body over the budget that arrives whole is read and
	// dropped: its connection serves the next request (answered 503 too
	// while the slow ones hold the budget).
	c = rawCall(t, addr, 4<<10, 4<<10)
	for i := range 2 {
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on a connection whose small body was refused: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Close {
			t.Fatalf("request %d: %s, closing %v, want 503 keeping the connection", i, resp.Status, resp.Close)
		}
		if i == 0 {
			fmt.Fprintf(c, "POST /rpc/call HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", 4<<10, strings.Repeat("x", 4<<10))
		}
	}
	// The slow ones finish; their reservations are given back.
	for _, c := range slow {
		if _, err := io.WriteString(c, strings.Repeat("y", 4<<10-100)); err != nil {
			t.Fatal(err)
		}
		if code, body := answer(t, c); code != http.StatusOK {
			t.Fatalf("a slow body once complete: %d %q", code, body)
		}
	}
	waitFor(t, "the reservations given back", func() bool { return g.held.Load() == 0 })
}

// failDial is a transport whose dials fail as the gateway's own descriptors
// running out makes them fail.
type failDial struct{ dials atomic.Int32 }

func (f *failDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.dials.Add(1)
	return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("socket", syscall.EMFILE)}
}

// TestGatewayDialFailureNotSent: a request the gateway could not send (its
// dial failed for want of descriptors) is answered 503 with Retry-After,
// saying it was not sent, on both the RPC and WebHDFS paths: not 502,
// whose "outcome unknown" would make a client treat a write as maybe done.
func TestGatewayDialFailureNotSent(t *testing.T) {
	h := &httpHost{release: make(chan struct{})}
	cfg := Config{Deployments: 1, Concurrency: 4, MaxInstances: 1, MaxPerDeployment: 1, MinInstances: 1, KeepAlive: time.Hour, MaxQueue: 8}
	l, reg := newTestLocal(t, cfg, h)
	fd := &failDial{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = fd.dial
	g, err := NewGateway(l, GatewayOptions{InvokeTimeout: 2 * time.Second, Registerer: reg, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	defer gw.Close()
	defer func() {
		for _, s := range h.servers {
			s.Close()
		}
	}()
	resp, body := post(t, gw.URL+"/rpc/call", "frame", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "not sent") {
		t.Fatalf("call with a failing dial: %d %q, want 503 not sent", resp.StatusCode, body)
	}
	r, err := http.Get(gw.URL + "/webhdfs/v1/a?op=GETFILESTATUS")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "not sent") {
		t.Fatalf("webhdfs with a failing dial: %d %q, want 503 not sent", r.StatusCode, b)
	}
	if got := testutil.ToFloat64(g.met.requests.WithLabelValues("call", outcomeFailed)); got != 0 {
		t.Fatalf("failed (outcome unknown) answers: %v, want 0", got)
	}
}

// permanentHost fails every start for good, as a `nimbus namenode` whose
// --deployments is not the cluster's does.
type permanentHost struct{ starts atomic.Int32 }

func (h *permanentHost) Start(ctx context.Context, spec Spec) (Instance, error) {
	h.starts.Add(1)
	return nil, fmt.Errorf("%w: instance %d exited before serving (exit status 78): nimbus namenode: server: --deployments differs from the cluster's", ErrPermanent, spec.ID)
}

// TestGatewayPermanentStartFailure: once a start fails for good, the
// invocation waiting for it fails at once with the instance's error (500,
// not a 503 after the invoke timeout), /readyz says not ready with it, and
// the invocations that follow within the backoff fail at once without
// another start.
func TestGatewayPermanentStartFailure(t *testing.T) {
	h := &permanentHost{}
	cfg := Config{Deployments: 2, Concurrency: 4, MaxInstances: 2, MaxPerDeployment: 1, KeepAlive: time.Hour, MaxQueue: 8}
	reg := prometheus.NewRegistry()
	l, err := NewLocal(cfg, h, LocalOptions{Registerer: reg, Tick: 5 * time.Millisecond, PermanentBackoff: time.Hour, LoadPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	g, err := NewGateway(l, GatewayOptions{InvokeTimeout: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	defer gw.Close()
	for i := range 3 {
		resp, body := post(t, gw.URL+"/rpc/call", "frame", map[string]string{HeaderDeployment: fmt.Sprint(i % 2)})
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "differs from the cluster's") {
			t.Fatalf("call %d: %d %q, want 500 with the instance's error", i, resp.StatusCode, body)
		}
	}
	if n := h.starts.Load(); n != 1 {
		t.Fatalf("%d starts within the backoff, want 1", n)
	}
	r, err := http.Get(gw.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "differs from the cluster's") {
		t.Fatalf("/readyz: %d %q, want 503 with the instance's error", r.StatusCode, b)
	}
	if !errors.Is(l.Unavailable(), ErrPermanent) {
		t.Fatalf("Unavailable() = %v", l.Unavailable())
	}
}
