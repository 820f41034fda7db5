package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
)

// TestServePostgres: `nimbus serve --store postgres://...` keeps the
// namespace in a real PostgreSQL database: the CLI works against it, a
// restart finds everything, and the round trips to the database show in
// /metrics. The blocks of a file larger than the inline threshold stay in
// --data.
func TestServePostgres(t *testing.T) {
	db := pgtest.DB(t)
	data := t.TempDir()
	s := startServer(t, data, "", "--store", db, "--inline-threshold", "1024")
	blob := bytes.Repeat([]byte("nimbus on postgres "), 1000) // in a block, not inline
	local := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(local, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("fs", "mkdir", "-p", "/a/b")
	s.ok("fs", "put", local, "/a/b/blob")
	s.nimbus("small", "fs", "put", "-", "/a/small")
	if got := s.ok("fs", "cat", "/a/b/blob"); got != string(blob) {
		t.Fatalf("cat returned %d bytes, want %d", len(got), len(blob))
	}
	if ls := s.ok("fs", "ls", "-R", "/a"); !strings.Contains(ls, "/a/b/blob") || !strings.Contains(ls, "/a/small") {
		t.Fatalf("ls -R /a:\n%s", ls)
	}
	if _, err := os.Stat(filepath.Join(data, "meta")); !os.IsNotExist(err) {
		t.Errorf("a server on PostgreSQL made %s/meta (%v)", data, err)
	}
	resp, err := http.Get(s.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("nimbus_pgstore_round_trips_total")) {
		t.Error("/metrics has no nimbus_pgstore_round_trips_total")
	}
	s.stop()

	s = startServer(t, data, "", "--store", db)
	if got := s.ok("fs", "cat", "/a/b/blob"); got != string(blob) {
		t.Fatalf("after a restart cat returned %d bytes, want %d", len(got), len(blob))
	}
	if got := s.ok("fs", "cat", "/a/small"); got != "small" {
		t.Fatalf("after a restart /a/small = %q", got)
	}
	s.ok("fs", "mkdir", "/a/after-restart")
	if ls := s.ok("fs", "ls", "/a"); !strings.Contains(ls, "after-restart") || !strings.Contains(ls, "small") {
		t.Fatalf("ls /a after a restart:\n%s", ls)
	}

	// A second server on the same database serves the same namespace: what
	// one writes, the other lists at once (neither caches rows).
	s2 := startServer(t, "", "", "--store", db)
	s2.ok("fs", "mkdir", "/a/from-second")
	if ls := s.ok("fs", "ls", "/a"); !strings.Contains(ls, "from-second") {
		t.Fatalf("the first server does not list the second's mkdir:\n%s", ls)
	}
	s.ok("fs", "rm", "-r", "/a/after-restart")
	if ls := s2.ok("fs", "ls", "/a"); strings.Contains(ls, "after-restart") || !strings.Contains(ls, "small") {
		t.Fatalf("the second server's listing after the first's rm:\n%s", ls)
	}
	if got := s2.ok("fs", "cat", "/a/small"); got != "small" {
		t.Fatalf("the second server reads /a/small as %q", got)
	}
	r := s2.nimbus("", "fs", "cat", "/a/b/blob") // its block is in the first server's --data
	t.Logf("cat of a block held by the other server: exit %d, %d bytes, %s", r.code, len(r.stdout), strings.TrimSpace(r.stderr))
	if r.code == 0 && r.stdout != string(blob) {
		t.Fatalf("the second server returned %d wrong bytes for a block it does not hold", len(r.stdout))
	}
	s2.stop()
	s.stop()
}

// TestServePostgresBadURL: a database that cannot be reached, a role that
// does not exist, a URL that does not parse: serve exits non-zero at start,
// within seconds, saying why.
func TestServePostgresBadURL(t *testing.T) {
	db := pgtest.DB(t)
	refused := freePort(t)
	cases := []struct{ url, want string }{
		{"postgres://nimbus@" + refused + "/nimbus?sslmode=disable", "connect"},
		{strings.Replace(db, "postgres@", "no_such_role@", 1), `role "no_such_role" does not exist`},
		{"postgres://x@127.0.0.1:notaport/db", "bad connection string"},
		{"mysql://x@127.0.0.1/db", "bad --store"},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
			"--store", tc.url, "--pg-connect-timeout", "2s")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			t.Errorf("--store %s: serve exited 0\n%s", tc.url, out)
			continue
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("--store %s: serve took %v to fail", tc.url, d)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("--store %s: output does not say %q:\n%s", tc.url, tc.want, out)
		}
	}
}
