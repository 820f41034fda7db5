package webhdfs

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// env is a gateway over a file system on an httptest server.
type env struct {
	t   testing.TB
	fs  meta.FileSystem
	mem *countFS // what the gateway called
	srv *httptest.Server
	reg *prometheus.Registry
	c   *http.Client // does not follow redirects
}

// newEnv serves fs (the real engine on a fresh Pebble store when nil; see
// openEngine) with cfg (DefaultConfig with Superuser "root" when nil).
func newEnv(t testing.TB, fs meta.FileSystem, cfg *Config) *env {
	t.Helper()
	e := &env{t: t, reg: prometheus.NewRegistry()}
	if fs == nil {
		fs = openEngine(t)
	}
	e.mem = newCountFS(fs)
	e.fs = e.mem
	c := DefaultConfig()
	c.Superuser = "root"
	if cfg != nil {
		c = *cfg
	}
	c.Registerer = e.reg
	h, err := New(e.fs, c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"/", h)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	e.c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not JSON (%v): %q", err, r.body)
	}
	return m
}

// do sends method to PathPrefix+path?query with body (nil: none) and does
// not follow redirects.
func (e *env) do(method, path, query string, body io.Reader) resp {
	e.t.Helper()
	u := e.srv.URL + PathPrefix + (&url.URL{Path: path}).EscapedPath()
	if query != "" {
		u += "?" + query
	}
	return e.doURL(method, u, body, "")
}

func (e *env) doURL(method, u string, body io.Reader, contentType string) resp {
	e.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := e.c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, u, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// put writes a file through the two-step CREATE as user.
func (e *env) put(user, path, data string, extra string) {
	e.t.Helper()
	q := "op=CREATE&overwrite=true&user.name=" + user
	if extra != "" {
		q += "&" + extra
	}
	r := e.do("PUT", path, q, nil)
	if r.status != http.StatusTemporaryRedirect {
		e.t.Fatalf("CREATE %s step 1: status %d, body %s", path, r.status, r.body)
	}
	r = e.doURL("PUT", r.header.Get("Location"), strings.NewReader(data), "application/octet-stream")
	if r.status != http.StatusCreated {
		e.t.Fatalf("CREATE %s step 2: status %d, body %s", path, r.status, r.body)
	}
}

// get reads a file through the two-step OPEN.
func (e *env) get(user, path, extra string) resp {
	e.t.Helper()
	q := "op=OPEN&user.name=" + user
	if extra != "" {
		q += "&" + extra
	}
	r := e.do("GET", path, q, nil)
	if r.status != http.StatusTemporaryRedirect {
		return r
	}
	return e.doURL("GET", r.header.Get("Location"), nil, "")
}

// wantError checks a RemoteException response.
func wantError(t *testing.T, r resp, status int, exception string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	m := r.json(t)
	re, ok := m["RemoteException"].(map[string]any)
	if !ok {
		t.Fatalf("no RemoteException in %s", r.body)
	}
	if re["exception"] != exception {
		t.Errorf("exception %v, want %s (body %s)", re["exception"], exception, r.body)
	}
	cls, _ := re["javaClassName"].(string)
	if !strings.HasSuffix(cls, "."+exception) {
		t.Errorf("javaClassName %q does not name %s", cls, exception)
	}
	if msg, _ := re["message"].(string); msg == "" {
		t.Errorf("empty message")
	}
}
