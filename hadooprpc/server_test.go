package hadooprpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	h "github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/tenant"
)

// testClient speaks Hadoop IPC the way Hadoop's Client does, minimally.
type testClient struct {
	t      *testing.T
	c      net.Conn
	r      *bufio.Reader
	wmu    sync.Mutex
	id     []byte
	nextID int32
}

func delimited(b []byte, m proto.Message) []byte {
	mb, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	b = protowire.AppendVarint(b, uint64(len(mb)))
	return append(b, mb...)
}

func frame(parts ...proto.Message) []byte {
	b := make([]byte, 4)
	for _, p := range parts {
		b = delimited(b, p)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func startServer(t *testing.T, fs meta.FileSystem, cfg Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	s, err := NewServer(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, auth byte) *testClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte{'h', 'r', 'p', 'c', 9, 0, auth}); err != nil {
		t.Fatal(err)
	}
	return &testClient{t: t, c: c, r: bufio.NewReader(c), id: []byte("0123456789abcdef")}
}

func (tc *testClient) header(callID int32) *h.RpcRequestHeaderProto {
	return &h.RpcRequestHeaderProto{RpcKind: h.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(), RpcOp: h.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(),
		CallId: proto.Int32(callID), ClientId: tc.id, RetryCount: proto.Int32(-1)}
}

func (tc *testClient) write(b []byte) {
	tc.wmu.Lock()
	defer tc.wmu.Unlock()
	if _, err := tc.c.Write(b); err != nil {
		tc.t.Fatal(err)
	}
}

func (tc *testClient) context(user string) {
	tc.write(frame(tc.header(-3), &h.IpcConnectionContextProto{UserInfo: &h.UserInformationProto{EffectiveUser: proto.String(user)}, Protocol: proto.String(Protocol)}))
}

// send writes a call and returns its id.
func (tc *testClient) send(method string, req proto.Message, retry int32) int32 {
	tc.wmu.Lock()
	id := tc.nextID
	tc.nextID++
	tc.wmu.Unlock()
	hd := tc.header(id)
	hd.RetryCount = proto.Int32(retry)
	tc.write(frame(hd, &h.RequestHeaderProto{MethodName: proto.String(method), DeclaringClassProtocolName: proto.String(Protocol), ClientProtocolVersion: proto.Uint64(1)}, req))
	return id
}

// recv reads one response; resp is filled when the status is SUCCESS.
func (tc *testClient) recv(resp proto.Message) (*h.RpcResponseHeaderProto, []byte, error) {
	b, err := readFrame(tc.r, 1<<20)
	if err != nil {
		return nil, nil, err
	}
	hb, rest, err := nextDelimited(b)
	if err != nil {
		return nil, nil, err
	}
	rh := &h.RpcResponseHeaderProto{}
	if err := proto.Unmarshal(hb, rh); err != nil {
		return nil, nil, err
	}
	if rh.GetStatus() != h.RpcResponseHeaderProto_SUCCESS || len(rest) == 0 {
		return rh, nil, nil
	}
	body, _, err := nextDelimited(rest)
	if err != nil {
		return nil, nil, err
	}
	if resp != nil {
		if err := proto.Unmarshal(body, resp); err != nil {
			return nil, nil, err
		}
	}
	return rh, body, nil
}

// call sends one call and waits for its answer; a remote error is returned
// as *RemoteError.
func (tc *testClient) call(method string, req, resp proto.Message) error {
	tc.t.Helper()
	id := tc.send(method, req, 0)
	rh, _, err := tc.recv(resp)
	if err != nil {
		tc.t.Fatalf("%s: %v", method, err)
	}
	if int32(rh.GetCallId()) != id {
		tc.t.Fatalf("%s: answer to call %d, sent %d", method, rh.GetCallId(), id)
	}
	if rh.GetStatus() != h.RpcResponseHeaderProto_SUCCESS {
		return &RemoteError{Class: rh.GetExceptionClassName(), Msg: rh.GetErrorMsg(), Detail: rh.GetErrorDetail()}
	}
	return nil
}

func perm(p uint32) *h.FsPermissionProto { return &h.FsPermissionProto{Perm: proto.Uint32(p)} }

func TestNamespaceCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	fs := metatest.NewMemFS()
	if _, err := meta.CreateFile(context.Background(), fs, meta.User{Name: metatest.Superuser}, "/l/f", meta.CreateOptions{Client: "c1", CreateParent: true}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, fs, Config{Registerer: reg})
	c := dial(t, addr, authNone)
	c.context(metatest.Superuser)

	var mk h.MkdirsResponseProto
	if err := c.call("mkdirs", &h.MkdirsRequestProto{Src: proto.String("/a/b"), Masked: perm(0o750), CreateParent: proto.Bool(true)}, &mk); err != nil || !mk.GetResult() {
		t.Fatalf("mkdirs: %v %v", err, mk.GetResult())
	}
	err := c.call("mkdirs", &h.MkdirsRequestProto{Src: proto.String("/x/y"), Masked: perm(0o755), CreateParent: proto.Bool(false)}, &mk)
	if re, ok := err.(*RemoteError); !ok || re.Class != "java.io.FileNotFoundException" {
		t.Fatalf("mkdirs without parent: %v", err)
	}
	var fi h.GetFileInfoResponseProto
	if err := c.call("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/a/b")}, &fi); err != nil {
		t.Fatal(err)
	}
	if fi.Fs == nil || fi.Fs.GetFileType() != h.HdfsFileStatusProto_IS_DIR || fi.Fs.GetPermission().GetPerm() != 0o750 || fi.Fs.GetOwner() != metatest.Superuser {
		t.Fatalf("getFileInfo /a/b: %v", fi.Fs)
	}
	fi.Reset()
	if err := c.call("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/missing")}, &fi); err != nil || fi.Fs != nil {
		t.Fatalf("getFileInfo of a missing path: %v %v, want no status", err, fi.Fs)
	}
	fi.Reset()
	if err := c.call("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/l/f/under-a-file")}, &fi); err != nil || fi.Fs != nil {
		t.Fatalf("getFileInfo through a file: %v %v, want no status", err, fi.Fs)
	}
	for i := range 5 {
		if err := c.call("mkdirs", &h.MkdirsRequestProto{Src: proto.String(fmt.Sprintf("/d/%d", i)), Masked: perm(0o755), CreateParent: proto.Bool(true)}, &mk); err != nil {
			t.Fatal(err)
		}
	}
	var ls h.GetListingResponseProto
	if err := c.call("getListing", &h.GetListingRequestProto{Src: proto.String("/d"), StartAfter: []byte("1"), NeedLocation: proto.Bool(false)}, &ls); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ls.GetDirList().GetPartialListing() {
		names = append(names, string(e.GetPath()))
	}
	if fmt.Sprint(names) != "[2 3 4]" || ls.GetDirList().GetRemainingEntries() != 0 {
		t.Fatalf("getListing /d after 1: %v remaining %d", names, ls.GetDirList().GetRemainingEntries())
	}
	ls.Reset()
	if err := c.call("getListing", &h.GetListingRequestProto{Src: proto.String("/nope"), StartAfter: []byte{}, NeedLocation: proto.Bool(false)}, &ls); err != nil || ls.DirList != nil {
		t.Fatalf("getListing of a missing dir: %v %v", err, ls.DirList)
	}
	var rn h.RenameResponseProto
	if err := c.call("rename", &h.RenameRequestProto{Src: proto.String("/d/0"), Dst: proto.String("/a")}, &rn); err != nil || !rn.GetResult() {
		t.Fatalf("rename into a directory: %v %v", err, rn.GetResult())
	}
	if err := c.call("rename", &h.RenameRequestProto{Src: proto.String("/zz"), Dst: proto.String("/a")}, &rn); err != nil || rn.GetResult() {
		t.Fatalf("rename of a missing source: %v %v, want false", err, rn.GetResult())
	}
	err = c.call("rename2", &h.Rename2RequestProto{Src: proto.String("/d/1"), Dst: proto.String("/d/2"), OverwriteDest: proto.Bool(false)}, &h.Rename2ResponseProto{})
	if re, ok := err.(*RemoteError); !ok || re.Class != "org.apache.hadoop.fs.FileAlreadyExistsException" {
		t.Fatalf("rename2 onto an existing path: %v", err)
	}
	var del h.DeleteResponseProto
	err = c.call("delete", &h.DeleteRequestProto{Src: proto.String("/d"), Recursive: proto.Bool(false)}, &del)
	if re, ok := err.(*RemoteError); !ok || re.Class != "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException" {
		t.Fatalf("delete of a non-empty dir: %v", err)
	}
	if err := c.call("delete", &h.DeleteRequestProto{Src: proto.String("/d"), Recursive: proto.Bool(true)}, &del); err != nil || !del.GetResult() {
		t.Fatalf("delete -r: %v %v", err, del.GetResult())
	}
	if err := c.call("setPermission", &h.SetPermissionRequestProto{Src: proto.String("/a"), Permission: perm(0o1700)}, &h.SetPermissionResponseProto{}); err != nil {
		t.Fatal(err)
	}
	if err := c.call("setOwner", &h.SetOwnerRequestProto{Src: proto.String("/a"), Username: proto.String("alice"), Groupname: proto.String("staff")}, &h.SetOwnerResponseProto{}); err != nil {
		t.Fatal(err)
	}
	fi.Reset()
	if err := c.call("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/a")}, &fi); err != nil || fi.Fs.GetPermission().GetPerm() != 0o1700 || fi.Fs.GetOwner() != "alice" || fi.Fs.GetGroup() != "staff" {
		t.Fatalf("after setPermission, setOwner: %v %v", err, fi.Fs)
	}
	var cs h.GetContentSummaryResponseProto
	if err := c.call("getContentSummary", &h.GetContentSummaryRequestProto{Path: proto.String("/a")}, &cs); err != nil || cs.GetSummary().GetDirectoryCount() != 3 {
		t.Fatalf("getContentSummary /a: %v %v", err, cs.GetSummary())
	}
	if err := c.call("setXAttr", &h.SetXAttrRequestProto{Src: proto.String("/a"), XAttr: xattrProto("user.k", []byte("v"), true), Flag: proto.Uint32(1)}, &h.SetXAttrResponseProto{}); err != nil {
		t.Fatal(err)
	}
	var gx h.GetXAttrsResponseProto
	if err := c.call("getXAttrs", &h.GetXAttrsRequestProto{Src: proto.String("/a")}, &gx); err != nil || len(gx.XAttrs) != 1 || xattrName(gx.XAttrs[0]) != "user.k" || string(gx.XAttrs[0].GetValue()) != "v" {
		t.Fatalf("getXAttrs: %v %v", err, gx.XAttrs)
	}
	err = c.call("noSuchThing", &h.GetFileInfoRequestProto{Src: proto.String("/")}, nil)
	if re, ok := err.(*RemoteError); !ok || re.Class != "org.apache.hadoop.ipc.RpcNoSuchMethodException" || re.Detail != h.RpcResponseHeaderProto_ERROR_NO_SUCH_METHOD {
		t.Fatalf("unknown method: %v", err)
	}
	// The connection still serves after an application error.
	var sd h.GetServerDefaultsResponseProto
	if err := c.call("getServerDefaults", &h.GetServerDefaultsRequestProto{}, &sd); err != nil || sd.GetServerDefaults().GetBlockSize() == 0 {
		t.Fatalf("getServerDefaults: %v %v", err, sd.GetServerDefaults())
	}
	// Calls are counted by method and exception; a method the server does
	// not have counts as "unknown", whatever name the client sent.
	for _, c := range []struct {
		method, exception string
		n                 float64
	}{{"getServerDefaults", "", 1}, {"unknown", "org.apache.hadoop.ipc.RpcNoSuchMethodException", 1}, {"delete", "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", 1}, {"delete", "", 1}, {"mkdirs", "", 6}} {
		if got := callCount(t, reg, c.method, c.exception); got != c.n {
			t.Errorf("calls_total{method=%q, exception=%q} = %v, want %v", c.method, c.exception, got, c.n)
		}
	}
}

func TestPermissionDeniedAsAccessControlException(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{})
	c := dial(t, addr, authNone)
	c.context("mallory")
	err := c.call("setOwner", &h.SetOwnerRequestProto{Src: proto.String("/"), Username: proto.String("mallory")}, &h.SetOwnerResponseProto{})
	if re, ok := err.(*RemoteError); !ok || re.Class != "org.apache.hadoop.security.AccessControlException" {
		t.Fatalf("setOwner by a user who is not the superuser: %v", err)
	}
}

func TestCallBeforeContextIsFatal(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{})
	c := dial(t, addr, authNone)
	c.send("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/")}, 0)
	rh, _, err := c.recv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rh.GetStatus() != h.RpcResponseHeaderProto_FATAL || rh.GetErrorMsg() != "Connection context not established" {
		t.Fatalf("call before context: %v", rh)
	}
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after a fatal error: %v", err)
	}
}

// TestSASLNegotiate: with security off, Hadoop's server answers a SASL
// NEGOTIATE with SUCCESS and the client goes on with simple auth.
func TestSASLNegotiate(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{})
	c := dial(t, addr, authSASL)
	neg := h.RpcSaslProto_NEGOTIATE
	c.write(frame(c.header(saslCallID), &h.RpcSaslProto{State: &neg}))
	rh, body, err := c.recv(nil)
	if err != nil {
		t.Fatal(err)
	}
	var m h.RpcSaslProto
	if err := proto.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if int32(rh.GetCallId()) != saslCallID || rh.GetStatus() != h.RpcResponseHeaderProto_SUCCESS || m.GetState() != h.RpcSaslProto_SUCCESS {
		t.Fatalf("SASL answer %v %v", rh, &m)
	}
	c.write(frame(c.header(pingCall))) // a ping is the header alone, not answered
	c.context("alice")
	if err := c.call("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/")}, &h.GetFileInfoResponseProto{}); err != nil {
		t.Fatal(err)
	}
}

func TestBadConnectionHeaderClosed(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{})
	for _, hd := range [][]byte{[]byte("hrpc\x08\x00\x00"), []byte("GET / H"), []byte("hrpc\x09\x00\x51")} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(hd)
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("header %q: read %v, want the connection closed", hd, err)
		}
		c.Close()
	}
}

func TestFrameBound(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{MaxFrame: 1024})
	c := dial(t, addr, authNone)
	c.context("alice")
	c.send("getFileInfo", &h.GetFileInfoRequestProto{Src: proto.String("/" + string(make([]byte, 2000)))}, 0)
	if _, _, err := c.recv(nil); err == nil {
		t.Fatal("a frame over the bound was served")
	}
}

// TestConcurrentCalls: many calls in flight on one connection, answered in
// any order, each once.
func TestConcurrentCalls(t *testing.T) {
	addr := startServer(t, metatest.NewMemFS(), Config{MaxCallsPerConn: 4})
	c := dial(t, addr, authNone)
	c.context(metatest.Superuser)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.send("mkdirs", &h.MkdirsRequestProto{Src: proto.String(fmt.Sprintf("/c/%d", i)), Masked: perm(0o755), CreateParent: proto.Bool(true)}, 0)
		}()
	}
	seen := map[uint32]bool{}
	for range n {
		var mk h.MkdirsResponseProto
		rh, _, err := c.recv(&mk)
		if err != nil {
			t.Fatal(err)
		}
		if rh.GetStatus() != h.RpcResponseHeaderProto_SUCCESS || !mk.GetResult() || seen[rh.GetCallId()] {
			t.Fatalf("answer %v result %v (seen %v)", rh, mk.GetResult(), seen[rh.GetCallId()])
		}
		seen[rh.GetCallId()] = true
	}
	wg.Wait()
	var ls h.GetListingResponseProto
	if err := c.call("getListing", &h.GetListingRequestProto{Src: proto.String("/c"), StartAfter: []byte{}, NeedLocation: proto.Bool(false)}, &ls); err != nil || len(ls.GetDirList().GetPartialListing()) != n {
		t.Fatalf("listing after %d concurrent mkdirs: %v %d", n, err, len(ls.GetDirList().GetPartialListing()))
	}
}

// recordingFS records the request a Delete was given.
type recordingFS struct {
	*metatest.MemFS
	mu  sync.Mutex
	got []meta.Request
}

func (r *recordingFS) Delete(ctx context.Context, u meta.User, p string, recursive bool) error {
	rq, _ := meta.RequestFrom(ctx)
	r.mu.Lock()
	r.got = append(r.got, rq)
	r.mu.Unlock()
	return r.MemFS.Delete(ctx, u, p, recursive)
}

// TestRequestIDs: a call's clientId and callId name its meta.Request, the
// same on a retry (retryCount > 0), which is marked resubmitted.
func TestRequestIDs(t *testing.T) {
	fs := &recordingFS{MemFS: metatest.NewMemFS()}
	addr := startServer(t, fs, Config{})
	c := dial(t, addr, authNone)
	c.context(metatest.Superuser)
	c.send("delete", &h.DeleteRequestProto{Src: proto.String("/x"), Recursive: proto.Bool(true)}, 0)
	c.recv(nil)
	c.nextID-- // the same call again, as Hadoop's retry policy sends it
	c.send("delete", &h.DeleteRequestProto{Src: proto.String("/x"), Recursive: proto.Bool(true)}, 1)
	c.recv(nil)
	if len(fs.got) != 2 {
		t.Fatalf("%d deletes", len(fs.got))
	}
	a, b := fs.got[0], fs.got[1]
	if a.Client == "" || a.Client != b.Client || a.ID != b.ID || a.ID == 0 || a.Resubmitted || !b.Resubmitted {
		t.Fatalf("requests %+v %+v", a, b)
	}
}

// callCount reads nimbus_hadooprpc_calls_total{method, exception} from reg.
func callCount(t *testing.T, reg *prometheus.Registry, method, exception string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_hadooprpc_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["method"] == method && l["exception"] == exception {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestListingLocations: with needLocation a file is listed with (empty)
// locations, which Hadoop's listLocatedStatus needs; a directory without.
func TestListingLocations(t *testing.T) {
	fs := metatest.NewMemFS()
	u := meta.User{Name: metatest.Superuser}
	ctx := context.Background()
	if err := fs.Mkdirs(ctx, u, "/l/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CreateFile(ctx, fs, u, "/l/f", meta.CreateOptions{Client: "c1", Perm: 0o644}, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, fs, Config{})
	c := dial(t, addr, authNone)
	c.context(metatest.Superuser)
	for _, need := range []bool{false, true} {
		var ls h.GetListingResponseProto
		if err := c.call("getListing", &h.GetListingRequestProto{Src: proto.String("/l"), StartAfter: []byte{}, NeedLocation: proto.Bool(need)}, &ls); err != nil {
			t.Fatal(err)
		}
		got := map[string]*h.HdfsFileStatusProto{}
		for _, e := range ls.GetDirList().GetPartialListing() {
			got[string(e.GetPath())] = e
		}
		f, d := got["f"], got["dir"]
		if f == nil || d == nil || f.GetFileType() != h.HdfsFileStatusProto_IS_FILE || f.GetLength() != 5 {
			t.Fatalf("needLocation %v: listing %v", need, got)
		}
		if (f.Locations != nil) != need || d.Locations != nil {
			t.Fatalf("needLocation %v: file locations %v, dir locations %v", need, f.Locations, d.Locations)
		}
		if need && (f.Locations.GetFileLength() != 5 || !f.Locations.GetIsLastBlockComplete()) {
			t.Fatalf("file locations %v", f.Locations)
		}
	}
	var closed h.IsFileClosedResponseProto
	if err := c.call("isFileClosed", &h.IsFileClosedRequestProto{Src: proto.String("/l/f")}, &closed); err != nil || !closed.GetResult() {
		t.Fatalf("isFileClosed: %v %v", err, closed.GetResult())
	}
	var bs h.GetPreferredBlockSizeResponseProto
	if err := c.call("getPreferredBlockSize", &h.GetPreferredBlockSizeRequestProto{Filename: proto.String("/l/f")}, &bs); err != nil || bs.GetBsize() == 0 {
		t.Fatalf("getPreferredBlockSize: %v %v", err, bs.GetBsize())
	}
	var ha h.HAServiceStateResponseProto
	if err := c.call("getHAServiceState", &h.HAServiceStateRequestProto{}, &ha); err != nil || ha.GetState() != h.HAServiceStateProto_ACTIVE {
		t.Fatalf("getHAServiceState: %v %v", err, ha.GetState())
	}
}

// blockingFS holds every Delete until release is closed.
type blockingFS struct {
	*metatest.MemFS
	started chan struct{}
	release chan struct{}
}

func (b *blockingFS) Delete(ctx context.Context, u meta.User, p string, recursive bool) error {
	close(b.started)
	<-b.release
	return b.MemFS.Delete(ctx, u, p, recursive)
}

// TestShutdownDrains: Shutdown answers the calls in flight before it
// closes their connection, and a connection that comes after is refused.
func TestShutdownDrains(t *testing.T) {
	fs := &blockingFS{MemFS: metatest.NewMemFS(), started: make(chan struct{}), release: make(chan struct{})}
	if err := fs.Mkdirs(context.Background(), meta.User{Name: metatest.Superuser}, "/x", 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(fs, Config{})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background(), ln) }()
	c := dial(t, ln.Addr().String(), authNone)
	c.context(metatest.Superuser)
	c.send("delete", &h.DeleteRequestProto{Src: proto.String("/x"), Recursive: proto.Bool(true)}, 0)
	<-fs.started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// The listener closes at once.
	for {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		nc.Close()
	}
	close(fs.release)
	var del h.DeleteResponseProto
	rh, _, err := c.recv(&del)
	if err != nil || rh.GetStatus() != h.RpcResponseHeaderProto_SUCCESS || !del.GetResult() {
		t.Fatalf("the call in flight during a shutdown: %v %v %v", err, rh, del.GetResult())
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("connection open after the shutdown: %v", err)
	}
}

// TestTenantLimit: a user over its --tenant-limit is refused with
// RetriableException, which Hadoop's client retries; others are not.
func TestTenantLimit(t *testing.T) {
	at := time.Unix(1e9, 0) // a clock that stands still: no token comes back
	tn, err := tenant.New(tenant.Config{Limits: map[string]float64{"mallory": 1}, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, metatest.NewMemFS(), Config{Tenants: tn})
	m := dial(t, addr, authNone)
	m.context("mallory")
	get := &h.GetFileInfoRequestProto{Src: proto.String("/")}
	if err := m.call("getFileInfo", get, &h.GetFileInfoResponseProto{}); err != nil {
		t.Fatalf("first call, within the burst: %v", err)
	}
	err = m.call("getFileInfo", get, &h.GetFileInfoResponseProto{})
	if re, ok := err.(*RemoteError); !ok || re.Class != "org.apache.hadoop.ipc.RetriableException" {
		t.Fatalf("second call over the limit: %v, want RetriableException", err)
	}
	a := dial(t, addr, authNone)
	a.context("alice")
	if err := a.call("getFileInfo", get, &h.GetFileInfoResponseProto{}); err != nil {
		t.Fatalf("another user: %v", err)
	}
}
