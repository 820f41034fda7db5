package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// Hostile clients: what one user can do to another through the
// real server, and what the service port exposes.

func dialClient(t *testing.T, s *server) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantErr(t *testing.T, what string, err, sentinel error, parts ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: got %v, want %v", what, err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error %q does not say %q", what, err, p)
		}
	}
}

// TestOtherUserCannotWriteOpenFile: bob, naming alice's client, can neither
// write into alice's open file nor close it, over the RPC; alice's content
// is what she wrote. An inline file and a block file (past 128 KB).
func TestOtherUserCannotWriteOpenFile(t *testing.T) {
	s := startServer(t, "", "")
	ctx := context.Background()
	c := dialClient(t, s)
	alice, bob := meta.User{Name: "alice"}, meta.User{Name: "bob"}
	if err := c.Mkdirs(ctx, meta.User{Name: "root"}, "/shared", 0o777); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1000, 300 << 10} {
		p := "/shared/f" + strings.Repeat("b", size>>18)
		if _, err := c.Create(ctx, alice, p, meta.CreateOptions{Client: "alice-writer"}); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("a"), size)
		for off := 0; off < size; off += 64 << 10 {
			if err := c.Write(ctx, alice, p, "alice-writer", int64(off), data[off:min(size, off+64<<10)]); err != nil {
				t.Fatal(err)
			}
		}
		err := c.Write(ctx, bob, p, "alice-writer", int64(size), []byte("bob was here"))
		wantErr(t, "bob's write", err, meta.ErrPermission, "write", p, "user alice")
		_, err = c.Complete(ctx, bob, p, "alice-writer")
		wantErr(t, "bob's complete", err, meta.ErrPermission, "complete", p)
		st, err := c.Complete(ctx, alice, p, "alice-writer")
		if err != nil || st.Length != int64(size) {
			t.Fatalf("alice's complete: %+v %v", st, err)
		}
		got, err := c.Read(ctx, alice, p, 0, int64(size)+100)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("content after bob's attempts: %d bytes, %v", len(got), err)
		}
	}
}

// TestPermissionBitsOutOfRange: 0x101FF is refused over the RPC, not taken
// for 0777.
func TestPermissionBitsOutOfRange(t *testing.T) {
	s := startServer(t, "", "")
	ctx := context.Background()
	c := dialClient(t, s)
	root := meta.User{Name: "root"}
	wantErr(t, "mkdirs", c.Mkdirs(ctx, root, "/p", 0x101FF), meta.ErrInvalidArgument, "/p", "out of range")
	_, err := c.Create(ctx, root, "/f", meta.CreateOptions{Client: "c", Perm: 0x101FF})
	wantErr(t, "create", err, meta.ErrInvalidArgument, "/f")
	if err := c.Mkdirs(ctx, root, "/q", 0o755); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "set permission", c.SetPermission(ctx, root, "/q", 0x101FF), meta.ErrInvalidArgument, "/q")
	st, err := c.Stat(ctx, root, "/q")
	if err != nil || st.Perm != 0o755 {
		t.Fatalf("/q after a refused chmod: %+v %v", st, err)
	}
	_, err = c.Stat(ctx, root, "/p")
	wantErr(t, "stat of the refused mkdirs", err, meta.ErrNotFound)
}

// TestEmptyUserRefused: an explicitly empty user name is nobody.
func TestEmptyUserRefused(t *testing.T) {
	s := startServer(t, "", "")
	ctx := context.Background()
	c := dialClient(t, s)
	_, err := c.Stat(ctx, meta.User{}, "/")
	wantErr(t, "stat", err, meta.ErrPermission, "no user name")
	wantErr(t, "mkdirs", c.Mkdirs(ctx, meta.User{}, "/anon", 0), meta.ErrPermission)
	wantErr(t, "renew lease", c.RenewLease(ctx, meta.User{}, "c"), meta.ErrPermission)
}

// TestFsckSuperuserOnly: fsck reads the whole store, so only the superuser
// may run it over the RPC, as HDFS's.
func TestFsckSuperuserOnly(t *testing.T) {
	s := startServer(t, "", "")
	c := dialClient(t, s)
	_, err := c.FsckAs(context.Background(), meta.User{Name: "alice"})
	wantErr(t, "fsck as alice", err, meta.ErrPermission, "superuser")
	if rep, err := c.FsckAs(context.Background(), meta.User{Name: "root"}); err != nil || !rep.Clean() {
		t.Fatalf("fsck as root: %+v %v", rep, err)
	}
	if r := s.nimbusAs("alice", "", "fsck"); r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("nimbus fsck as alice: exit %d %q", r.code, r.stderr)
	}
	if r := s.nimbus("", "fsck"); r.code != 0 || !strings.Contains(r.stdout, "HEALTHY") {
		t.Fatalf("nimbus fsck as root: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestPprofOnlyOnDebugAddr: the service port never serves the profiler;
// --debug-addr opens it on a port of its own.
func TestPprofOnlyOnDebugAddr(t *testing.T) {
	s := startServer(t, "", "")
	if code, _ := testproc.Get(t, s.url()+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("service port /debug/pprof/: HTTP %d, want 404", code)
	}
	s2 := startServer(t, "", "", "--debug-addr", "127.0.0.1:0")
	// The profiler's address, as the server logs it (it bound port 0).
	m := regexp.MustCompile(`msg="profiler serving" addr=http://(\S+)/debug/pprof/`).FindStringSubmatch(s2.log.String())
	if m == nil {
		t.Fatalf("the server did not log the profiler's address:\n%s", s2.log.String())
	}
	debug := m[1]
	if code, _ := testproc.Get(t, s2.url()+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("service port /debug/pprof/ with --debug-addr: HTTP %d, want 404", code)
	}
	if code, body := testproc.Get(t, "http://"+debug+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("debug port /debug/pprof/: HTTP %d %.200q", code, body)
	}
	if code, body := testproc.Get(t, "http://"+debug+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("debug port goroutine profile: HTTP %d %.200q", code, body)
	}
	s2.stop()
}

// TestBlockLimits: a block size under the minimum is refused with HDFS's
// words, through the CLI and WebHDFS; a file past the most blocks fails.
func TestBlockLimits(t *testing.T) {
	s := startServer(t, "", "")
	local := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(local, bytes.Repeat([]byte("x"), 300<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	r := s.nimbus("", "fs", "put", "--block-size", "4k", local, "/small")
	if r.code != 1 || !strings.Contains(r.stderr, "put /small") || !strings.Contains(r.stderr, "less than configured minimum value 1048576") {
		t.Fatalf("put with 4 KB blocks: exit %d %q", r.code, r.stderr)
	}
	req, err := http.NewRequest("PUT", s.url()+"/webhdfs/v1/tiny?op=CREATE&blocksize=1&user.name=root", bytes.NewReader([]byte("data")))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 || !strings.Contains(string(body), "less than configured minimum value") {
		t.Fatalf("WebHDFS CREATE&blocksize=1: HTTP %d %s", resp.StatusCode, body)
	}

	s2 := startServer(t, "", "", "--min-block-size", "0", "--max-blocks-per-file", "3")
	r = s2.nimbus("", "fs", "put", "--block-size", "64k", local, "/many")
	if r.code != 1 || !strings.Contains(r.stderr, "put /many") || !strings.Contains(r.stderr, "maximum number of blocks: 3") {
		t.Fatalf("put of 5 blocks with at most 3: exit %d %q", r.code, r.stderr)
	}
	s2.ok("fs", "put", "--block-size", "128k", local, "/three")
}

// TestPutRetryAfterKill: a put killed mid-way leaves its ._COPYING_ file
// open; retrying at once, with or without -f, succeeds instead of waiting a
// minute for the dead client's lease.
func TestPutRetryAfterKill(t *testing.T) {
	s := startServer(t, "", "")
	c := dialClient(t, s)
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "big")
	const size = 256 << 20 // sparse: large enough to be killed mid-way
	f, err := os.Create(local)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, retry := range [][]string{{"fs", "put", local, "/big"}, {"fs", "put", "-f", local, "/big"}} {
		cmd := exec.Command(binary, "fs", "put", "-f", local, "/big")
		cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+s.url(), "NIMBUS_USER=root")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := c.Stat(ctx, meta.User{Name: "root"}, "/big._COPYING_")
			if err == nil && st.UnderConstruction {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the put's copy never appeared: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if st, err := c.Stat(ctx, meta.User{Name: "root"}, "/big._COPYING_"); err != nil || !st.UnderConstruction {
			t.Fatalf("the killed put finished before it was killed: %+v %v", st, err)
		}
		start := time.Now()
		r := s.nimbus("", retry...)
		if r.code != 0 {
			t.Fatalf("%v right after a killed put: exit %d %q", retry, r.code, r.stderr)
		}
		st, err := c.Stat(ctx, meta.User{Name: "root"}, "/big")
		if err != nil || st.Length != size || st.UnderConstruction {
			t.Fatalf("/big after the retry: %+v %v", st, err)
		}
		if _, err := c.Stat(ctx, meta.User{Name: "root"}, "/big._COPYING_"); !errors.Is(err, meta.ErrNotFound) {
			t.Fatalf("copy left after the retry: %v", err)
		}
		t.Logf("%v took %v", retry, time.Since(start))
	}
	if r := s.nimbus("", "fsck"); r.code != 0 {
		t.Fatalf("fsck: %q %q", r.stdout, r.stderr)
	}
}
