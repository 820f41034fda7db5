package webhdfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// failingFS returns err from Stat; everything else is a metatest.MemFS.
type failingFS struct {
	*metatest.MemFS
	err error
}

func (f *failingFS) Stat(ctx context.Context, u meta.User, p string) (*meta.FileStatus, error) {
	return nil, f.err
}

func TestErrorTablePerKind(t *testing.T) {
	cases := []struct {
		kind      meta.Kind
		status    int
		exception string
	}{
		{meta.KindNotFound, 404, "FileNotFoundException"},
		{meta.KindExists, 403, "FileAlreadyExistsException"},
		{meta.KindNotDir, 403, "ParentNotDirectoryException"},
		{meta.KindIsDir, 404, "FileNotFoundException"},
		{meta.KindNotEmpty, 403, "PathIsNotEmptyDirectoryException"},
		{meta.KindPermission, 403, "AccessControlException"},
		{meta.KindInvalidPath, 400, "InvalidPathException"},
		{meta.KindQuota, 403, "QuotaExceededException"},
		{meta.KindBusy, 503, "RetriableException"},
		{meta.KindInvalidArgument, 400, "IllegalArgumentException"},
		{meta.KindLease, 403, "AlreadyBeingCreatedException"},
		{meta.KindTooLarge, 403, "IOException"},
		{meta.KindUnresolvedLink, 403, "UnresolvedLinkException"},
		{meta.KindUnsupported, 400, "IllegalArgumentException"},
		{meta.KindInternal, 500, "RuntimeException"},
		{meta.KindUnknown, 500, "RuntimeException"},
		// Not RetriableException: Hadoop's client must not send again
		// what may have happened.
		{meta.KindOutcomeUnknown, 403, "IOException"},
		{meta.KindWrongOwner, 503, "RetriableException"},
	}
	covered := map[meta.Kind]bool{}
	for _, c := range cases {
		covered[c.kind] = true
		err := error(errors.New("disk on fire"))
		if s := meta.Sentinel(c.kind); s != nil {
			err = meta.Errorf("stat", "/x", s, "detail %d", c.kind)
		}
		e := newEnv(t, &failingFS{MemFS: metatest.NewMemFS(), err: err}, nil)
		r := e.do("GET", "/x", "op=GETFILESTATUS", nil)
		if c.kind == meta.KindNotDir {
			// Lookups turn "not a directory" into "not found" (see
			// TestCreateFlagAndLookupsThroughFiles); CREATE's first step,
			// which also stats, keeps it.
			r = e.do("PUT", "/x", "op=CREATE", nil)
		}
		wantError(t, r, c.status, c.exception)
		if c.kind == meta.KindNotFound {
			if msg := r.json(t)["RemoteException"].(map[string]any)["message"].(string); !strings.HasPrefix(msg, "File does not exist: /x") {
				t.Errorf("not-found message %q", msg)
			}
		}
	}
	for k := meta.Kind(0); int(k) < len(wire.Exceptions); k++ {
		if !covered[k] {
			t.Errorf("kind %v has no test case", k)
		}
	}
}

// TestOutcomeUnknownBeforeDeadline: a write whose commit was cut off by
// its deadline may have happened: outcome unknown (not retried by Hadoop's
// client), not the deadline's busy (RetriableException, retried).
func TestOutcomeUnknownBeforeDeadline(t *testing.T) {
	err := &meta.OpError{Op: "stat", Path: "/x", Err: fmt.Errorf("%w: %w", meta.ErrOutcomeUnknown, context.DeadlineExceeded)}
	e := newEnv(t, &failingFS{MemFS: metatest.NewMemFS(), err: err}, nil)
	wantError(t, e.do("GET", "/x", "op=GETFILESTATUS", nil), 403, "IOException")
	e = newEnv(t, &failingFS{MemFS: metatest.NewMemFS(), err: context.DeadlineExceeded}, nil)
	wantError(t, e.do("GET", "/x", "op=GETFILESTATUS", nil), 503, "RetriableException")
}

func TestRequestErrors(t *testing.T) {
	e := newEnv(t, nil, nil)
	wantError(t, e.do("GET", "/", "op=NOSUCHOP", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("GET", "/", "", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("GET", "/", "op=MKDIRS", nil), 400, "IllegalArgumentException") // wrong method
	wantError(t, e.do("DELETE", "/", "op=OPEN", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/x", "op=MKDIRS&permission=rwx", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("DELETE", "/x", "op=DELETE&recursive=yes", nil), 400, "IllegalArgumentException")
	// ServeMux would redirect a path with "..", so ask the handler directly.
	rec := httptest.NewRecorder()
	h := NewHandler(e.fs, DefaultConfig())
	h.ServeHTTP(rec, httptest.NewRequest("GET", PathPrefix+"/a/../b?op=GETFILESTATUS", nil))
	wantError(t, resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, 400, "InvalidPathException")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/elsewhere/x?op=GETFILESTATUS", nil))
	wantError(t, resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, 400, "InvalidPathException")
	wantError(t, e.do("PUT", "/", "op=CREATESNAPSHOT&snapshotname=s", nil), 400, "IllegalArgumentException")
	wantError(t, e.do("PUT", "/", "op=SETSTORAGEPOLICY&storagepolicy=HOT", nil), 400, "IllegalArgumentException")
	wantError(t, e.doURL("GET", e.srv.URL+PathPrefix+"/x?op=GETFILESTATUS&a=%zz", nil, ""), 400, "IllegalArgumentException")
	// Names and op values are case-insensitive; unknown parameters are ignored.
	r := e.do("PUT", "/CaseDir", "OP=mkdirs&Permission=711&foo=bar&buffersize=4096&x.y.z=", nil)
	if r.status != 200 {
		t.Fatalf("case-insensitive MKDIRS: %d %s", r.status, r.body)
	}
	st := e.do("GET", "/CaseDir", "op=GetFileStatus&whatever=1", nil).json(t)["FileStatus"].(map[string]any)
	if st["permission"] != "711" {
		t.Errorf("permission %v", st["permission"])
	}
}

func TestMetricsAndServerErrorLog(t *testing.T) {
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	e := newEnv(t, &failingFS{MemFS: metatest.NewMemFS(), err: meta.Errorf("stat", "/x", meta.ErrInternal, "boom")}, &cfg)
	e.do("GET", "/x", "op=GETFILESTATUS", nil)
	e.do("GET", "/x", "op=GETFILESTATUS", nil)
	e.do("GET", "/", "op=NOPE", nil)
	if n := counter(t, e, "GETFILESTATUS", "500"); n != 2 {
		t.Errorf("requests_total{GETFILESTATUS,500} = %v, want 2", n)
	}
	if n := counter(t, e, "invalid", "400"); n != 1 {
		t.Errorf("requests_total{invalid,400} = %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "boom") || strings.Count(logs.String(), "server error") != 2 {
		t.Errorf("5xx not logged once each: %q", logs.String())
	}
	if strings.Contains(logs.String(), "NOPE") {
		t.Errorf("a 400 was logged as a server error")
	}
}

// counter reads nimbus_webhdfs_requests_total{op,code} from the registry.
func counter(t *testing.T, e *env, op, code string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nimbus_webhdfs_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["op"] == op && l["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Advertise = "ftp://x:1" },
		func(c *Config) { c.Advertise = "http://x:1/path" },
		func(c *Config) { c.DefaultUser = "" },
		func(c *Config) { c.Superuser = "a b" },
		func(c *Config) { c.ListBatch = 0 },
		func(c *Config) { c.WriteChunk = 0 },
		func(c *Config) { c.ReadChunk = -1 },
		func(c *Config) { c.BodyIdleTimeout = 0 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: Validate = %v, want ErrConfig", i, err)
		}
	}
	if _, err := New(nil, DefaultConfig()); !errors.Is(err, ErrConfig) {
		t.Errorf("New(nil) = %v", err)
	}
	_ = http.StatusOK
}

// failSecondList fails every List call after the first.
type failSecondList struct {
	meta.FileSystem
	mu    sync.Mutex
	calls int
}

func (f *failSecondList) List(ctx context.Context, u meta.User, dir, after string, limit int) (*meta.Listing, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n > 1 {
		return nil, meta.Errorf("list", dir, meta.ErrBusy, "injected")
	}
	return f.FileSystem.List(ctx, u, dir, after, limit)
}

// TestStreamedListingFailureCutsTheConnection: once a streamed listing has
// begun, a failing page must not end in well-formed JSON that a client would
// take for the whole directory.
func TestStreamedListingFailureCutsTheConnection(t *testing.T) {
	fs := &failSecondList{FileSystem: metatest.NewMemFS()}
	for i := 0; i < 5; i++ {
		if err := fs.Mkdirs(context.Background(), meta.User{Name: "root"}, fmt.Sprintf("/d/%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.ListBatch = 2
	e := newEnv(t, fs, &cfg)
	res, err := http.Get(e.srv.URL + PathPrefix + "/d?op=LISTSTATUS")
	if err != nil {
		return // cut before the buffered header went out: the client sees a failure
	}
	defer res.Body.Close()
	body, rerr := io.ReadAll(res.Body)
	var v any
	if json.Unmarshal(body, &v) == nil {
		t.Fatalf("a failed listing read as complete JSON: %s", body)
	}
	if rerr == nil {
		t.Fatalf("the body of a failed listing ended cleanly (%d bytes): the connection must be cut", len(body))
	}
}
