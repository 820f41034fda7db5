package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/platform"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestConnectionBudget(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{
		{512, 256},     // the reserve is capped at half
		{2048, 1024},   // 1024 kept
		{20000, 15000}, // a quarter kept
		{1 << 20, 786432},
	} {
		if got := ConnectionBudget(c.nofile); got != c.want {
			t.Errorf("ConnectionBudget(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

func listen(t testing.TB, max int, stall time.Duration) (*limitListener, *prometheus.Registry) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	l := newLimitListener(ln, max, stall, slog.New(slog.DiscardHandler), reg)
	t.Cleanup(func() { l.Close() })
	return l, reg
}

// TestLimitListenerRejects: past the limit a client reads a 503 with
// Retry-After at once; a closed connection frees its slot.
func TestLimitListenerRejects(t *testing.T) {
	l, reg := listen(t, 2, 0)
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	c := dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 503 ") || !strings.Contains(string(got), "Retry-After: 1\r\n") {
		t.Fatalf("over the limit: read %q, %v", got, err)
	}
	var m dto.Metric
	l.rejected.Write(&m)
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("rejected = %v, want 1", n)
	}
	first.Close()
	first.Close() // twice: the slot is given back once
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a slot freed by Close was not reused")
	}
	second.Close()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 3 {
		t.Fatalf("metrics: %d families, %v", len(mfs), err)
	}
	if a := l.active.Load(); a != 0 {
		t.Fatalf("active = %d after every connection closed", a)
	}
}

// TestWriteStall: a write the client does not take fails after the stall
// timeout; an explicit deadline rules while set; ReadFrom copies a file
// through and re-arms.
func TestWriteStall(t *testing.T) {
	l, _ := listen(t, 10, 400*time.Millisecond)
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	// ReadFrom: a file of 5 MiB through the kernel copy, read by the client.
	data := bytes.Repeat([]byte("0123456789abcdef"), 5<<16)
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(client, int64(len(data))))
		done <- b
	}()
	fh, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	n, err := sc.(io.ReaderFrom).ReadFrom(fh)
	fh.Close()
	if err != nil || n != int64(len(data)) || !bytes.Equal(<-done, data) {
		t.Fatalf("ReadFrom: %d bytes, %v", n, err)
	}

	// The client stops reading: writes fail within the stall timeout.
	start := time.Now()
	chunk := make([]byte, 1<<20)
	for {
		if _, err = sc.Write(chunk); err != nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("writes to a client that does not read went on for 10s")
		}
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("stalled write: %v, want a timeout", err)
	}

	// An explicit deadline in the past rules over the stall deadline, and
	// clearing it brings the stall deadline back.
	sc2, c2 := pair(t, l)
	sc2.SetWriteDeadline(time.Unix(1, 0))
	if _, err := sc2.Write([]byte("x")); err == nil {
		t.Fatal("write past an explicit deadline succeeded")
	}
	sc2.SetWriteDeadline(time.Time{})
	if _, err := sc2.Write([]byte("y")); err != nil {
		t.Fatalf("write after clearing the deadline: %v", err)
	}
	b := make([]byte, 1)
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c2, b); err != nil || b[0] != 'y' {
		t.Fatalf("client read %q, %v", b, err)
	}
}

func pair(t *testing.T, l *limitListener) (net.Conn, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

// serveLimited serves 200 "ok" behind a listener of max connections, with
// credential reserving one slot when set.
func serveLimited(t *testing.T, max int, credential string) *limitListener {
	t.Helper()
	l, _ := listen(t, max, 0)
	l.reserve(credential, 1)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return l
}

// holdSlot takes one of l's client slots with a kept-alive connection.
func holdSlot(t *testing.T, l *limitListener) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("holding a slot: %v %v", resp, err)
	}
}

// earlyClient is an http.Client whose dial waits a little (less than the
// listener's screenTimeout) for an answer the server might send before
// the request: the Transport then sees it
// before it writes the request, as it does when the server is quicker
// than the client's writing.
func earlyClient() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			b := make([]byte, 1)
			n, _ := c.Read(b)
			c.SetReadDeadline(time.Time{})
			return &prefixConn{Conn: c, pre: b[:n]}, nil
		}}}
}

type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// TestLimitListenerAnswersRequest: a client of net/http at the limit gets
// a 503 response with Retry-After to its request, not a transport error
// (an answer sent before the request is a broken connection to it).
func TestLimitListenerAnswersRequest(t *testing.T) {
	l := serveLimited(t, 1, "")
	holdSlot(t, l)
	hc := earlyClient()
	for i := range 5 {
		resp, err := hc.Post("http://"+l.Addr().String()+"/", "text/plain", strings.NewReader("a body"))
		if err != nil {
			t.Fatalf("request %d at the limit: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("request %d at the limit: %s, Retry-After %q", i, resp.Status, resp.Header.Get("Retry-After"))
		}
	}
}

// TestLimitListenerGatewaySlots: at the limit, a request carrying the
// gateway's credential is served in a reserved slot; one without it, or
// with another value, is answered 503, and so is the gateway once its
// reserved slots are held too. A slot freed while a connection is being
// screened serves it.
func TestLimitListenerGatewaySlots(t *testing.T) {
	l := serveLimited(t, 1, "s3cret")
	holdSlot(t, l)
	get := func(hc *http.Client, credential string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+l.Addr().String()+"/", nil)
		if credential != "" {
			req.Header.Set(platform.HeaderGatewayCredential, credential)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("credential %q: %v", credential, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	once := earlyClient()
	if s := get(once, ""); s != http.StatusServiceUnavailable {
		t.Fatalf("no credential at the limit: %d, want 503", s)
	}
	if s := get(once, "s3creT"); s != http.StatusServiceUnavailable {
		t.Fatalf("a wrong credential at the limit: %d, want 503", s)
	}
	kept := &http.Client{Transport: &http.Transport{}}
	defer kept.CloseIdleConnections()
	for i := range 3 { // one connection, kept alive in the reserved slot
		if s := get(kept, "s3cret"); s != http.StatusOK {
			t.Fatalf("the gateway's request %d at the limit: %d, want 200", i, s)
		}
	}
	if r := l.reserved.Load(); r != 1 {
		t.Fatalf("reserved slots held: %d, want 1", r)
	}
	if s := get(once, "s3cret"); s != http.StatusServiceUnavailable {
		t.Fatalf("the gateway past its reserved slots: %d, want 503", s)
	}
	kept.CloseIdleConnections()
	for l.reserved.Load() != 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if s := get(once, "s3cret"); s != http.StatusOK {
		t.Fatalf("the gateway once its reserved slot was given back: %d, want 200", s)
	}
}

// TestLimitListenerSilent: at the limit, a connection that sends nothing
// is answered 503 once the screening gives up on it, and one that closes
// at once frees its screening without an answer counted.
func TestLimitListenerSilent(t *testing.T) {
	l := serveLimited(t, 1, "")
	holdSlot(t, l)
	quit, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	quit.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a guard against a hang
	got, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 503 ") {
		t.Fatalf("a silent connection at the limit: read %q, %v", got, err)
	}
	var m dto.Metric
	l.rejected.Write(&m)
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("rejected = %v, want 1 (the silent one)", n)
	}
}

// FuzzLimitListenerReplay: what the screening read of a connection it
// admits (the head and whatever of the body came with it) is read again
// by the server, byte for byte.
func FuzzLimitListenerReplay(f *testing.F) {
	f.Add([]byte("hello"), "x")
	f.Add(bytes.Repeat([]byte{0, '\r', '\n'}, 20000), "a-longer-header-value")
	l, _ := listen(f, 1, 0)
	l.reserve("s3cret", DefaultGatewayConnections)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Echo"))
		w.Write(b)
	})}
	go hs.Serve(l)
	f.Cleanup(func() { hs.Close() })
	hold, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { hold.Close() })
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}} // the timeout turns a hang into a failure
	f.Fuzz(func(t *testing.T, body []byte, echo string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+"/", bytes.NewReader(body))
		req.Header.Set(platform.HeaderGatewayCredential, "s3cret")
		req.Header.Set("X-Echo", echo)
		if req.Header.Get("X-Echo") != echo || len(echo) > 8<<10 {
			t.Skip() // not a header value net/http sends as given
		}
		resp, err := hc.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) && ue.Timeout() {
				t.Fatalf("through a reserved slot: %v (reserved %d)", err, l.reserved.Load())
			}
			t.Skip() // a value the client refuses to send
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		echo = strings.Trim(echo, " \t") // as a header's value is read
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) || resp.Header.Get("X-Echo") != echo {
			t.Fatalf("through a reserved slot: %s, %d bytes back of %d, echo %q of %q, %v", resp.Status, len(got), len(body), resp.Header.Get("X-Echo"), echo, err)
		}
	})
}
