package soak

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// binary is the nimbus binary built once for the package.
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

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	p := testproc.Start(t, binary, "", "", append([]string{"--superuser", "root"}, extra...)...)
	return &server{t: t, data: p.Data, addr: p.Addr, cmd: p.Cmd, log: p.Log, proc: p}
}

func (s *server) url() string { return "http://" + s.addr }

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.proc.Stop(); err != nil {
		s.t.Fatalf("server exited with %v after SIGTERM\n%s", err, s.log.String())
	}
}

// rssBytes reads the server's resident set size from /proc.
func (s *server) rssBytes() (int64, error) { return procRSS(s.cmd.Process.Pid) }

// procRSS reads process pid's resident set size from /proc.
func procRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// procFDs counts process pid's open file descriptors (/proc/PID/fd).
func procFDs(pid int) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(fds), err
}

// nimbus runs the CLI against s as root.
func (s *server) nimbus(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "NIMBUS_ADDR="+s.url(), "NIMBUS_USER=root")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
