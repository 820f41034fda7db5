package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// binary is the nimbus binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) { testproc.Main(m, &binary) }

// server is one `nimbus serve` child process.
type server struct {
	t    *testing.T
	data string
	addr string // host:port
	cmd  *exec.Cmd
	log  *testproc.Log
	proc *testproc.Server
}

func newServer(t *testing.T, p *testproc.Server) *server {
	return &server{t: t, data: p.Data, addr: p.Addr, cmd: p.Cmd, log: p.Log, proc: p}
}

func freePort(t *testing.T) string { return testproc.FreeAddr(t) }

// startServer starts `nimbus serve` on data (a fresh dir when empty) and waits
// until /readyz answers.
func startServer(t *testing.T, data, addr string, extra ...string) *server {
	t.Helper()
	return newServer(t, testproc.Start(t, binary, data, addr, append([]string{"--superuser", "root"}, extra...)...))
}

func (s *server) url() string { return "http://" + s.addr }

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() { s.proc.Kill() }

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.proc.Stop(); err != nil {
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
