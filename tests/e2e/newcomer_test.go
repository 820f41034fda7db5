package e2e

// A newcomer's first hour: what the README and the CLI promise,
// checked on the real binary.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// run runs the binary with env added to the environment.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running nimbus %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// TestNewcomerHelpAndVersion: every command's --help exits 0, serve's flags
// print one default each; version is stamped by -ldflags -X, --version works.
func TestNewcomerHelpAndVersion(t *testing.T) {
	for _, c := range []string{"serve", "fs", "fsck", "bench", "stop"} {
		r := run(t, nil, c, "--help")
		if r.code != 0 {
			t.Errorf("nimbus %s --help: exit %d\n%s", c, r.code, r.stderr)
		}
	}
	r := run(t, nil, "serve", "--help")
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("serve --help prints two defaults: %q", line)
		}
	}
	stamped := filepath.Join(t.TempDir(), "nimbus")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test", "-o", stamped, "github.com/nimbus-fs/nimbus/cmd/nimbus")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(stamped, arg).Output()
		if err != nil || string(out) != "nimbus v9.8.7-test\n" {
			t.Errorf("nimbus %s: %q, %v", arg, out, err)
		}
	}
	if r := run(t, nil, "version"); r.code != 0 || strings.Contains(r.stdout, "dev") {
		t.Errorf("unstamped version: %q (exit %d)", r.stdout, r.code)
	}
}

// TestNewcomerServeErrors: a serve that cannot bind creates nothing and
// logs no "stopped"; a second serve on a data directory in use says it is
// locked, as fsck does; a client with no server suggests starting one.
func TestNewcomerServeErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	r := run(t, nil, "serve", "--data", data, "--listen", ln.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "address is in use") || strings.Contains(r.stderr, "stopped") {
		t.Errorf("serve on a busy port: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("serve on a busy port made its data directory: %v", err)
	}

	s := startServer(t, "", "")
	r = run(t, nil, "serve", "--data", s.data, "--listen", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "it is locked; is a server running on it?") {
		t.Errorf("second serve: exit %d\n%s", r.code, r.stderr)
	}

	addr := "http://" + freePort(t)
	r = run(t, []string{"NIMBUS_ADDR=" + addr}, "fs", "ls", "/")
	if r.code != 1 || !strings.Contains(r.stderr, "nimbus serve") || !strings.Contains(r.stderr, "NIMBUS_ADDR") {
		t.Errorf("ls with no server: exit %d\n%s", r.code, r.stderr)
	}
}

// TestNewcomerStatusPage: the page shows the version, what the inline
// threshold is (not a limit), links, and escapes what it prints; GET /rpc/
// explains itself instead of a 404.
func TestNewcomerStatusPage(t *testing.T) {
	data := filepath.Join(t.TempDir(), "a<b>&c")
	s := startServer(t, data, "")
	code, page := testproc.Get(t, s.url()+"/")
	if code != 200 {
		t.Fatalf("status page: %d", code)
	}
	for _, want := range []string{"Nimbus ", "up ", "a&lt;b&gt;&amp;c", "Files up to 131072 bytes are kept in the metadata store",
		"no limit on a file", `href="/metrics"`, `href="/webhdfs/v1/?op=LISTSTATUS"`, `href="/readyz"`} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "a<b>") || strings.Contains(page, "files up to") {
		t.Errorf("status page:\n%s", page)
	}
	code, body := testproc.Get(t, s.url()+"/rpc/")
	if code != 200 || !strings.Contains(body, "RPC endpoint") {
		t.Errorf("GET /rpc/: %d %q", code, body)
	}
	s.ok("fs", "mkdir", "-p", "/x") // the RPC under /rpc/ still works
}

// TestNewcomerDaemon: serve --daemon returns once the server answers, with
// its log and pid file in the data directory; nimbus stop stops it.
func TestNewcomerDaemon(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	env := []string{"NIMBUS_ADDR=http://" + addr}
	r := run(t, env, "serve", "--daemon", "--data", data) // listens on NIMBUS_ADDR
	if r.code != 0 || !strings.Contains(r.stdout, "nimbus stop --data "+data) {
		t.Fatalf("serve --daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pid, err := os.ReadFile(filepath.Join(data, "nimbus.pid"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a failed test leaves no server behind
		var p int
		if _, err := fmt.Sscan(string(pid), &p); err == nil {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if r := run(t, env, "fs", "mkdir", "-p", "/d"); r.code != 0 {
		t.Fatalf("mkdir against the daemon: %d %s", r.code, r.stderr)
	}
	if r := run(t, env, "serve", "--daemon", "--data", data, "--listen", "127.0.0.1:0"); r.code != 1 || !strings.Contains(r.stderr, "already running") {
		t.Errorf("second daemon: exit %d %s", r.code, r.stderr)
	}
	if r := run(t, nil, "stop", "--data", data); r.code != 0 || !strings.Contains(r.stdout, "nimbus stopped") {
		t.Fatalf("stop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "nimbus.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file after stop: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Errorf("server still answers after stop")
	}
	log, _ := os.ReadFile(filepath.Join(data, "nimbus.log"))
	if !strings.Contains(string(log), "nimbus stopped") {
		t.Errorf("log:\n%s", log)
	}
	if r := run(t, nil, "stop", "--data", data); r.code != 0 || !strings.Contains(r.stdout, "no server running") {
		t.Errorf("stop again: exit %d %s", r.code, r.stdout)
	}
}

// TestNewcomerFsckForms: fsck --data accepts the data directory and its
// meta/ alike (both HEALTHY on a store with blocks), opens it without
// creating or changing anything, and works on a read-only mount.
func TestNewcomerFsckForms(t *testing.T) {
	s := startServer(t, "", "", "--inline-threshold", "1024")
	big := strings.Repeat("0123456789", 1000)
	s.nimbus(big, "fs", "put", "-", "/big")
	if r := run(t, nil, "fsck", "--data", s.data); r.code != 1 || !strings.Contains(r.stderr, "it is locked; is a server running on it?") {
		t.Errorf("fsck --data of a running server: exit %d\n%s", r.code, r.stderr)
	}
	s.stop()
	for _, dir := range []string{s.data, filepath.Join(s.data, "meta"), filepath.Join(s.data, "meta") + "/"} {
		r := run(t, nil, "fsck", "--data", dir)
		if r.code != 0 || !strings.Contains(r.stdout, "Status: HEALTHY") || !strings.Contains(r.stdout, "Blocks:\t1") {
			t.Errorf("fsck --data %s: exit %d\n%s%s", dir, r.code, r.stdout, r.stderr)
		}
	}

	// A copy without its lock files: fsck must not create them, nor
	// anything else.
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", s.data, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	os.Remove(filepath.Join(cp, "meta", "LOCK"))
	os.Remove(filepath.Join(cp, "blocks", "LOCK"))
	before := snapshot(t, cp)
	if r := run(t, nil, "fsck", "--data", cp); r.code != 0 {
		t.Errorf("fsck of the copy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := snapshot(t, cp); after != before {
		t.Errorf("fsck changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A read-only mount (root ignores file modes, so chmod would prove
	// nothing here); where this environment cannot mount, the check above
	// stands alone.
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("mount", "--bind", s.data, ro).Run(); err != nil {
		t.Logf("no bind mount here (%v): read-only mount not checked", err)
		return
	}
	defer exec.Command("umount", ro).Run()
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", ro).CombinedOutput(); err != nil {
		t.Logf("no read-only remount here (%v %s): read-only mount not checked", err, out)
		return
	}
	if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644); err == nil {
		t.Fatal("the read-only mount takes writes")
	}
	r := run(t, nil, "fsck", "--data", ro)
	if r.code != 0 || !strings.Contains(r.stdout, "Status: HEALTHY") {
		t.Errorf("fsck on a read-only mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// snapshot lists every file under dir with its size and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		size := fi.Size()
		if d.IsDir() {
			size = 0
		}
		b.WriteString(rel + " " + fi.Mode().String() + " " + strconv.FormatInt(size, 10) + " " + fi.ModTime().Format(time.RFC3339Nano) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestNewcomerInterrupt: Ctrl-C during a put says "interrupted" (not
// "context canceled") and exits 130, as shells expect.
func TestNewcomerInterrupt(t *testing.T) {
	s := startServer(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "fs", "put", "-", "/slow")
	cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+s.url(), "NIMBUS_USER=root")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if _, err := stdin.Write(bytes.Repeat([]byte("x"), 300<<10)); err != nil { // past the inline threshold: a stream is open
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 130 || !strings.Contains(errb.String(), "interrupted") || strings.Contains(errb.String(), "context canceled") {
		t.Errorf("put interrupted: exit %d (%v)\n%s", code, err, errb.String())
	}
}

// TestNewcomerTestScriptCleansUp: when a client suite fails, scripts/test.sh
// still stops the server it started and removes its temporary directory
// (its cleanup is an EXIT trap; a RETURN trap was skipped by set -e).
func TestNewcomerTestScriptCleansUp(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command("bash", "scripts/test.sh")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "STAGES=clients", "CLIENT_SUITES=fail", "TMPDIR="+tmp,
		// A client suite that fails at once, as a bash function exported
		// through the environment.
		"BASH_FUNC_suite_fail%%=() { echo 'suite fails on purpose'; return 1; }")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "suite fails on purpose") {
		t.Fatalf("test.sh with a failing suite: %v\n%s", err, out)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("test.sh left %d entries in TMPDIR (%s)", len(left), left[0].Name())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && strings.HasPrefix(exe, tmp) {
			pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("test.sh left a server running: pid %d (%s)", pid, exe)
		}
	}
}
