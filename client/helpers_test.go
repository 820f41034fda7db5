package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// serve runs an rpc server for fs on a loopback httptest server and returns
// its address.
func serve(t testing.TB, fs meta.FileSystem, fsck func(context.Context) (*meta.FsckReport, error)) string {
	t.Helper()
	return serveWith(t, fs, rpc.ServerOptions{Fsck: fsck})
}

// serveWith is serve with the server's options.
func serveWith(t testing.TB, fs meta.FileSystem, opts rpc.ServerOptions) string {
	t.Helper()
	s := rpc.NewServer(fs, opts)
	mux := http.NewServeMux()
	mux.Handle("/rpc/", s.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
	})
	return hs.URL
}

// engine opens the real store and namespace engine in a temporary directory.
func engine(t testing.TB) *namespace.Engine {
	t.Helper()
	return engineWith(t, func(*namespace.Config) {})
}

// engineWith is engine with its Config changed by set.
func engineWith(t testing.TB, set func(*namespace.Config)) *namespace.Engine {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	st, err := pebblestore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(string) []string { return nil }
	set(&cfg)
	e, err := namespace.New(st, cfg)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	return e
}

func dial(t testing.TB, addr string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// proxy forwards TCP connections to a backend and can cut them all at once,
// as a network failure would. It counts the bytes each connection carried
// towards the backend, in the order the connections were accepted.
type proxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	conns   []net.Conn
	up      []*atomic.Int64
	// dropReply, when set, makes the next bytes a backend sends on any
	// connection close that connection instead of reaching the client:
	// the request was executed, its reply is lost.
	dropReply atomic.Bool
}

// sent returns, per accepted connection, the bytes it has carried to the
// backend so far.
func (p *proxy) sent() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := make([]int64, len(p.up))
	for i, u := range p.up {
		n[i] = u.Load()
	}
	return n
}

// countingWriter counts what it passes on, before passing it: whatever the
// backend has received is counted already.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.w.Write(b)
}

func newProxy(t *testing.T, backendURL string) *proxy {
	hp, err := rpc.HostPort(backendURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, backend: hp}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.kill() })
	return p
}

func (p *proxy) addr() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.backend)
		if err != nil {
			in.Close()
			continue
		}
		up := new(atomic.Int64)
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.up = append(p.up, up)
		p.mu.Unlock()
		go func() { io.Copy(countingWriter{out, up}, in); out.Close() }()
		go func() { p.down(in, out); in.Close() }()
	}
}

// down copies what the backend sends to the client, until either side
// closes or a reply is to be dropped (dropReply).
func (p *proxy) down(in, out net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if p.dropReply.CompareAndSwap(true, false) {
				out.Close()
				return
			}
			if _, werr := in.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
