package rpc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

type env struct {
	srv  *rpc.Server
	http *httptest.Server
	addr string
	reg  *prometheus.Registry
}

func start(t testing.TB, fs meta.FileSystem, opts rpc.ServerOptions) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	s := rpc.NewServer(fs, opts)
	mux := http.NewServeMux()
	mux.Handle("/rpc/", s.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		hs.Close()
	})
	return &env{srv: s, http: hs, addr: hs.URL, reg: reg}
}

func dial(t testing.TB, e *env) *rpc.Conn {
	t.Helper()
	c, err := rpc.Dial(context.Background(), e.addr, rpc.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var nextID uint64 = 1

func call(t *testing.T, c *rpc.Conn, user string, req *api.Request) *api.Response {
	t.Helper()
	nextID++
	req.RequestId = nextID
	req.User = user
	resp, err := c.Call(context.Background(), req)
	if err != nil {
		t.Fatalf("call %v: %v", req, err)
	}
	if resp.GetRequestId() != req.RequestId {
		t.Fatalf("response id %d for request %d", resp.GetRequestId(), req.RequestId)
	}
	return resp
}

func mustOK(t *testing.T, resp *api.Response) *api.Response {
	t.Helper()
	if e := resp.GetError(); e != nil {
		t.Fatalf("unexpected error: %v", rpc.ErrorFromProto(e))
	}
	return resp
}

// TestEveryMethod sends one request of every method over a multiplexed
// connection and checks the result against the fake file system.
func TestEveryMethod(t *testing.T) {
	fs := metatest.NewMemFS()
	e := start(t, fs, rpc.ServerOptions{Fsck: func(ctx context.Context) (*meta.FsckReport, error) {
		return &meta.FsckReport{Inodes: 7, Problems: []string{"p1"}}, nil
	}})
	c := dial(t, e)
	u := metatest.Superuser
	R := func(b any) *api.Request {
		r := &api.Request{}
		switch b := b.(type) {
		case *api.MkdirsRequest:
			r.Body = &api.Request_Mkdirs{Mkdirs: b}
		case *api.CreateRequest:
			r.Body = &api.Request_Create{Create: b}
		case *api.WriteRequest:
			r.Body = &api.Request_Write{Write: b}
		case *api.CompleteRequest:
			r.Body = &api.Request_Complete{Complete: b}
		case *api.AppendRequest:
			r.Body = &api.Request_Append{Append: b}
		case *api.ReadRequest:
			r.Body = &api.Request_Read{Read: b}
		case *api.StatRequest:
			r.Body = &api.Request_Stat{Stat: b}
		case *api.ListRequest:
			r.Body = &api.Request_List{List: b}
		case *api.DeleteRequest:
			r.Body = &api.Request_Delete{Delete: b}
		case *api.RenameRequest:
			r.Body = &api.Request_Rename{Rename: b}
		case *api.SetPermissionRequest:
			r.Body = &api.Request_SetPermission{SetPermission: b}
		case *api.SetOwnerRequest:
			r.Body = &api.Request_SetOwner{SetOwner: b}
		case *api.SetTimesRequest:
			r.Body = &api.Request_SetTimes{SetTimes: b}
		case *api.SetReplicationRequest:
			r.Body = &api.Request_SetReplication{SetReplication: b}
		case *api.TruncateRequest:
			r.Body = &api.Request_Truncate{Truncate: b}
		case *api.ConcatRequest:
			r.Body = &api.Request_Concat{Concat: b}
		case *api.ContentSummaryRequest:
			r.Body = &api.Request_ContentSummary{ContentSummary: b}
		case *api.SetQuotaRequest:
			r.Body = &api.Request_SetQuota{SetQuota: b}
		case *api.CreateSymlinkRequest:
			r.Body = &api.Request_CreateSymlink{CreateSymlink: b}
		case *api.RenewLeaseRequest:
			r.Body = &api.Request_RenewLease{RenewLease: b}
		case *api.DefaultsRequest:
			r.Body = &api.Request_Defaults{Defaults: b}
		case *api.EchoRequest:
			r.Body = &api.Request_Echo{Echo: b}
		case *api.FsckRequest:
			r.Body = &api.Request_Fsck{Fsck: b}
		default:
			t.Fatalf("no body for %T", b)
		}
		return r
	}
	ok := func(b any) *api.Response { t.Helper(); return mustOK(t, call(t, c, u, R(b))) }

	ok(&api.MkdirsRequest{Path: "/a/b", Perm: 0o750})
	st := ok(&api.StatRequest{Path: "/a/b"}).GetStatus()
	if st.GetType() != uint32(meta.TypeDir) || st.GetPerm() != 0o750 || st.GetOwner() != u || st.GetPath() != "/a/b" {
		t.Fatalf("stat /a/b = %v", st)
	}
	cr := ok(&api.CreateRequest{Path: "/a/f", Client: "cl", Replication: 2}).GetStatus()
	if !cr.GetUnderConstruction() || cr.GetReplication() != 2 {
		t.Fatalf("create = %v", cr)
	}
	ok(&api.WriteRequest{Path: "/a/f", Client: "cl", Offset: 0, Data: []byte("hello ")})
	ok(&api.RenewLeaseRequest{Client: "cl"})
	if got := ok(&api.CompleteRequest{Path: "/a/f", Client: "cl"}).GetStatus(); got.GetLength() != 6 || got.GetUnderConstruction() {
		t.Fatalf("complete = %v", got)
	}
	if got := ok(&api.AppendRequest{Path: "/a/f", Client: "cl"}).GetStatus(); got.GetLength() != 6 {
		t.Fatalf("append = %v", got)
	}
	ok(&api.WriteRequest{Path: "/a/f", Client: "cl", Offset: 6, Data: []byte("world")})
	ok(&api.CompleteRequest{Path: "/a/f", Client: "cl"})
	if got := ok(&api.ReadRequest{Path: "/a/f", Offset: 2, Length: 100}).GetRead().GetData(); string(got) != "llo world" {
		t.Fatalf("read = %q", got)
	}
	ls := ok(&api.ListRequest{Path: "/a", Limit: 1}).GetListing()
	if len(ls.GetEntries()) != 1 || ls.GetEntries()[0].GetPath() != "b" || ls.GetRemaining() != 1 {
		t.Fatalf("list = %v", ls)
	}
	ok(&api.SetPermissionRequest{Path: "/a/f", Perm: 0o600})
	ok(&api.SetOwnerRequest{Path: "/a/f", Owner: "bob", Group: "g"})
	ok(&api.SetTimesRequest{Path: "/a/f", Mtime: 1234, Atime: -1})
	ok(&api.SetReplicationRequest{Path: "/a/f", Replication: 5})
	st = ok(&api.StatRequest{Path: "/a/f"}).GetStatus()
	if st.GetPerm() != 0o600 || st.GetOwner() != "bob" || st.GetGroup() != "g" || st.GetMtime() != 1234 || st.GetReplication() != 5 {
		t.Fatalf("stat after set* = %v", st)
	}
	ok(&api.TruncateRequest{Path: "/a/f", NewLength: 5})
	ok(&api.CreateRequest{Path: "/a/g", Client: "cl"})
	ok(&api.WriteRequest{Path: "/a/g", Client: "cl", Data: []byte("XY")})
	ok(&api.CompleteRequest{Path: "/a/g", Client: "cl"})
	ok(&api.ConcatRequest{Target: "/a/f", Srcs: []string{"/a/g"}})
	if got := ok(&api.ReadRequest{Path: "/a/f", Length: 100}).GetRead().GetData(); string(got) != "helloXY" {
		t.Fatalf("read after concat = %q", got)
	}
	ok(&api.SetQuotaRequest{Path: "/a", NsQuota: 100, SpaceQuota: -1})
	cs := ok(&api.ContentSummaryRequest{Path: "/a"}).GetContentSummary()
	if cs.GetDirectoryCount() != 2 || cs.GetFileCount() != 1 || cs.GetLength() != 7 || cs.GetNsQuota() != 100 {
		t.Fatalf("content summary = %v", cs)
	}
	ok(&api.CreateSymlinkRequest{Target: "/a/f", Link: "/l/ink", CreateParent: true})
	if st := ok(&api.StatRequest{Path: "/l/ink"}).GetStatus(); st.GetSymlink() != "/a/f" || st.GetType() != uint32(meta.TypeSymlink) {
		t.Fatalf("symlink stat = %v", st)
	}
	ok(&api.RenameRequest{Src: "/a/f", Dst: "/a/h"})
	ok(&api.DeleteRequest{Path: "/a", Recursive: true})
	if d := ok(&api.DefaultsRequest{}).GetDefaults(); d.GetReplication() != 3 || d.GetBlockSize() != 128<<20 {
		t.Fatalf("defaults = %v", d)
	}
	if got := ok(&api.EchoRequest{Payload: []byte("ping")}).GetEcho().GetPayload(); string(got) != "ping" {
		t.Fatalf("echo = %q", got)
	}
	if r := rpc.FsckFromProto(ok(&api.FsckRequest{}).GetFsck()); r.Inodes != 7 || len(r.Problems) != 1 {
		t.Fatalf("fsck = %+v", r)
	}
	// A request with no body is refused with a clear kind, not a crash.
	if e := call(t, c, u, &api.Request{}).GetError(); meta.Kind(e.GetKind()) != meta.KindUnsupported {
		t.Fatalf("empty body: %v", e)
	}
	// Metrics saw the calls.
	if n := mustCounter(t, e.reg, "stat", "ok"); n != 3 {
		t.Fatalf("stat ok counter = %v", n)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, method, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_rpc_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var gotM, gotK string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					gotM = l.GetValue()
				case "kind":
					gotK = l.GetValue()
				}
			}
			if gotM == method && gotK == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no counter for %s/%s", method, kind)
	return 0
}

// errFS fails Stat with the kind named by the path ("/kind/3"), or with a
// plain error for "/plain".
type errFS struct{ *metatest.MemFS }

func (f errFS) Stat(ctx context.Context, u meta.User, path string) (*meta.FileStatus, error) {
	if path == "/plain" {
		return nil, errors.New("disk on fire")
	}
	var k int
	fmt.Sscanf(path, "/kind/%d", &k)
	return nil, meta.Errorf("stat", path, meta.Sentinel(meta.Kind(k)), "detail %d", k)
}

func TestErrorKindsAcrossTheWire(t *testing.T) {
	e := start(t, errFS{metatest.NewMemFS()}, rpc.ServerOptions{})
	c := dial(t, e)
	for k := meta.KindNotFound; k <= meta.KindInternal; k++ {
		p := fmt.Sprintf("/kind/%d", k)
		for _, viaHTTP := range []bool{false, true} {
			req := &api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: p}}}
			var resp *api.Response
			if viaHTTP {
				var err error
				req.RequestId = 99
				resp, err = rpc.CallHTTP(context.Background(), nil, e.addr, req, 0)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				resp = call(t, c, "u", req)
			}
			err := rpc.ErrorFromProto(resp.GetError())
			if !errors.Is(err, meta.Sentinel(k)) || meta.KindOf(err) != k {
				t.Fatalf("kind %v (http=%v): got %v", k, viaHTTP, err)
			}
			if err.Op != "stat" || err.Path != p || err.Detail != fmt.Sprintf("detail %d", k) {
				t.Fatalf("kind %v: op/path/detail lost: %#v", k, err)
			}
		}
	}
	resp := call(t, c, "u", &api.Request{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/plain"}}})
	err := rpc.ErrorFromProto(resp.GetError())
	if meta.KindOf(err) != meta.KindUnknown || err.Op != "stat" || err.Path != "/plain" || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("unknown-kind error = %v (%#v)", err, err)
	}
}

// rawConn performs the upgrade by hand so the test can send anything.
func rawConn(t *testing.T, e *env) (net.Conn, *bufio.Reader) {
	t.Helper()
	hp, _ := rpc.HostPort(e.addr)
	nc, err := net.Dial("tcp", hp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "GET /rpc/conn HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: nimbus-rpc/2\r\n\r\n")
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return nc, br
}

func expectConnError(t *testing.T, nc net.Conn, br *bufio.Reader, want string) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := rpc.ReadFrame(br, nil, 0)
	if err != nil {
		t.Fatalf("no error frame: %v", err)
	}
	resp := &api.Response{}
	if err := proto.Unmarshal(frame, resp); err != nil {
		t.Fatal(err)
	}
	if resp.GetRequestId() != 0 || resp.GetError() == nil || !strings.Contains(resp.GetError().GetDetail(), want) {
		t.Fatalf("error frame = %v, want detail with %q", resp, want)
	}
	if _, err := rpc.ReadFrame(br, nil, 0); err != io.EOF && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("connection not closed after a protocol error: %v", err)
	}
}

func TestOversizedFrameRejected(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{MaxFrameSize: 1024})
	nc, br := rawConn(t, e)
	nc.Write(binary.AppendUvarint(nil, 1<<40))
	expectConnError(t, nc, br, "frame too large")
	// The server still serves.
	c := dial(t, e)
	mustOK(t, call(t, c, "u", &api.Request{Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}))
	// A client refuses to send an oversized frame itself.
	big := &api.Request{RequestId: 5, Body: &api.Request_Echo{Echo: &api.EchoRequest{Payload: make([]byte, rpc.DefaultMaxFrameSize)}}}
	if _, err := c.Call(context.Background(), big); !errors.Is(err, rpc.ErrFrameTooLarge) {
		t.Fatalf("oversized call: %v", err)
	}
	// Over HTTP: 413.
	body := binary.AppendUvarint(nil, 4096)
	body = append(body, make([]byte, 4096)...)
	resp, err := http.Post(e.addr+rpc.CallPath, rpc.ContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized POST: %s", resp.Status)
	}
}

func TestGarbageFrameRejected(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{})
	nc, br := rawConn(t, e)
	garbage := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02}
	nc.Write(append(binary.AppendUvarint(nil, uint64(len(garbage))), garbage...))
	expectConnError(t, nc, br, "undecodable")
	// A bad length prefix (an overlong varint).
	nc2, br2 := rawConn(t, e)
	nc2.Write(bytes.Repeat([]byte{0x80}, 11))
	expectConnError(t, nc2, br2, "bad frame length")
	// Garbage over HTTP is a 400 answer, not a crash.
	resp, err := http.Post(e.addr+rpc.CallPath, rpc.ContentType, bytes.NewReader(append(binary.AppendUvarint(nil, uint64(len(garbage))), garbage...)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage POST: %s", resp.Status)
	}
	c := dial(t, e)
	mustOK(t, call(t, c, "u", &api.Request{Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}))
}

func TestBadHandshake(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{})
	resp, err := http.Get(e.addr + rpc.ConnPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain GET: %s", resp.Status)
	}
	resp, err = http.Get(e.addr + "/rpc/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %s", resp.Status)
	}
	// Dialling something that is not a Nimbus server fails clearly.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if _, err := rpc.Dial(context.Background(), other.URL, rpc.ConnOptions{}); !errors.Is(err, rpc.ErrProtocol) {
		t.Fatalf("dial non-nimbus: %v", err)
	}
}

// TestConcurrentMultiplexing runs many goroutines over one connection with a
// small inflight bound; every response must reach its own caller.
func TestConcurrentMultiplexing(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{MaxInflight: 4})
	c := dial(t, e)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var id uint64 = 1 << 32
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				mu.Lock()
				id++
				my := id
				mu.Unlock()
				payload := []byte(fmt.Sprintf("%d/%d", g, i))
				var req *api.Request
				if i%3 == 0 {
					req = &api.Request{RequestId: my, User: "u", Body: &api.Request_Stat{Stat: &api.StatRequest{Path: fmt.Sprintf("/nope%d", g)}}}
				} else {
					req = &api.Request{RequestId: my, Body: &api.Request_Echo{Echo: &api.EchoRequest{Payload: payload}}}
				}
				resp, err := c.Call(context.Background(), req)
				if err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if oe := rpc.ErrorFromProto(resp.GetError()); !errors.Is(oe, meta.ErrNotFound) || oe.Path != fmt.Sprintf("/nope%d", g) {
						errs <- fmt.Errorf("stat: %v", oe)
						return
					}
				} else if !bytes.Equal(resp.GetEcho().GetPayload(), payload) || resp.GetRequestId() != my {
					errs <- fmt.Errorf("echo %s got %q", payload, resp.GetEcho().GetPayload())
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestShutdownLetsInflightFinish: a request in flight when Shutdown starts
// gets its answer; then the connection is closed.
func TestShutdownLetsInflightFinish(t *testing.T) {
	fs := metatest.NewMemFS()
	arrived, release := make(chan struct{}), make(chan struct{})
	fs.Hook = func(ctx context.Context, m string) error {
		if m == "mkdirs" {
			close(arrived)
			<-release
		}
		return nil
	}
	e := start(t, fs, rpc.ServerOptions{})
	c := dial(t, e)
	res := make(chan error, 1)
	go func() {
		resp, err := c.Call(context.Background(), &api.Request{RequestId: 1, User: "u", Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/x"}}})
		if err == nil && resp.GetError() != nil {
			err = rpc.ErrorFromProto(resp.GetError())
		}
		res <- err
	}()
	<-arrived
	shut := make(chan error, 1)
	go func() { shut <- e.srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	<-c.Done()
	if _, err := fs.Stat(context.Background(), meta.User{}, "/x"); err != nil {
		t.Fatalf("the in-flight mkdirs was lost: %v", err)
	}
}

// TestShutdownBoundedByContext: a request that never finishes does not hold
// Shutdown past its context; the request's context is cancelled.
func TestShutdownBoundedByContext(t *testing.T) {
	fs := metatest.NewMemFS()
	arrived := make(chan struct{})
	fs.Hook = func(ctx context.Context, m string) error {
		if m == "mkdirs" {
			close(arrived)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	e := start(t, fs, rpc.ServerOptions{})
	c := dial(t, e)
	go c.Call(context.Background(), &api.Request{RequestId: 1, Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/x"}}})
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v", err)
	}
	<-c.Done()
}

// TestListingNames: a listing goes over the wire with names relative to the
// listed path and comes back with whole paths, for the root, a nested
// directory named uncleanly, and a file (whose listing is itself).
func TestListingNames(t *testing.T) {
	for _, c := range []struct {
		dir   string
		paths []string
		wire  []string
	}{
		{"/", []string{"/a", "/b"}, []string{"a", "b"}},
		{"/x/y", []string{"/x/y/a", "/x/y/bc"}, []string{"a", "bc"}},
		{"/x//y/", []string{"/x/y/a"}, []string{"a"}},
		{"/x/f", []string{"/x/f"}, []string{""}},
		{"/x", []string{"/elsewhere/z"}, []string{"/elsewhere/z"}}, // not a child: sent whole
	} {
		l := &meta.Listing{Remaining: 3}
		for _, p := range c.paths {
			l.Entries = append(l.Entries, meta.FileStatus{Path: p, FileID: 9})
		}
		w := rpc.ListingToProto(c.dir, l)
		var wire []string
		for _, e := range w.GetEntries() {
			wire = append(wire, e.GetPath())
		}
		if !slices.Equal(wire, c.wire) {
			t.Errorf("list %s: wire names %q, want %q", c.dir, wire, c.wire)
		}
		back := rpc.ListingFromProto(c.dir, w)
		var got []string
		for _, e := range back.Entries {
			got = append(got, e.Path)
		}
		if !slices.Equal(got, c.paths) || back.Remaining != 3 || back.Entries[0].FileID != 9 {
			t.Errorf("list %s: round trip %q (remaining %d), want %q", c.dir, got, back.Remaining, c.paths)
		}
	}
}

// TestBlockedWriteDoesNotStallConnection: while a write is blocked in the
// file system, later requests on the same connection, a stat and another
// write, are still read and answered.
func TestBlockedWriteDoesNotStallConnection(t *testing.T) {
	fs := metatest.NewMemFS()
	arrived, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	fs.Hook = func(ctx context.Context, m string) error {
		if m == "mkdirs" && first.CompareAndSwap(false, true) {
			close(arrived)
			<-release
		}
		return nil
	}
	e := start(t, fs, rpc.ServerOptions{})
	c := dial(t, e)
	blocked := make(chan *api.Response, 1)
	go func() {
		resp, err := c.Call(context.Background(), &api.Request{RequestId: 1, User: "u", Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/x"}}})
		if err != nil {
			t.Error(err)
		}
		blocked <- resp
	}()
	<-arrived
	for i, body := range []*api.Request{
		{Body: &api.Request_Stat{Stat: &api.StatRequest{Path: "/"}}},
		{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/y"}}},
	} {
		body.RequestId, body.User = uint64(10+i), "u"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.Call(ctx, body)
		cancel()
		if err != nil {
			t.Fatalf("request %d behind the blocked write: %v (the connection stopped reading)", i, err)
		}
		mustOK(t, resp)
	}
	select {
	case <-blocked:
		t.Fatal("the blocked write answered before it was released")
	default:
	}
	close(release)
	if resp := <-blocked; resp.GetError() != nil {
		t.Fatalf("blocked write: %v", resp.GetError())
	}
	for _, p := range []string{"/x", "/y"} {
		if _, err := fs.Stat(context.Background(), meta.User{}, p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// TestShutdownDrainsInvocations: an invocation (CallPath) in flight when
// Shutdown starts holds it until answered; one that arrives meanwhile is
// answered 503 (not run). A server drains its requests this way before it
// leaves its coordinator (server.Server.Stop).
func TestShutdownDrainsInvocations(t *testing.T) {
	fs := metatest.NewMemFS()
	arrived, release := make(chan struct{}), make(chan struct{})
	fs.Hook = func(ctx context.Context, m string) error {
		if m == "mkdirs" {
			close(arrived)
			<-release
		}
		return nil
	}
	e := start(t, fs, rpc.ServerOptions{})
	ctx := context.Background()
	res := make(chan error, 1)
	go func() {
		resp, err := rpc.CallHTTP(ctx, nil, e.addr, &api.Request{RequestId: 1, User: "u", Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/x"}}}, 0)
		if err == nil && resp.GetError() != nil {
			err = rpc.ErrorFromProto(resp.GetError())
		}
		res <- err
	}()
	<-arrived
	shut := make(chan error, 1)
	go func() { shut <- e.srv.Shutdown(ctx) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with an invocation in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	_, err := rpc.CallHTTP(ctx, nil, e.addr, &api.Request{RequestId: 2, User: "u", Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/y"}}}, 0)
	var se *rpc.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
		t.Fatalf("an invocation during Shutdown: %v, want 503", err)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("in-flight invocation: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := fs.Stat(ctx, meta.User{}, "/y"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the refused invocation ran: %v", err)
	}
}
