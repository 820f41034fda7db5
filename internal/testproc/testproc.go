// Package testproc runs the real nimbus binary for the tests that need a
// process of their own (tests/e2e, tests/soak, tests/linearizability): it
// builds the binary once per test package, starts `nimbus serve` on a
// loopback port the kernel picks (the server binds port 0 and prints the
// address it got, so nothing else on the machine can take the port
// between a pick and the bind), waits until it answers /readyz, and keeps
// the server's output where a test may read it while the server writes.
//
// It is for tests only; nothing outside them imports it. Log is also the
// log sink of in-process tests whose servers and stores log from goroutines.
package testproc

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles cmd/nimbus into a new temporary directory and returns the
// binary's path and a func that removes the directory.
func Build() (binary string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "nimbus-test-bin-")
	if err != nil {
		return "", nil, err
	}
	binary = filepath.Join(dir, "nimbus")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/nimbus-fs/nimbus/cmd/nimbus").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building nimbus: %v\n%s", err, out)
	}
	return binary, func() { os.RemoveAll(dir) }, nil
}

// Main is a TestMain body for a package whose tests all use the binary: it
// builds it into *binary, runs the tests and exits with their status.
func Main(m *testing.M, binary *string) {
	bin, cleanup, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// FreeAddr returns a loopback host:port that was free a moment ago. Another
// process may take it before the caller binds it: use it only where the
// address must be known before the server starts (a restart on the same
// address, NIMBUS_ADDR for a daemon, a port where nobody listens).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Log collects a process's output; it may be read while the process
// writes.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Server is one `nimbus serve` child process.
type Server struct {
	Data string // its --data directory
	// Addr is the host:port it listens on; for a server started on port 0
	// it is empty until WaitReady (Start waits) has read the address the
	// server printed.
	Addr string
	Cmd  *exec.Cmd
	Log  *Log // its stdout and stderr
}

// Start runs `binary serve --data data --listen addr args...` (data: a
// fresh temporary directory when empty; addr: port 0 on loopback when
// empty, the address the server got read from its output) and
// waits, up to 30 s, until /readyz answers 200. The process is killed when
// the test ends; a failed test logs the server's output first.
func Start(t testing.TB, binary, data, addr string, args ...string) *Server {
	t.Helper()
	s := Spawn(t, binary, data, addr, args...)
	if err := s.WaitReady(30 * time.Second); err != nil {
		s.Kill()
		t.Fatalf("nimbus serve did not become ready: %v\n%s", err, s.Log.String())
	}
	return s
}

// Spawn starts the server as Start does but does not wait for it, for
// tests that expect it to fail or that wait in their own way.
func Spawn(t testing.TB, binary, data, addr string, args ...string) *Server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	listen := addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	return Launch(t, exec.Command(binary, append([]string{"serve", "--data", data, "--listen", listen}, args...)...), data, addr)
}

// Launch starts cmd, a `nimbus serve` on data and addr behind a wrapper of
// the test's (prlimit, taskset), with its output in the server's Log and
// the same cleanup as Spawn. An empty addr: the server listens on port 0,
// and WaitReady learns its address from its output.
func Launch(t testing.TB, cmd *exec.Cmd, data, addr string) *Server {
	t.Helper()
	s := &Server{Data: data, Addr: addr, Cmd: cmd, Log: &Log{}}
	s.Cmd.Stdout, s.Cmd.Stderr = s.Log, s.Log
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.Log.String())
		}
		s.Kill()
	})
	return s
}

// servingLine is the line `nimbus serve` prints on its standard output
// once it serves, as one server or as a platform's gateway; its first
// group is the host:port it listens on.
var servingLine = regexp.MustCompile(`nimbus serving on http://((?:\[[^\]]*\]|[^\s:/\[]+):[0-9]+)`)

// waitAddr sets s.Addr from the server's output, waiting until deadline
// for the line that names it.
func (s *Server) waitAddr(deadline time.Time) error {
	for s.Addr == "" {
		if m := servingLine.FindStringSubmatch(s.Log.String()); m != nil {
			s.Addr = m[1]
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server printed no %q line", "nimbus serving on http://...")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// WaitReady learns the server's address when it was started on port 0,
// then polls /readyz until it answers 200 or timeout passes.
func (s *Server) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if err := s.waitAddr(deadline); err != nil {
		return err
	}
	for {
		resp, err := http.Get(s.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL returns the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr }

// Kill sends SIGKILL and waits until the process is gone; it does nothing
// once the process has been waited for.
func (s *Server) Kill() {
	if s.Cmd.ProcessState != nil {
		return
	}
	_ = s.Cmd.Process.Kill()
	_ = s.Cmd.Wait()
}

// Stop sends SIGTERM and waits for the process; it returns the exit error
// (nil for a clean exit).
func (s *Server) Stop() error {
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	return s.Cmd.Wait()
}

// Get fetches url and returns the status code and the body; a failed
// request fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// Watchdog starts `sh -c script` with a pipe from this process on its
// standard input, in a process group of its own (an interrupt of the tests
// does not stop it), and returns this process's end of the pipe (nil if it
// could not start). The script begins with `cat >/dev/null`, so it runs the
// rest when the pipe closes: when the test binary exits, however it exits.
// pgtest and etcdtest stop their servers and remove their directories so.
func Watchdog(script string) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := exec.Command("sh", "-c", "cat >/dev/null; "+script)
	cmd.Stdin = r
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	r.Close()
	go func() { _ = cmd.Wait() }()
	return w
}
