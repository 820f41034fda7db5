// Package etcdtest gives tests real etcd servers: a single-member server
// shared by the whole test binary (Endpoints), and private clusters of any
// size that a fault test may kill and restart (NewCluster).
//
// Servers are the etcd binary ($NIMBUS_ETCD_BIN, else etcd on PATH; Debian:
// apt-get install etcd-server, etcd 3.4), run on 127.0.0.1 and free ports,
// with their data in a temporary directory. A watchdog process kills them
// and removes their directory when the test binary exits, however it exits
// (its end of a pipe closes); Main stops the shared one at once:
//
//	func TestMain(m *testing.M) { os.Exit(etcdtest.Main(m)) }
//
// With NIMBUS_TEST_ETCD set (comma-separated host:port client endpoints of
// a running cluster) Endpoints uses that instead. A test is skipped only
// when neither is possible because etcd is not installed; the skip message
// says how to get it (scripts/test.sh installs it, and sets EnvRequire so
// that CI fails rather than skips).
package etcdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// EnvEndpoints names the environment variable of an external server.
const EnvEndpoints = "NIMBUS_TEST_ETCD"

// EnvBinary names the environment variable of the etcd binary to run.
const EnvBinary = "NIMBUS_ETCD_BIN"

// EnvRequire, when set (scripts/test.sh sets it, after installing etcd),
// turns the skip for a missing etcd into a failure, so that CI cannot pass
// without having run the tests against etcd.
const EnvRequire = "NIMBUS_REQUIRE_ETCD"

func skip(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvRequire) != "" {
		t.Fatal(SkipMessage + " (" + EnvRequire + " is set: failing instead of skipping)")
	}
	t.Skip(SkipMessage)
}

// SkipMessage is why tests skip when there is no etcd binary.
const SkipMessage = "etcdtest: etcd is not installed (no etcd on PATH, $" + EnvBinary + " unset): " +
	"install it (apt-get install etcd-server, or scripts/etcd.sh start, which installs it as root), " +
	"or set " + EnvEndpoints + " to a running server's host:port"

// Binary finds the etcd server binary; "" when there is none.
func Binary() string {
	if b := os.Getenv(EnvBinary); b != "" {
		return b
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/etcd", "/usr/local/bin/etcd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

var shared struct {
	once sync.Once
	eps  []string
	err  error
	c    *Cluster
}

// Main runs the tests, then stops the shared server if one was started.
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		shared.c.stop()
	}
	return code
}

// Endpoints returns the client endpoints (host:port) of the binary's shared
// single-member server, starting it on first use. Tests sharing it must keep
// to key prefixes of their own.
func Endpoints(t testing.TB) []string {
	t.Helper()
	shared.once.Do(func() {
		if e := os.Getenv(EnvEndpoints); e != "" {
			shared.eps = strings.Split(e, ",")
			return
		}
		if Binary() == "" {
			return
		}
		shared.c, shared.err = start(1)
		if shared.err == nil {
			shared.eps = shared.c.Endpoints()
		}
	})
	if shared.err != nil {
		t.Fatalf("etcdtest: %v", shared.err)
	}
	if shared.eps == nil {
		skip(t)
	}
	return shared.eps
}

// Cluster is a private etcd cluster. Its methods fail the test on error;
// they are not safe for concurrent use.
type Cluster struct {
	t       testing.TB
	bin     string
	dir     string
	members []*member
	dog     *os.File
}

type member struct {
	name       string
	client     string // host:port
	peer       string // host:port
	data       string
	log        string
	cmd        *exec.Cmd
	exited     chan struct{}
	initialArg string
}

// NewCluster starts a cluster of n members on 127.0.0.1 and waits until it
// has a leader. It is killed and its directory removed when t ends. It
// skips t when etcd is not installed.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if Binary() == "" {
		skip(t)
	}
	c, err := start(n)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c.t = t
	t.Cleanup(c.stop)
	return c
}

// start starts a cluster, trying new ports when one was taken meanwhile
// (the machine is shared).
func start(n int) (*Cluster, error) {
	var err error
	for try := 0; try < 3; try++ {
		var c *Cluster
		if c, err = startOnce(n); err == nil {
			return c, nil
		}
	}
	return nil, err
}

func startOnce(n int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "nimbus-etcd-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: Binary(), dir: dir}
	ports, err := freePorts(2 * n)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var initial []string
	for i := 0; i < n; i++ {
		m := &member{name: fmt.Sprintf("m%d", i),
			client: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), peer: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
			data: filepath.Join(dir, fmt.Sprintf("m%d.etcd", i)), log: filepath.Join(dir, fmt.Sprintf("m%d.log", i))}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	for _, m := range c.members {
		m.initialArg = strings.Join(initial, ",")
	}
	c.dog = watchdog(dir)
	for i := range c.members {
		if err := c.launch(i); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.waitHealthy(c.members, 30*time.Second); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// launch starts member i's process (its data directory decides whether it
// is new or restarts).
func (c *Cluster) launch(i int) error {
	m := c.members[i]
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.bin,
		"--name", m.name, "--data-dir", m.data,
		"--listen-client-urls", "http://"+m.client, "--advertise-client-urls", "http://"+m.client,
		"--listen-peer-urls", "http://"+m.peer, "--initial-advertise-peer-urls", "http://"+m.peer,
		"--initial-cluster", m.initialArg, "--initial-cluster-state", "new", "--initial-cluster-token", filepath.Base(c.dir),
		"--heartbeat-interval", "100", "--election-timeout", "1000",
		"--logger", "zap", "--log-outputs", "stderr")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // an interrupt of the tests is the watchdog's to handle
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.bin, err)
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(m.exited) }()
	return os.WriteFile(filepath.Join(c.dir, m.name+".pid"), fmt.Appendf(nil, "%d\n", cmd.Process.Pid), 0o644)
}

// waitHealthy waits until every one of ms answers /health with true (it
// has a leader and serves).
func (c *Cluster) waitHealthy(ms []*member, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, m := range ms {
		for !healthy(m.client) {
			select {
			case <-m.exited:
				log, _ := os.ReadFile(m.log)
				return fmt.Errorf("etcd member %s exited at start:\n%s", m.name, tail(log, 3000))
			default:
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(m.log)
				return fmt.Errorf("etcd member %s not healthy after %v:\n%s", m.name, within, tail(log, 3000))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func healthy(hostport string) bool {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + hostport + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Endpoints are the members' client endpoints (host:port), in member order.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.client)
	}
	return eps
}

// Kill sends SIGKILL to member i and waits until it is gone.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.cmd == nil {
		c.t.Fatalf("etcdtest: kill: member %s is not running", m.name)
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("etcdtest: member %s still running 10 s after SIGKILL", m.name)
	}
	m.cmd = nil
	// The pid may be reused: the watchdog must not kill it.
	_ = os.Remove(filepath.Join(c.dir, m.name+".pid"))
}

// Restart starts member i again on its data (after Kill) and waits until
// it is healthy.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.launch(i); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
	if err := c.waitHealthy(c.members[i:i+1], 30*time.Second); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
}

// Log returns member i's log.
func (c *Cluster) Log(i int) string {
	b, _ := os.ReadFile(c.members[i].log)
	return string(b)
}

// Leader returns the index of the member that leads the cluster now, as
// the members report it (-1 when none is known within ctx).
func (c *Cluster) Leader(ctx context.Context) int {
	for {
		for i, m := range c.members {
			if m.cmd == nil {
				continue
			}
			if st, ok := status(ctx, m.client); ok && st.leader != 0 && st.leader == st.member {
				return i
			}
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type memberStatus struct{ member, leader uint64 }

// status asks a member's gRPC-gateway for its status (etcd 3.4 serves the
// v3 API as JSON under /v3/).
func status(ctx context.Context, hostport string) (memberStatus, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+hostport+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return memberStatus{}, false
	}
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return memberStatus{}, false
	}
	defer resp.Body.Close()
	var body struct {
		Header struct {
			MemberID json.Number `json:"member_id"`
		} `json:"header"`
		Leader json.Number `json:"leader"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return memberStatus{}, false
	}
	var st memberStatus
	if _, err := fmt.Sscan(body.Header.MemberID.String(), &st.member); err != nil {
		return memberStatus{}, false
	}
	if _, err := fmt.Sscan(body.Leader.String(), &st.leader); err != nil {
		return memberStatus{}, false
	}
	return st, true
}

// stop kills every member and removes the directory.
func (c *Cluster) stop() {
	for _, m := range c.members {
		if m.cmd != nil {
			_ = m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.exited
			m.cmd = nil
		}
	}
	_ = os.RemoveAll(c.dir)
	if c.dog != nil {
		c.dog.Close()
		c.dog = nil
	}
}

// watchdog starts a shell that waits for EOF on a pipe from this process,
// then kills the members whose pids are in dir and removes dir. It is in a
// process group of its own, so that an interrupt of the tests does not stop
// it first. It returns its end of the pipe (nil if it could not start).
func watchdog(dir string) *os.File {
	return testproc.Watchdog(fmt.Sprintf(`for f in %[1]s/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done; rm -rf %[1]s`, dir))
}

// freePorts returns n distinct ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
