package rpc_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"google.golang.org/protobuf/proto"
)

// holdFS is a namespace engine whose mkdirs of /hold waits until release is
// closed: a request that keeps a server's one request slot busy, as a
// write waiting for a dead peer's acknowledgement does.
type holdFS struct {
	meta.FileSystem
	entered chan struct{}
	release chan struct{}
}

func (h *holdFS) Mkdirs(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	if path == "/hold" {
		h.entered <- struct{}{}
		<-h.release
		return nil
	}
	return h.FileSystem.Mkdirs(ctx, u, path, perm)
}

// twoServers are two NameNodes' engines on one embedded store, each behind
// its own RPC server on a socket; A has one request slot.
type twoServers struct {
	a, b   *env
	engA   *namespace.Engine
	engB   *namespace.Engine
	hold   *holdFS
	connB  *rpc.Conn
	holdOn *rpc.Conn
}

func startTwo(t *testing.T, ttl time.Duration) *twoServers {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	ps, err := pebblestore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	engine := func() *namespace.Engine {
		cfg := namespace.DefaultConfig()
		cfg.Superuser = "root"
		cfg.Groups = func(string) []string { return nil }
		cfg.RequestTTL = ttl
		e, err := namespace.New(ps, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ts := &twoServers{engA: engine(), engB: engine()}
	t.Cleanup(func() {
		ts.engA.Close()
		ts.engB.Close()
		ps.Close()
	})
	ts.hold = &holdFS{FileSystem: ts.engA, entered: make(chan struct{}, 1), release: make(chan struct{})}
	ts.a = start(t, ts.hold, rpc.ServerOptions{MaxInflight: 1})
	ts.b = start(t, ts.engB, rpc.ServerOptions{})
	t.Cleanup(func() { ts.releaseA() })
	ts.connB = dial(t, ts.b)
	ts.holdOn = dial(t, ts.a)
	return ts
}

// busyA fills A's one request slot until releaseA.
func (ts *twoServers) busyA(t *testing.T) {
	t.Helper()
	if _, err := ts.holdOn.Start(context.Background(), &api.Request{RequestId: 1, User: "root",
		Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/hold", Perm: 0o755}}}); err != nil {
		t.Fatal(err)
	}
	<-ts.hold.entered
}

func (ts *twoServers) releaseA() {
	select {
	case <-ts.hold.release:
	default:
		close(ts.hold.release)
	}
}

// sendRaw writes req as one frame on a new connection to e, and returns
// the connection: the client's, as a test holds it.
func sendRaw(t *testing.T, e *env, req *api.Request) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, br := rawConn(t, e)
	frame, err := rpc.AppendFrame(nil, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	return nc, br
}

func readResponse(t *testing.T, nc net.Conn, br *bufio.Reader) *api.Response {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	frame, err := rpc.ReadFrame(br, nil, 0)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	resp := &api.Response{}
	if err := proto.Unmarshal(frame, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// served is how many requests of method e's server ran, by any outcome.
func served(t *testing.T, e *env, method string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_rpc_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == method {
					n += value(m)
				}
			}
		}
	}
	return n
}

func del(id uint64, path string, resubmitted bool) *api.Request {
	return &api.Request{RequestId: id, ClientName: "client-1", User: "root", Resubmitted: resubmitted,
		Body: &api.Request_Delete{Delete: &api.DeleteRequest{Path: path}}}
}

func mkdir(id uint64, path string) *api.Request {
	return &api.Request{RequestId: id, ClientName: "client-1", User: "root",
		Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: path, Perm: 0o755}}}
}

func callOK(t *testing.T, c *rpc.Conn, req *api.Request) {
	t.Helper()
	resp, err := c.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, resp)
}

// TestDelayedFirstSubmissionAfterResubmission: a client's delete of /x
// reaches server A, whose request slots are busy, and waits there, read
// but not started; the client's connection breaks, the client resubmits
// the delete to server B (same store), which applies and records it, and
// then re-creates /x, acknowledged. When A's slot frees, the stale first
// submission must not delete the new /x: neither when A can see that its
// connection ended (closed: the RPC server does not start it), nor when it
// cannot (silent: a partition; the connection looks alive, the request
// starts, and the engine finds the record the resubmission wrote).
func TestDelayedFirstSubmissionAfterResubmission(t *testing.T) {
	for _, closed := range []bool{true, false} {
		name := map[bool]string{true: "closed", false: "silent"}[closed]
		t.Run(name, func(t *testing.T) {
			if closed && runtime.GOOS != "linux" {
				t.Skip("the connection's TCP state is read on Linux only (peer_linux.go)")
			}
			ts := startTwo(t, 5*time.Minute)
			callOK(t, ts.connB, mkdir(100, "/x"))
			ts.busyA(t)
			nc, br := sendRaw(t, ts.a, del(7, "/x", false))
			if closed {
				nc.Close() // the client sees its connection break
			}
			callOK(t, ts.connB, del(7, "/x", true)) // resubmitted to B: applied there
			callOK(t, ts.connB, mkdir(101, "/x"))   // the client's next write
			ts.releaseA()
			if closed {
				// A's reader takes the slot and finds the connection ended.
				waitFor(t, "A to end the closed connection", func() bool {
					return metricValue(t, ts.a.reg, "nimbus_rpc_connections", "") == 1 // the holder's
				})
				if n := metricValue(t, ts.a.reg, "nimbus_rpc_stale_requests_refused_total", ""); n != 1 {
					t.Errorf("stale requests refused = %v, want 1", n)
				}
				if n := served(t, ts.a, "delete"); n != 0 {
					t.Errorf("A started %v deletes of a connection that had ended, want none", n)
				}
			} else if resp := readResponse(t, nc, br); resp.GetError() != nil {
				t.Fatalf("stale delete answered %v, want the record's answer (success)", rpc.ErrorFromProto(resp.GetError()))
			}
			if _, err := ts.engB.Stat(context.Background(), meta.User{Name: "root"}, "/x"); err != nil {
				t.Fatalf("the directory the client re-created after its delete: %v (a stale first submission deleted it)", err)
			}
		})
	}
}

// TestStaleSubmissionRefused: a write that waited in a server for longer
// than half the request TTL is answered busy, not applied: a record of
// another submission of it might have expired meanwhile.
func TestStaleSubmissionRefused(t *testing.T) {
	const ttl = 100 * time.Millisecond
	ts := startTwo(t, ttl)
	ts.busyA(t)
	nc, br := sendRaw(t, ts.a, mkdir(8, "/late"))
	// A's reader reads the frame as it arrives and then waits for the
	// slot; the request's age counts from that read. Ten times the half
	// TTL later it is stale however late the reader got to it.
	time.Sleep(10 * ttl / 2)
	ts.releaseA()
	resp := readResponse(t, nc, br)
	err := rpc.ErrorFromProto(resp.GetError())
	if !errors.Is(err, meta.ErrBusy) || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("a stale mkdir answered %v, want busy: not started", err)
	}
	if _, err := ts.engB.Stat(context.Background(), meta.User{Name: "root"}, "/late"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("stat of the refused mkdir's directory: %v, want not found", err)
	}
}
