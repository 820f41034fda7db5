package netzone

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the processes the tests run inside zones:
// with helperEnv set it is an echo server or a client, not a test run.
const helperEnv = "NETZONE_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "echo":
		helperEcho(os.Getenv("NETZONE_TEST_ADDR"))
	case "dial":
		helperDial(os.Getenv("NETZONE_TEST_ADDR"))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helperEcho listens on addr, says "ready", and echoes every connection.
func helperEcho(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// helperDial sends a line to addr and prints the line it gets back.
func helperDial(addr string) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, "hello from", os.Getenv("NETZONE_TEST_ZONE")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(line)
}

// helper returns the command of a helper process in zone z.
func helper(t *testing.T, z *Zone, mode, addr string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := z.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "NETZONE_TEST_ADDR="+addr, "NETZONE_TEST_ZONE="+z.Name)
	return cmd
}

// startEcho starts an echo server process on addr in zone z and waits
// until it listens.
func startEcho(t *testing.T, z *Zone, addr string) *exec.Cmd {
	t.Helper()
	cmd := helper(t, z, "echo", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "ready") {
		t.Fatalf("echo server in zone %s: %q, %v; stderr: %s", z.Name, line, err, stderr.String())
	}
	return cmd
}

// echoOnce writes a line on c and reads it back within timeout.
func echoOnce(c net.Conn, msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return err
	}
	got := make([]byte, len(msg)+1)
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg+"\n" {
		return fmt.Errorf("echo: got %q, want %q", got, msg+"\n")
	}
	return nil
}

// minRTT is the shortest of n one-byte round trips on c.
func minRTT(t *testing.T, c net.Conn, n int) time.Duration {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	b := []byte{'x'}
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

func dial(t *testing.T, z *Zone, addr string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := z.Dial(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s from zone %s: %v", addr, z.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// inZoneEcho serves an echo on a listener of the test process inside z.
func inZoneEcho(t *testing.T, z *Zone, addr string) {
	t.Helper()
	ln, err := z.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
}

func TestZones(t *testing.T) {
	const delay = 2 * time.Millisecond
	nt := New(t, Config{Zones: 3, Delay: delay})
	a, b, c := nt.Zone("a"), nt.Zone("b"), nt.Zone("c")
	t.Logf("subnet %v, host %v, zones %v %v %v", nt.Subnet(), nt.HostIP(), a.IP, b.IP, c.IP)
	echoA := a.Addr(7000)
	server := startEcho(t, a, echoA)

	t.Run("reach", func(t *testing.T) {
		for _, z := range []*Zone{a, b, c} {
			if err := echoOnce(dial(t, z, echoA), "to a from "+z.Name, 10*time.Second); err != nil {
				t.Fatalf("zone %s to the echo server in zone a: %v", z.Name, err)
			}
		}
	})

	t.Run("delay", func(t *testing.T) {
		// Within zone a nothing waits; from b each packet out of b, and
		// each reply out of a, waits the delay: at least 2*delay a trip.
		within := minRTT(t, dial(t, a, echoA), 20)
		across := minRTT(t, dial(t, b, echoA), 20)
		t.Logf("round trip within zone a: %v; from zone b to zone a: %v (the switch holds each packet %v)", within, across, delay)
		if across < 2*delay {
			t.Fatalf("round trip from zone b to zone a took %v, under twice the %v delay", across, delay)
		}
	})

	t.Run("no way out", func(t *testing.T) {
		// A zone has no default route: the host's own addresses off the
		// bridge are unreachable from it.
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, ad := range addrs {
			ipn, ok := ad.(*net.IPNet)
			if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || nt.Subnet().Contains(mustAddr(t, ipn.IP)) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			conn, err := b.Dial(ctx, "tcp", net.JoinHostPort(ipn.IP.String(), "9"))
			cancel()
			if err == nil {
				conn.Close()
				t.Fatalf("zone b reached the host's %v off the bridge", ipn.IP)
			}
			if !errors.Is(err, syscall.ENETUNREACH) {
				t.Fatalf("zone b dialing the host's %v: %v, want network unreachable", ipn.IP, err)
			}
		}
	})

	t.Run("cut and heal", func(t *testing.T) {
		inZoneEcho(t, c, c.Addr(7001))
		before := dial(t, b, echoA)
		if err := echoOnce(before, "before the cut", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		a.Cut()
		defer a.Heal() // for the later subtests, if this one fails
		if !a.IsCut() {
			t.Fatal("IsCut false after Cut")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := b.Dial(ctx, "tcp", echoA)
		cancel()
		if err == nil {
			conn.Close()
			t.Fatal("zone b connected to zone a across the cut")
		}
		if !isTimeout(err) {
			t.Fatalf("dialing zone a across the cut: %v, want a timeout (silence, not an error)", err)
		}
		if err := echoOnce(before, "across the cut", time.Second); !isTimeout(err) {
			t.Fatalf("echo on a connection opened before the cut: %v, want a timeout", err)
		}
		if err := echoOnce(dial(t, b, c.Addr(7001)), "b to c during the cut", 10*time.Second); err != nil {
			t.Fatalf("zone b to zone c while zone a is cut: %v", err)
		}
		if err := echoOnce(dial(t, a, echoA), "inside a during the cut", 10*time.Second); err != nil {
			t.Fatalf("inside zone a while it is cut: %v", err)
		}
		a.Heal()
		if a.IsCut() {
			t.Fatal("IsCut true after Heal")
		}
		if err := echoOnce(dial(t, b, echoA), "after the heal", 10*time.Second); err != nil {
			t.Fatalf("zone b to zone a after the heal: %v", err)
		}
	})

	t.Run("partition", func(t *testing.T) {
		// a and b lose each other; each still reaches c.
		inZoneEcho(t, c, c.Addr(7003))
		nt.Partition(a, b)
		defer nt.Join(a, b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := b.Dial(ctx, "tcp", echoA)
		cancel()
		if err == nil {
			conn.Close()
			t.Fatal("zone b connected to zone a across the partition")
		}
		if !isTimeout(err) {
			t.Fatalf("dialing zone a across the partition: %v, want a timeout", err)
		}
		for _, z := range []*Zone{a, b} {
			if err := echoOnce(dial(t, z, c.Addr(7003)), z.Name+" to c", 10*time.Second); err != nil {
				t.Fatalf("zone %s to zone c during the partition of a and b: %v", z.Name, err)
			}
		}
		nt.Join(a, b)
		if err := echoOnce(dial(t, b, echoA), "after the join", 10*time.Second); err != nil {
			t.Fatalf("zone b to zone a after the join: %v", err)
		}
	})

	t.Run("host", func(t *testing.T) {
		// A listener on the host's bridge address, and one on 127.0.0.1
		// behind Forward (as PostgreSQL and etcd are), answer processes
		// in the zones.
		direct, err := net.Listen("tcp", net.JoinHostPort(nt.HostIP().String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		loop, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		for _, ln := range []net.Listener{direct, loop} {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					conn, err := ln.Accept()
					if err != nil {
						return
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer conn.Close()
						line, err := bufio.NewReader(conn).ReadString('\n')
						if err == nil {
							_, _ = io.WriteString(conn, "host got: "+line)
						}
					}()
				}
			}()
			t.Cleanup(func() { ln.Close(); wg.Wait() })
		}
		forwarded := nt.Forward(t, loop.Addr().String())
		for _, target := range []string{direct.Addr().String(), forwarded} {
			for _, z := range []*Zone{b, c} {
				out, err := helper(t, z, "dial", target).Output()
				if err != nil {
					t.Fatalf("process in zone %s dialing the host at %s: %v", z.Name, target, err)
				}
				if want := "host got: hello from " + z.Name + "\n"; string(out) != want {
					t.Fatalf("process in zone %s got %q from %s, want %q", z.Name, out, target, want)
				}
			}
		}
	})

	t.Run("kill", func(t *testing.T) {
		echoC := c.Addr(7002)
		startEcho(t, c, echoC)
		pids, err := a.Pids()
		if err != nil {
			t.Fatal(err)
		}
		if !containsPid(pids, server.Process.Pid) {
			t.Fatalf("zone a's processes %v lack the echo server %d", pids, server.Process.Pid)
		}
		if err := a.KillAll(); err != nil {
			t.Fatal(err)
		}
		err = server.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("echo server after KillAll: %v, want killed by SIGKILL", err)
		}
		if pids, err := a.Pids(); err != nil || len(pids) != 0 {
			t.Fatalf("zone a after KillAll: processes %v, %v", pids, err)
		}
		// The other zones' processes live on.
		if err := echoOnce(dial(t, b, echoC), "to c after a was killed", 10*time.Second); err != nil {
			t.Fatalf("echo server in zone c after KillAll of zone a: %v", err)
		}
	})
}

func mustAddr(t *testing.T, ip net.IP) netip.Addr {
	t.Helper()
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok {
		t.Fatalf("bad address %v", ip)
	}
	return a
}

// isTimeout reports whether err is a dial's or a read's timeout: what a
// peer across a cut sees.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func containsPid(pids []int, p int) bool {
	for _, q := range pids {
		if q == p {
			return true
		}
	}
	return false
}

// TestCleanup checks that a Net's cleanup leaves no namespace and no link
// on the host, as `ip netns list` and `ip link` see them.
func TestCleanup(t *testing.T) {
	Require(t)
	var names []string
	var link string
	sleeper := make(chan error, 1)
	t.Run("net", func(t *testing.T) {
		nt := New(t, Config{Zones: 2, Delay: time.Millisecond})
		names, link = nt.Namespaces(), nt.HostLink()
		startEcho(t, nt.Zone("a"), nt.Zone("a").Addr(7000))
		// A process the test never reaps would keep its namespace alive.
		cmd := nt.Zone("b").Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { sleeper <- cmd.Wait() }()
		list := ipOut(t, "netns", "list")
		for _, ns := range names {
			if !strings.Contains(list, ns) {
				t.Fatalf("ip netns list lacks %s while the net exists:\n%s", ns, list)
			}
		}
		if !strings.Contains(ipOut(t, "link"), link) {
			t.Fatalf("ip link lacks %s while the net exists", link)
		}
	})
	if err := <-sleeper; err == nil {
		t.Error("the process in zone b exited cleanly, want killed by the cleanup")
	}
	list, links := ipOut(t, "netns", "list"), ipOut(t, "link")
	for _, ns := range names {
		if strings.Contains(list, ns) {
			t.Errorf("namespace %s left after cleanup:\n%s", ns, list)
		}
	}
	if strings.Contains(links, link) {
		t.Errorf("link %s left after cleanup:\n%s", link, links)
	}
}

// TestRemoveLeftovers leaves namespaces named as a test process that no
// longer runs would have, with a process in one, and checks that they go.
func TestRemoveLeftovers(t *testing.T) {
	Require(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	if alive(pid) {
		t.Skipf("pid %d was reused at once", pid)
	}
	ns := fmt.Sprintf("%s%x-1-b", NSPrefix, pid)
	zone := fmt.Sprintf("%s%x-1-a", NSPrefix, pid)
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"netns", "add", zone},
	} {
		if err := run("ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Whatever RemoveLeftovers missed.
		_ = run("ip", "netns", "del", ns)
		_ = run("ip", "netns", "del", zone)
	})
	// A process sleeping in the zone, as a crashed run's DataNode would.
	sleeper := exec.Command("ip", "netns", "exec", zone, "sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	// Wait until ip has entered the namespace and executed sleep.
	for {
		pids, err := nsPids(zone)
		if err != nil {
			t.Fatal(err)
		}
		if containsPid(pids, sleeper.Process.Pid) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	RemoveLeftovers()

	if err := <-done; err == nil {
		t.Fatal("the process in the leftover zone exited cleanly, want killed")
	}
	list := ipOut(t, "netns", "list")
	for _, n := range []string{ns, zone} {
		if strings.Contains(list, n) {
			t.Errorf("leftover namespace %s still there:\n%s", n, list)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig(), true},
		{Config{Zones: 1}, true},
		{Config{Zones: 0}, false},
		{Config{Zones: 27}, false},
		{Config{Zones: 3, Delay: -time.Millisecond}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
}

func ipOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := output("ip", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
