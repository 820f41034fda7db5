package server

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestStatusPage: the page says what the inline threshold is (not a size
// limit), shows the version and links, and escapes what it prints; a
// browser at /rpc/ gets a note, not a 404.
func TestStatusPage(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), `<script>"x"`)
	cfg.Listen = "127.0.0.1:0"
	cfg.Version = "v1.2.3 <beta>"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	cfg.Store.ScanCacheBytes = 1 << 20
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.Engine().Mkdirs(context.Background(), meta.User{Name: cfg.Namespace.Superuser}, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	code, page := testproc.Get(t, s.Addr()+"/")
	if code != 200 {
		t.Fatalf("GET /: %d", code)
	}
	for _, want := range []string{"Nimbus v1.2.3 &lt;beta&gt;", "&lt;script&gt;&#34;x&#34;", "Files up to 131072 bytes are kept in the metadata store",
		"no limit on a file", "1 entry in <code>/</code>", `href="/metrics"`, `href="/readyz"`, `href="/webhdfs/v1/?op=LISTSTATUS"`, " up "} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<beta>") {
		t.Errorf("status page prints unescaped text:\n%s", page)
	}
	code, body := testproc.Get(t, s.Addr()+"/rpc/")
	if code != 200 || !strings.Contains(body, "RPC endpoint") {
		t.Errorf("GET /rpc/: %d %q", code, body)
	}
	if code, _ := testproc.Get(t, s.Addr()+"/rpc/conn"); code == 200 || code == 404 {
		t.Errorf("GET /rpc/conn without an upgrade: %d, want the RPC's own refusal", code)
	}
}

// TestStopUnstarted: a server that never served (its Start failed) closes
// without logging "nimbus stopped".
func TestStopUnstarted(t *testing.T) {
	var log bytes.Buffer
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.CacheSize = 8 << 20
	cfg.Store.RowCacheEntries = 1024
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "nimbus stopped") {
		t.Errorf("log of a server that never served:\n%s", log.String())
	}
}
