package webhdfs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// uploadInline is the inline threshold of openBlockEngine: bodies up to
// WriteChunk (64 KiB) take the one-step CreateFile path, bodies up to this
// are streamed into content rows, larger ones into blocks.
const uploadInline = 128 << 10

// openBlockEngine is openEngine with block storage (wrapped by faulty, so a
// test can make it fail) and the server's default inline threshold.
func openBlockEngine(t testing.TB) (meta.FileSystem, *faultyBlocks) {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatalf("pebblestore.Open: %v", err)
	}
	bs, err := local.Open(t.TempDir(), local.DefaultConfig())
	if err != nil {
		t.Fatalf("local.Open: %v", err)
	}
	fb := &faultyBlocks{Store: bs}
	cfg := namespace.DefaultConfig()
	cfg.Superuser = "root"
	cfg.Groups = func(string) []string { return nil }
	cfg.InlineThreshold = uploadInline
	cfg.Blocks = fb
	eng, err := namespace.New(st, cfg)
	if err != nil {
		t.Fatalf("namespace.New: %v", err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = bs.Close()
		_ = st.Close()
	})
	if err := eng.SetPermission(context.Background(), meta.User{Name: "root"}, "/", 0o777); err != nil {
		t.Fatalf("chmod /: %v", err)
	}
	return eng, fb
}

// faultyBlocks is a block store whose writers fail every Write while fail is
// set: a disk that goes bad under an upload.
type faultyBlocks struct {
	blocks.Store
	fail atomic.Bool
}

func (f *faultyBlocks) Create(ctx context.Context, id blocks.ID) (blocks.Writer, error) {
	w, err := f.Store.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	return &faultyWriter{Writer: w, f: f}, nil
}

func (f *faultyBlocks) OpenAppend(ctx context.Context, id blocks.ID, gs uint64) (blocks.Writer, error) {
	w, err := f.Store.OpenAppend(ctx, id, gs)
	if err != nil {
		return nil, err
	}
	return &faultyWriter{Writer: w, f: f}, nil
}

type faultyWriter struct {
	blocks.Writer
	f *faultyBlocks
}

func (w *faultyWriter) Write(b []byte) (int, error) {
	if w.f.fail.Load() {
		return 0, fmt.Errorf("injected: write: input/output error")
	}
	return w.Writer.Write(b)
}

// payload is n bytes that differ from one seed to the next.
func payload(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>9)
	}
	return b
}

// rawUpload sends method to PathPrefix+path?query on e's server over a bare
// TCP connection: headers announcing announced bytes (chunked when announced
// < 0), then body, then it closes the connection — a client cut off mid
// upload. It waits until the server has finished with the request.
func (e *env) rawUpload(method, path, query string, announced int, body []byte, op string) {
	e.t.Helper()
	before := requestCount(e.t, e, op)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	var w bytes.Buffer
	fmt.Fprintf(&w, "%s %s%s?%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n", method, PathPrefix, path, query)
	if announced < 0 {
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		const chunk = 50000
		b := body
		for ; len(b) >= chunk; b = b[chunk:] {
			fmt.Fprintf(&w, "%x\r\n%s\r\n", chunk, b[:chunk])
		}
		// The last chunk announces more than is sent, and no terminating
		// chunk follows.
		fmt.Fprintf(&w, "%x\r\n%s", chunk, b)
	} else {
		fmt.Fprintf(&w, "Content-Length: %d\r\n\r\n", announced)
		w.Write(body)
	}
	if _, err := c.Write(w.Bytes()); err != nil {
		e.t.Fatal(err)
	}
	c.Close()
	e.waitRequests(op, before+1)
}

// waitRequests waits until requests_total of op, any code, reaches n.
func (e *env) waitRequests(op string, n float64) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for requestCount(e.t, e, op) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("the server did not finish %s request %v", op, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestCount sums requests_total{op} over codes.
func requestCount(t testing.TB, e *env, op string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_webhdfs_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "op" && lp.GetValue() == op {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// gauge reads a label-less counter of the registry.
func metricValue(t testing.TB, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// levelLog records the level of every log record.
type levelLog struct {
	mu   sync.Mutex
	recs []string
}

func (l *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	return nil
}
func (l *levelLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levelLog) WithGroup(string) slog.Handler      { return l }

func (l *levelLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if strings.HasPrefix(r, "ERROR") || strings.HasPrefix(r, "WARN") {
			out = append(out, r)
		}
	}
	return out
}

// wantOnly checks that dir holds exactly names (no staging file left).
func wantOnly(t *testing.T, fs meta.FileSystem, dir string, names ...string) {
	t.Helper()
	l, err := fs.List(context.Background(), meta.User{Name: "root"}, dir, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range l.Entries {
		_, name := meta.ParentPath(en.Path)
		got = append(got, name)
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// TestCutUploadIsNotPublished: a CREATE whose body ends before its
// Content-Length (or before a chunked body's last chunk) fails, on every
// path the gateway has (one-step small file, streamed inline file, block
// file), for a new file and over an existing one: the new file is gone, the
// old one intact, and an immediate retry succeeds.
func TestCutUploadIsNotPublished(t *testing.T) {
	logs := &levelLog{}
	cfg := DefaultConfig()
	cfg.Logger = slog.New(logs)
	fs, _ := openBlockEngine(t)
	e := newEnv(t, fs, &cfg)
	ctx, root := context.Background(), meta.User{Name: "root"}
	old := payload(1, 3000)
	for _, size := range []int{50 << 10, 100 << 10, 3 << 20} {
		for _, chunked := range []bool{false, true} {
			for _, overwrite := range []bool{false, true} {
				name := fmt.Sprintf("%s/f-%d-%v-%v", "/cut", size, chunked, overwrite)
				t.Run(name, func(t *testing.T) {
					e.t = t
					if overwrite {
						e.put("alice", name, string(old), "")
					}
					body := payload(2, size)
					announced := len(body)
					if chunked {
						announced = -1
					}
					cut := body
					if !chunked {
						cut = body[:len(body)*9/10]
					}
					q := "op=CREATE&data=true&user.name=alice&overwrite=" + fmt.Sprint(overwrite)
					e.rawUpload("PUT", name, q, announced, cut, "CREATE")
					st, err := fs.Stat(ctx, root, name)
					switch {
					case overwrite && err != nil:
						t.Fatalf("the old file is gone: %v", err)
					case overwrite:
						got, err := fs.Read(ctx, root, name, 0, 1<<30)
						if err != nil || !bytes.Equal(got, old) || st.UnderConstruction {
							t.Fatalf("old file changed: %d bytes (want %d), open %v, %v", len(got), len(old), st.UnderConstruction, err)
						}
					case err == nil:
						t.Fatalf("a cut upload is visible: %+v", st)
					case meta.KindOf(err) != meta.KindNotFound:
						t.Fatal(err)
					}
					// Retrying at once succeeds: no lease lingers.
					e.put("alice", name, string(body), "")
					if got := e.get("alice", name, ""); !bytes.Equal(got.body, body) {
						t.Fatalf("retry: read back %d bytes, want %d", len(got.body), len(body))
					}
				})
			}
		}
	}
	e.t = t
	l, err := fs.List(ctx, root, "/cut", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range l.Entries {
		if strings.Contains(en.Path, stagingSuffix) {
			t.Errorf("staging file left behind: %s", en.Path)
		}
	}
	if n := metricValue(t, e, "nimbus_webhdfs_client_disconnects_total"); n != 12 {
		t.Errorf("client_disconnects_total = %v, want 12", n)
	}
	if errs := logs.errors(); len(errs) > 0 {
		t.Errorf("cut uploads logged as errors or warnings: %q", errs)
	}
}

// TestCutAppendIsUndone: an APPEND cut short leaves the file as it was, on
// an inline file and a block file.
func TestCutAppendIsUndone(t *testing.T) {
	fs, _ := openBlockEngine(t)
	e := newEnv(t, fs, nil)
	ctx, root := context.Background(), meta.User{Name: "root"}
	for _, size := range []int{1000, 300 << 10} {
		name := fmt.Sprintf("/app-%d", size)
		orig := payload(3, size)
		e.put("alice", name, string(orig), "")
		more := payload(4, 2<<20)
		e.rawUpload("POST", name, "op=APPEND&data=true&user.name=alice", len(more), more[:1<<20], "APPEND")
		st, err := fs.Stat(ctx, root, name)
		if err != nil || st.UnderConstruction || st.Length != int64(size) {
			t.Fatalf("%s after a cut append: %+v, %v; want %d bytes, closed", name, st, err, size)
		}
		got, err := fs.Read(ctx, root, name, 0, 1<<30)
		if err != nil || !bytes.Equal(got, orig) {
			t.Fatalf("%s content changed by a cut append (%d bytes, %v)", name, len(got), err)
		}
		r := e.doURL("POST", e.srv.URL+PathPrefix+name+"?op=APPEND&data=true&user.name=alice", bytes.NewReader(more), "")
		if r.status != 200 {
			t.Fatalf("append retry: %d %s", r.status, r.body)
		}
		if st, _ := fs.Stat(ctx, root, name); st.Length != int64(size+len(more)) {
			t.Fatalf("after the retry: %d bytes", st.Length)
		}
	}
}

// TestStalledUploadTimesOut: a client that keeps the connection open but
// stops sending loses the upload after BodyIdleTimeout, with nothing kept.
func TestStalledUploadTimesOut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BodyIdleTimeout = 300 * time.Millisecond
	fs, _ := openBlockEngine(t)
	e := newEnv(t, fs, &cfg)
	ctx, root := context.Background(), meta.User{Name: "root"}
	e.put("alice", "/old", "old contents", "")
	for _, tc := range []struct{ path, query string }{
		{"/new-small", "op=CREATE&data=true&user.name=alice"},
		{"/new-big", "op=CREATE&data=true&user.name=alice"},
		{"/old", "op=CREATE&data=true&overwrite=true&user.name=alice"},
	} {
		size := 40 << 10
		if tc.path == "/new-big" {
			size = 1 << 20
		}
		c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "PUT %s%s?%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", PathPrefix, tc.path, tc.query, size)
		c.Write(payload(5, size/2))
		// Slow but steady data keeps the upload alive past the timeout.
		for range 4 {
			time.Sleep(150 * time.Millisecond)
			c.Write([]byte("x"))
		}
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: no answer to a stalled upload: %v", tc.path, err)
		}
		body, _ := io.ReadAll(res.Body)
		c.Close()
		if res.StatusCode != 400 || !strings.Contains(string(body), "no data for 300ms") {
			t.Fatalf("%s: stalled upload answered %d %s %v", tc.path, res.StatusCode, body, res.Header)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: answered after %v", tc.path, d)
		}
		st, err := fs.Stat(ctx, root, tc.path)
		if tc.path == "/old" {
			if err != nil || st.Length != int64(len("old contents")) {
				t.Fatalf("old file after a stalled overwrite: %+v %v", st, err)
			}
		} else if meta.KindOf(err) != meta.KindNotFound {
			t.Fatalf("%s after a stalled upload: %+v %v", tc.path, st, err)
		}
	}
	wantOnly(t, fs, "/", "old")
}

// TestBlockFailureRemovesUpload: a block store failing under an upload
// fails it (500), removes the file and releases its lease: a retry once the
// disk is back succeeds at once.
func TestBlockFailureRemovesUpload(t *testing.T) {
	fs, fb := openBlockEngine(t)
	e := newEnv(t, fs, nil)
	ctx, root := context.Background(), meta.User{Name: "root"}
	e.put("alice", "/keep", string(payload(6, 500<<10)), "")
	body := payload(7, 2<<20)
	for _, tc := range []struct {
		path, query string
		gone        bool
	}{
		{"/new", "op=CREATE&data=true&user.name=alice", true},
		{"/keep", "op=CREATE&data=true&overwrite=true&user.name=alice", false},
	} {
		fb.fail.Store(true)
		r := e.doURL("PUT", e.srv.URL+PathPrefix+tc.path+"?"+tc.query, bytes.NewReader(body), "")
		fb.fail.Store(false)
		if r.status != 500 {
			t.Fatalf("%s: upload on a failing disk answered %d %s", tc.path, r.status, r.body)
		}
		st, err := fs.Stat(ctx, root, tc.path)
		if tc.gone && meta.KindOf(err) != meta.KindNotFound {
			t.Fatalf("%s after a failed upload: %+v, %v", tc.path, st, err)
		}
		if !tc.gone && (err != nil || st.Length != 500<<10 || st.UnderConstruction) {
			t.Fatalf("%s after a failed overwrite: %+v, %v", tc.path, st, err)
		}
		r = e.doURL("PUT", e.srv.URL+PathPrefix+tc.path+"?op=CREATE&data=true&overwrite=true&user.name=alice", bytes.NewReader(body), "")
		if r.status != 201 {
			t.Fatalf("%s: retry answered %d %s", tc.path, r.status, r.body)
		}
	}
	wantOnly(t, fs, "/", "keep", "new")
}

// TestRawPathsRefused: a path with "." or ".." components or "//" is refused
// with 400 naming it, as HDFS does, also behind an http.ServeMux (which
// would otherwise answer 301 to the cleaned path, and a client following it
// would act on another file).
func TestRawPathsRefused(t *testing.T) {
	fs := openEngine(t)
	h, err := New(fs, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"/", h)
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") })
	srv := httptest.NewServer(h.Intercept(mux))
	t.Cleanup(srv.Close)
	ctx, root := context.Background(), meta.User{Name: "root"}
	if err := fs.Mkdirs(ctx, root, "/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path, named string }{
		{"DELETE", "/a/../b", "/a/../b"},
		{"DELETE", "/a/./b", "/a/./b"},
		{"GET", "/a//b", "/a//b"},
		{"GET", "//a", "//a"},
		{"PUT", "/a/b/..", "/a/b/.."},
	} {
		op := map[string]string{"DELETE": "DELETE&recursive=true", "GET": "GETFILESTATUS", "PUT": "MKDIRS"}[tc.method]
		req, _ := http.NewRequest(tc.method, srv.URL+PathPrefix+tc.path+"?user.name=root&op="+op, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := resp{status: res.StatusCode, header: res.Header, body: body}
		wantError(t, r, 400, "InvalidPathException")
		if !strings.Contains(string(body), tc.named) {
			t.Errorf("%s %s: message does not name the path: %s", tc.method, tc.path, body)
		}
	}
	for _, p := range []string{"/a", "/a/b"} {
		if _, err := fs.Stat(ctx, root, p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A trailing slash is fine, and other paths still go through the mux.
	res, err := c.Get(srv.URL + PathPrefix + "/a/?op=GETFILESTATUS")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("trailing slash: %v %v", res, err)
	}
	res.Body.Close()
	res, err = c.Get(srv.URL + "/other")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/other through the mux: %v %v", res, err)
	}
	res.Body.Close()
}

// TestMalformedQueryNamed: a query with a bad escape is reported as such,
// not as a missing op.
func TestMalformedQueryNamed(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, q := range []string{"%zz=1", "op=GETFILESTATUS&x=%zz", "op%zz=1"} {
		r := e.doURL("GET", e.srv.URL+PathPrefix+"/?"+q, nil, "")
		wantError(t, r, 400, "IllegalArgumentException")
		if msg := string(r.body); !strings.Contains(msg, "malformed query") || !strings.Contains(msg, "%zz") {
			t.Errorf("?%s: %s", q, msg)
		}
	}
}

// blockingFS blocks in Stat until the request's context ends.
type blockingFS struct {
	meta.FileSystem
	in chan struct{}
}

func (b *blockingFS) Stat(ctx context.Context, u meta.User, p string) (*meta.FileStatus, error) {
	if p == "/slow" {
		b.in <- struct{}{}
		<-ctx.Done()
		return nil, meta.WrapOp("stat", p, ctx.Err())
	}
	return b.FileSystem.Stat(ctx, u, p)
}

// TestClientDisconnectNotAnError: a request whose client hangs up is counted
// in client_disconnects_total and logged at debug level, never as a 500.
func TestClientDisconnectNotAnError(t *testing.T) {
	logs := &levelLog{}
	cfg := DefaultConfig()
	cfg.Logger = slog.New(logs)
	bfs := &blockingFS{FileSystem: openEngine(t), in: make(chan struct{}, 1)}
	e := newEnv(t, bfs, &cfg)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s/slow?op=GETFILESTATUS HTTP/1.1\r\nHost: x\r\n\r\n", PathPrefix)
	<-bfs.in
	c.Close()
	e.waitRequests("GETFILESTATUS", 1)
	if n := counter(t, e, "GETFILESTATUS", "500"); n != 0 {
		t.Errorf("a client hang-up counted as a 500")
	}
	if n := counter(t, e, "GETFILESTATUS", "499"); n != 1 {
		t.Errorf("requests_total{GETFILESTATUS,499} = %v, want 1", n)
	}
	if n := metricValue(t, e, "nimbus_webhdfs_client_disconnects_total"); n != 1 {
		t.Errorf("client_disconnects_total = %v, want 1", n)
	}
	if errs := logs.errors(); len(errs) > 0 {
		t.Errorf("a client hang-up was logged: %q", errs)
	}
}

// TestPermissionErrorNamesPaths: the message names the request's path and
// the ancestor that denied access, as the CLI does.
func TestPermissionErrorNamesPaths(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx, root := context.Background(), meta.User{Name: "root"}
	if err := e.fs.SetPermission(ctx, root, "/", 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.do("PUT", "/x", "op=MKDIRS&user.name=alice", nil)
	wantError(t, r, 403, "AccessControlException")
	msg, _ := r.json(t)["RemoteException"].(map[string]any)["message"].(string)
	if want := "Permission denied: mkdirs /x: permission denied (at /: user alice needs -wx on / (drwxr-xr-x root:"; !strings.HasPrefix(msg, want) {
		t.Errorf("MKDIRS /x as alice: message %q", msg)
	}
	// When the engine names the request's own path, nothing is added.
	if err := e.fs.Mkdirs(ctx, root, "/d", 0o700); err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", "/d", "op=LISTSTATUS&user.name=alice", nil)
	msg, _ = r.json(t)["RemoteException"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, " /d: permission denied (") || strings.Contains(msg, "(at ") {
		t.Errorf("LISTSTATUS /d as alice: message %q", msg)
	}
}

// BenchmarkUploadHTTP: an 8 MiB CREATE over loopback HTTP into block
// storage, body idle deadline included (it is pushed forward on every read).
func BenchmarkUploadHTTP(b *testing.B) {
	fs, _ := openBlockEngine(b)
	e := newEnv(b, fs, nil)
	body := payload(9, 8<<20)
	b.SetBytes(int64(len(body)))
	for i := 0; b.Loop(); i++ {
		r := e.doURL("PUT", fmt.Sprintf("%s%s/b%d?op=CREATE&data=true&user.name=alice", e.srv.URL, PathPrefix, i), bytes.NewReader(body), "")
		if r.status != 201 {
			b.Fatalf("%d %s", r.status, r.body)
		}
	}
}

// TestBlockFailureUndoesAppend: an APPEND that fails on a bad disk, served
// over the engine itself (which can close a file at a given length), leaves
// the file closed at its old length: a retry succeeds at once.
func TestBlockFailureUndoesAppend(t *testing.T) {
	fs, fb := openBlockEngine(t)
	h, err := New(fs, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := any(fs).(completerAt); !ok {
		t.Fatal("the engine does not implement CompleteAt")
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, root := context.Background(), meta.User{Name: "root"}
	for _, size := range []int{1000, 300 << 10} {
		name := fmt.Sprintf("/f%d", size)
		orig := payload(10, size)
		if _, err := meta.CreateFile(ctx, fs, root, name, meta.CreateOptions{Client: "t"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Append(ctx, root, name, "t"); err != nil {
			t.Fatal(err)
		}
		for off := 0; off < size; off += 64 << 10 {
			if err := fs.Write(ctx, root, name, "t", int64(off), orig[off:min(size, off+64<<10)]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := fs.Complete(ctx, root, name, "t"); err != nil {
			t.Fatal(err)
		}
		appendURL := srv.URL + PathPrefix + name + "?op=APPEND&data=true&user.name=root"
		fb.fail.Store(true)
		res, err := http.Post(appendURL, "application/octet-stream", bytes.NewReader(payload(11, 2<<20)))
		fb.fail.Store(false)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 500 {
			t.Fatalf("%s: append on a failing disk answered %d", name, res.StatusCode)
		}
		st, err := fs.Stat(ctx, root, name)
		if err != nil || st.UnderConstruction || st.Length != int64(size) {
			t.Fatalf("%s after a failed append: %+v, %v", name, st, err)
		}
		if got, err := fs.Read(ctx, root, name, 0, 1<<30); err != nil || !bytes.Equal(got, orig) {
			t.Fatalf("%s: content after a failed append: %d bytes, %v", name, len(got), err)
		}
		res, err = http.Post(appendURL, "application/octet-stream", strings.NewReader("tail"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: retry answered %d", name, res.StatusCode)
		}
	}
}
