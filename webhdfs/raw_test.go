package webhdfs

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReservedRawOverHTTP: /.reserved/raw paths pass through the gateway
// (and Intercept) to the engine: raw.* attributes set there by the
// superuser, seen only there; a plain path refuses them with HDFS's words.
func TestReservedRawOverHTTP(t *testing.T) {
	fs := openEngine(t)
	e := &env{t: t, reg: prometheus.NewRegistry(), fs: fs}
	c := DefaultConfig()
	c.Superuser = "root"
	c.Registerer = e.reg
	h, err := New(fs, c)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h.Intercept(http.NotFoundHandler()))
	t.Cleanup(e.srv.Close)
	e.c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	wantStatus(t, e.do("PUT", "/d", "op=MKDIRS&permission=777&user.name=alice", nil), 200)
	set := "op=SETXATTR&xattr.name=raw.k&xattr.value=%22v%22&flag=CREATE"
	wantError(t, e.do("PUT", "/.reserved/raw/d", set+"&user.name=alice", nil), 403, "AccessControlException")
	r := e.do("PUT", "/d", set+"&user.name=root", nil)
	wantError(t, r, 403, "AccessControlException")
	if !strings.Contains(string(r.body), "User doesn't have permission for xattr: raw.k") {
		t.Fatalf("plain-path refusal: %s", r.body)
	}
	wantStatus(t, e.do("PUT", "/.reserved/raw/d", set+"&user.name=root", nil), 200)

	r = e.do("GET", "/d", "op=LISTXATTRS&user.name=root", nil)
	wantStatus(t, r, 200)
	if strings.Contains(string(r.body), "raw.k") {
		t.Fatalf("plain LISTXATTRS shows raw.k: %s", r.body)
	}
	r = e.do("GET", "/.reserved/raw/d", "op=GETXATTRS&encoding=text&user.name=root", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), `"name":"raw.k"`) {
		t.Fatalf("raw GETXATTRS: %s", r.body)
	}
	r = e.do("GET", "/.reserved/raw/d", "op=GETFILESTATUS&user.name=bob", nil)
	wantStatus(t, r, 200)
	if !strings.Contains(string(r.body), `"type":"DIRECTORY"`) {
		t.Fatalf("raw GETFILESTATUS: %s", r.body)
	}
	wantStatus(t, e.do("GET", "/.reserved/raw", "op=LISTSTATUS&user.name=bob", nil), 200)
	r = e.do("PUT", "/.reserved", "op=MKDIRS&user.name=root", nil)
	if r.status != 400 || !strings.Contains(string(r.body), `File name \".reserved\" is reserved and cannot be created.`) {
		t.Fatalf("MKDIRS /.reserved: %d %s", r.status, r.body)
	}
	r = e.do("PUT", "/.reserved/raw/d/e", "op=MKDIRS&user.name=root", nil)
	if r.status < 400 || !strings.Contains(string(r.body), "only reads and xattr operations are supported under /.reserved/raw") {
		t.Fatalf("MKDIRS under /.reserved/raw: %d %s", r.status, r.body)
	}
}
