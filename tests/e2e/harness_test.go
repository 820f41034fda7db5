package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binary is the nimbus binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nimbus-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "nimbus")
	build := exec.Command("go", "build", "-o", binary, "github.com/nimbus-fs/nimbus/cmd/nimbus")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building nimbus:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one `nimbus serve` child process.
type server struct {
	t    *testing.T
	data string
	addr string // host:port
	cmd  *exec.Cmd
	log  *bytes.Buffer
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts `nimbus serve` on data (a fresh dir when empty) and waits
// until /readyz answers.
func startServer(t *testing.T, data, addr string, extra ...string) *server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	if addr == "" {
		addr = freePort(t)
	}
	s := &server{t: t, data: data, addr: addr, log: &bytes.Buffer{}}
	s.cmd = exec.Command(binary, append([]string{"serve", "--data", data, "--listen", addr, "--superuser", "root"}, extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			t.Fatalf("server did not become ready: %v\n%s", err, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
		s.kill()
	})
	return s
}

func (s *server) url() string { return "http://" + s.addr }

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("server exited with %v after SIGTERM\n%s", err, s.log.String())
	}
}

// result of one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// nimbus runs the CLI against s as user root with optional stdin.
func (s *server) nimbus(stdin string, args ...string) result {
	return s.nimbusAs("root", stdin, args...)
}

func (s *server) nimbusAs(user, stdin string, args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+s.url(), "NIMBUS_USER="+user)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("running nimbus %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs the CLI and fails the test unless it exits 0.
func (s *server) ok(args ...string) string {
	s.t.Helper()
	r := s.nimbus("", args...)
	if r.code != 0 {
		s.t.Fatalf("nimbus %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
