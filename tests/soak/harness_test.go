package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the nimbus binary built once for the package (as tests/e2e does).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nimbus-soak-bin-")
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

// syncBuffer collects the server's output; the test reads it while the
// server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// server is one `nimbus serve` child process.
type server struct {
	t    *testing.T
	data string
	addr string // host:port
	cmd  *exec.Cmd
	log  *syncBuffer
}

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &server{t: t, data: t.TempDir(), addr: addr, log: &syncBuffer{}}
	s.cmd = exec.Command(binary, append([]string{"serve", "--data", s.data, "--listen", addr, "--superuser", "root"}, extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not become ready: %v\n%s", err, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) url() string { return "http://" + s.addr }

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("server exited with %v after SIGTERM\n%s", err, s.log.String())
	}
}

// rssBytes reads the server's resident set size from /proc.
func (s *server) rssBytes() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
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
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
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
