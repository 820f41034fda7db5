package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
)

// The nimbus:// target: the real client and RPC stack, over an in-memory
// file system, so the driver's Nimbus path is tested without a server.
func TestBenchOverNimbusRPC(t *testing.T) {
	rs := rpc.NewServer(metatest.NewMemFS(), rpc.DefaultServerOptions())
	srv := httptest.NewServer(rs.Handler())
	defer func() { rs.Shutdown(context.Background()); srv.Close() }()
	target := "nimbus://" + strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()

	code, out, stderr := runBench("echo", "--target", target, "--clients", "1,3", "--ops-per-client", "50", "--json", filepath.Join(dir, "echo.json"))
	if code != 0 {
		t.Fatalf("echo: exit %d\n%s\n%s", code, out, stderr)
	}
	doc, err := bench.ReadDocumentFile(filepath.Join(dir, "echo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range doc.Results {
		ops = append(ops, r.Op)
		if r.System != "nimbus-rpc" || r.Ops != int64(50*r.Clients) {
			t.Fatalf("echo result %+v", r)
		}
	}
	if strings.Join(ops, ",") != "echo,echo-http,echo,echo-http" {
		t.Fatalf("echo ops %v", ops)
	}
	for _, op := range []string{"stat", "create", "rename"} {
		js := filepath.Join(dir, op+".json")
		code, out, stderr = runBench("micro", "--target", target, "--op", op, "--clients", "2", "--ops-per-client", "40", "--files", "200", "--json", js)
		if code != 0 {
			t.Fatalf("micro %s: exit %d\n%s\n%s", op, code, out, stderr)
		}
		doc, err := bench.ReadDocumentFile(js)
		if err != nil {
			t.Fatal(err)
		}
		if r := doc.Results[1]; r.Op != op || r.Ops != 80 || r.EchoFraction <= 0 {
			t.Fatalf("micro %s: %+v", op, r)
		}
	}
}
