package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/rpc"
)

// TestCommandsOverRPC runs cmdFS and cmdFsck as the binary does: through
// client.Dial to NIMBUS_ADDR as NIMBUS_USER, here an in-process RPC server
// over the real engine.
func TestCommandsOverRPC(t *testing.T) {
	eng := newTestFS(t).(*namespace.Engine)
	mux := http.NewServeMux()
	mux.Handle("/rpc/", rpc.NewServer(eng, rpc.ServerOptions{Fsck: eng.Fsck}).Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("NIMBUS_ADDR", srv.URL)
	t.Setenv("NIMBUS_USER", "alice")

	ctx := context.Background()
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := cmdFS(ctx, args, &out, &errs)
		return code, out.String(), errs.String()
	}
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, errs := run(args...)
		if code != 0 || errs != "" {
			t.Fatalf("%q: exit %d, %q", args, code, errs)
		}
		return out
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "in")
	if err := os.WriteFile(local, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun("mkdir", "-p", "d/e")
	mustRun("put", local, "d/f")
	expectEq(t, "ls", mustRun("ls", "d"), "Found 2 items\n"+
		"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 d/e\n"+
		"-rw-r--r--   3 alice supergroup     102404 2026-11-23 01:02 d/f\n")
	if out := mustRun("cat", "/user/alice/d/f"); out != payload {
		t.Errorf("cat over RPC: %d bytes", len(out))
	}
	mustRun("get", "d/f", filepath.Join(dir, "out"))
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); string(b) != payload {
		t.Errorf("get over RPC: %d bytes", len(b))
	}
	var ls []jsonStatus
	if err := json.Unmarshal([]byte(mustRun("--json", "ls", "-R", "d")), &ls); err != nil || len(ls) != 2 {
		t.Errorf("ls --json over RPC: %v %v", ls, err)
	}
	code, _, errs := run("mkdir", "d/f/x")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: mkdir /user/alice/d/f/x: ") {
		t.Errorf("error over RPC: exit %d %q", code, errs)
	}
	code, _, errs = run("rm", "/user")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: rm /user: is a directory") {
		t.Errorf("rm dir over RPC: exit %d %q", code, errs)
	}
	code, _, errs = run("rm", "-r", "/user")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: rm /user: permission denied") {
		t.Errorf("rm -r /user as alice over RPC: exit %d %q", code, errs)
	}
	if code, _, _ := run("test", "-f", "d/f"); code != 0 {
		t.Errorf("test -f over RPC: exit %d", code)
	}
	expectEq(t, "rm", mustRun("rm", "-r", "d"), "Deleted d\n")

	var out, ferrs bytes.Buffer
	if code := cmdFsck(ctx, nil, &out, &ferrs); code != 1 || !strings.Contains(ferrs.String(), "permission denied") {
		t.Errorf("fsck over RPC as alice: exit %d\n%s%s", code, out.String(), ferrs.String())
	}
	out.Reset()
	ferrs.Reset()
	t.Setenv("NIMBUS_USER", testSuperuser) // fsck is the superuser's
	if code := cmdFsck(ctx, nil, &out, &ferrs); code != 0 || !strings.Contains(out.String(), "is HEALTHY") {
		t.Errorf("fsck over RPC: exit %d\n%s%s", code, out.String(), ferrs.String())
	}
}

func TestCommandsServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	t.Setenv("NIMBUS_ADDR", addr)
	var out, errs bytes.Buffer
	if code := cmdFS(context.Background(), []string{"ls", "/"}, &out, &errs); code != 1 ||
		!strings.HasPrefix(errs.String(), "nimbus fs: ls: connecting to "+addr) {
		t.Errorf("fs with no server: exit %d %q", code, errs.String())
	}
	errs.Reset()
	if code := cmdFsck(context.Background(), nil, &out, &errs); code != 1 ||
		!strings.HasPrefix(errs.String(), "nimbus fsck: connecting to "+addr) {
		t.Errorf("fsck with no server: exit %d %q", code, errs.String())
	}
}
