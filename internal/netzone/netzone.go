package netzone

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"
)

// EnvRequire, when set (scripts/test.sh sets it, after installing
// iproute2), turns the skip for a machine without network namespaces into
// a failure, so that CI cannot pass without having run the zone tests.
const EnvRequire = "NIMBUS_REQUIRE_NETNS"

// NSPrefix begins the name of every namespace this package makes:
// NSPrefix + the test process's pid in hex + "-" + a counter + "-" + the
// zone's name.
const NSPrefix = "nimbusnz-"

// linkPrefix begins the host's TUN device of every Net: linkPrefix + the
// pid in base 36 + "h" + the counter in base 36 (an interface name has at
// most 15 bytes).
const linkPrefix = "nz"

// zoneLink is the name of a zone's TUN device, inside its namespace.
const zoneLink = "eth0"

// Config describes a Net.
type Config struct {
	// Zones is the number of zones (default 3), named a, b, c...
	Zones int
	// Delay is added to every packet leaving a zone (default 2 ms): the
	// one-way delay between two zones and between a zone and the host.
	// Zero means no delay.
	Delay time.Duration
}

// DefaultConfig returns three zones 2 ms apart.
func DefaultConfig() Config { return Config{Zones: 3, Delay: 2 * time.Millisecond} }

// Validate reports a Config New cannot build.
func (c Config) Validate() error {
	if c.Zones < 1 || c.Zones > 26 {
		return fmt.Errorf("netzone: %d zones: want 1 to 26", c.Zones)
	}
	if c.Delay < 0 {
		return fmt.Errorf("netzone: negative delay %v", c.Delay)
	}
	return nil
}

// Net is the zones of one test and the switch joining them. Its methods
// are safe for concurrent use.
type Net struct {
	id       string // NSPrefix + pid + counter
	hostLink string // the host's TUN device
	sw       *fabric
	subnet   netip.Prefix
	hostIP   netip.Addr
	delay    time.Duration
	zones    []*Zone
}

// Zone is one availability zone: a network namespace with one address.
type Zone struct {
	Name  string     // a, b, c...
	NS    string     // the namespace's name, for `ip netns exec`
	IP    netip.Addr // the zone's address on the bridge
	index int
	net   *Net

	cut atomic.Bool
}

var counter atomic.Int64

// Available reports why this machine cannot make zones (nil when it can):
// not root and no CAP_NET_ADMIN, ip missing, or no /dev/net/tun.
func Available() error {
	var missing []string
	for _, tool := range []string{"ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("netzone: %s not found: install iproute2 (apt-get install iproute2; scripts/test.sh installs it as root)",
			strings.Join(missing, " and "))
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("netzone: no TUN devices here: %v", err)
	}
	if !hasNetAdmin() {
		return errors.New("netzone: network namespaces need root or CAP_NET_ADMIN, which this process lacks (euid " +
			strconv.Itoa(os.Geteuid()) + ")")
	}
	return nil
}

// hasNetAdmin reads the effective capability set of this process.
func hasNetAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return os.Geteuid() == 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return os.Geteuid() == 0
			}
			const capNetAdmin = 12
			return caps&(1<<capNetAdmin) != 0
		}
	}
	return os.Geteuid() == 0
}

// Require skips t, or fails it when EnvRequire is set, when Available
// reports that zones cannot be made here.
func Require(t testing.TB) {
	t.Helper()
	err := Available()
	if err == nil {
		return
	}
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("%v (%s is set: failing instead of skipping)", err, EnvRequire)
	}
	t.Skip(err.Error())
}

// New builds the zones of cfg (DefaultConfig's values for zero fields but
// Delay) and removes them when the test ends. It calls Require first; any
// later failure fails the test.
func New(t testing.TB, cfg Config) *Net {
	t.Helper()
	Require(t)
	if cfg.Zones == 0 {
		cfg.Zones = DefaultConfig().Zones
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	RemoveLeftovers()

	pid := os.Getpid()
	n := counter.Add(1)
	nt := &Net{
		id:       fmt.Sprintf("%s%x-%d", NSPrefix, pid, n),
		hostLink: linkPrefix + strconv.FormatInt(int64(pid), 36) + "h" + strconv.FormatInt(n, 36),
		delay:    cfg.Delay,
	}
	nt.sw = newFabric(cfg.Delay)
	for i := 0; i < cfg.Zones; i++ {
		name := string(rune('a' + i))
		nt.zones = append(nt.zones, &Zone{Name: name, NS: nt.id + "-" + name, index: i, net: nt})
	}

	// The watchdog removes everything if the test binary dies before the
	// cleanup runs; after the cleanup its commands find nothing.
	wd := testproc.Watchdog(nt.removeScript())
	t.Cleanup(func() {
		if err := nt.remove(); err != nil {
			t.Errorf("netzone: cleanup: %v", err)
		}
		if wd != nil {
			wd.Close()
		}
	})
	if err := nt.build(); err != nil {
		t.Fatalf("netzone: building %d zones: %v", cfg.Zones, err)
	}
	return nt
}

// build makes the zones' namespaces and TUN devices, the host's TUN
// device, and starts the switch.
func (nt *Net) build() error {
	for _, z := range nt.zones {
		if err := run("ip", "netns", "add", z.NS); err != nil {
			return err
		}
	}
	// The subnet is chosen, and the host's device addressed, under a lock
	// shared by every test process of the machine, so that two tests never
	// pick the same /24.
	unlock, err := lockHost()
	if err != nil {
		return err
	}
	defer unlock()
	nt.subnet, err = freeSubnet()
	if err != nil {
		return err
	}
	base := nt.subnet.Addr().As4()
	nt.hostIP = netip.AddrFrom4([4]byte{base[0], base[1], base[2], 1})
	host, err := openTUN(nt.hostLink)
	if err != nil {
		return err
	}
	nt.sw.add(&port{name: "host", ip: nt.hostIP, f: host})
	for _, s := range [][]string{
		{"ip", "addr", "add", netip.PrefixFrom(nt.hostIP, 24).String(), "dev", nt.hostLink},
		{"ip", "link", "set", nt.hostLink, "up"},
	} {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	for _, z := range nt.zones {
		z.IP = netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(11 + z.index)})
		var f *os.File
		if err := z.Do(func() error {
			var err error
			f, err = openTUN(zoneLink)
			return err
		}); err != nil {
			return err
		}
		nt.sw.add(&port{name: z.Name, ip: z.IP, f: f, zone: z})
		for _, s := range [][]string{
			{"ip", "-n", z.NS, "link", "set", "lo", "up"},
			{"ip", "-n", z.NS, "addr", "add", netip.PrefixFrom(z.IP, 24).String(), "dev", zoneLink},
			{"ip", "-n", z.NS, "link", "set", zoneLink, "up"},
		} {
			if err := run(s[0], s[1:]...); err != nil {
				return err
			}
		}
	}
	nt.sw.start()
	return nil
}

// Zones returns the zones, in name order.
func (nt *Net) Zones() []*Zone { return append([]*Zone(nil), nt.zones...) }

// Zone returns the zone named name ("a", "b", ...); nil if there is none.
func (nt *Net) Zone(name string) *Zone {
	for _, z := range nt.zones {
		if z.Name == name {
			return z
		}
	}
	return nil
}

// HostIP is the host's address on the bridge: a zone reaches the host's
// listeners on it.
func (nt *Net) HostIP() netip.Addr { return nt.hostIP }

// Subnet is the /24 the zones and HostIP share.
func (nt *Net) Subnet() netip.Prefix { return nt.subnet }

// Delay is the delay added to each packet that leaves a zone.
func (nt *Net) Delay() time.Duration { return nt.delay }

// HostLink is the name of the host's TUN device into the switch.
func (nt *Net) HostLink() string { return nt.hostLink }

// Namespaces returns the names of the zones' namespaces.
func (nt *Net) Namespaces() []string {
	var names []string
	for _, z := range nt.zones {
		names = append(names, z.NS)
	}
	return names
}

// Addr returns the zone's host:port for port.
func (z *Zone) Addr(port int) string {
	return netip.AddrPortFrom(z.IP, uint16(port)).String()
}

// Command returns a command that runs name with args inside the zone
// (`ip netns exec NS name args...`: ip enters the namespace and executes
// name, so the command's process is name itself and Kill reaches it).
func (z *Zone) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", z.NS, name}, args...)...)
}

// Serve starts `binary serve --data data --listen ZONEIP:port args...` in
// the zone (data: a fresh temporary directory when empty) and waits, up to
// 30 s, until it answers /readyz; the test process reaches it at its
// zone address. It is killed when the test ends, as testproc.Start's are.
func (z *Zone) Serve(t testing.TB, binary, data string, port int, args ...string) *testproc.Server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	addr := z.Addr(port)
	s := testproc.Launch(t, z.Command(binary, append([]string{"serve", "--data", data, "--listen", addr}, args...)...), data, addr)
	if err := s.WaitReady(30 * time.Second); err != nil {
		s.Kill()
		t.Fatalf("nimbus serve in zone %s did not become ready: %v\n%s", z.Name, err, s.Log.String())
	}
	return s
}

// Cut drops every packet into and out of the zone, including those to and
// from the host and those already on their way, until Heal. Connections
// are not reset: their peers see silence, as across a real partition.
// Traffic inside the zone goes on.
func (z *Zone) Cut() { z.cut.Store(true) }

// Heal undoes Cut.
func (z *Zone) Heal() { z.cut.Store(false) }

// IsCut reports whether the zone is cut off.
func (z *Zone) IsCut() bool { return z.cut.Load() }

// Pids returns the processes in the zone's namespace.
func (z *Zone) Pids() ([]int, error) { return nsPids(z.NS) }

// KillAll sends SIGKILL to every process in the zone and waits, up to
// 10 s, until none is left. The parent of a killed process still reaps it
// (exec.Cmd.Wait); a zombie is no longer in the zone.
func (z *Zone) KillAll() error {
	if err := killNS(z.NS, 10*time.Second); err != nil {
		return fmt.Errorf("netzone: killing zone %s: %w", z.Name, err)
	}
	return nil
}

func nsPids(ns string) ([]int, error) {
	out, err := output("ip", "netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if p, err := strconv.Atoi(f); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

func killNS(ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids, err := nsPids(ns)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in namespace %s", pids, ns)
		}
		for _, p := range pids {
			if p == os.Getpid() {
				// A thread of this process inside the zone (Zone.Do)
				// makes ip list it; the process is not the zone's.
				continue
			}
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remove stops the switch (closing the TUN devices removes them), kills
// the zones' processes and deletes the namespaces. It removes what exists
// and reports the first failure.
func (nt *Net) remove() error {
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	nt.sw.stop()
	existing := listNS()
	for _, ns := range nt.Namespaces() {
		if existing[ns] {
			note(killNS(ns, 10*time.Second))
		}
	}
	for _, ns := range nt.Namespaces() {
		if existing[ns] {
			note(run("ip", "netns", "del", ns))
		}
	}
	return first
}

// removeScript is remove as a shell script, for the watchdog (the TUN
// devices go when the test process exits and their descriptors close).
func (nt *Net) removeScript() string {
	var b strings.Builder
	for _, ns := range nt.Namespaces() {
		fmt.Fprintf(&b, "for p in $(ip netns pids %s 2>/dev/null); do kill -9 $p; done; ", ns)
	}
	b.WriteString("sleep 0.2; ")
	for _, ns := range nt.Namespaces() {
		fmt.Fprintf(&b, "ip netns del %s 2>/dev/null; ", ns)
	}
	b.WriteString("true")
	return b.String()
}

// RemoveLeftovers removes the namespaces, and kills the processes in
// them, that a test process no longer running left behind (killed before
// its cleanup and its watchdog ran). New calls it; it touches only names of this package
// whose pid is not a live process.
func RemoveLeftovers() {
	for ns := range listNS() {
		rest, ok := strings.CutPrefix(ns, NSPrefix)
		if !ok {
			continue
		}
		hexPid, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.ParseInt(hexPid, 16, 32)
		if err != nil || alive(int(pid)) {
			continue
		}
		_ = killNS(ns, 5*time.Second)
		_ = run("ip", "netns", "del", ns)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// listNS returns the names of the machine's named network namespaces.
func listNS() map[string]bool {
	names := map[string]bool{}
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return names
	}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// lockHost takes an exclusive lock shared by every process of the machine
// that uses this package.
func lockHost() (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "nimbus-netzone.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// subnetSpace holds the /24s a Net may take: private addresses that a
// machine's own networks rarely use; those that overlap one are skipped.
var subnetSpace = netip.MustParsePrefix("10.213.0.0/16")

// freeSubnet returns a /24 of subnetSpace that overlaps no address or
// route of the host. Callers hold lockHost.
func freeSubnet() (netip.Prefix, error) {
	used, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	base := subnetSpace.Addr().As4()
	start := os.Getpid() % 256
	for i := 0; i < 256; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte((start + i) % 256), 0}), 24)
		free := true
		for _, u := range used {
			if u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 in %v: every one overlaps a host address or route", subnetSpace)
}

// hostPrefixes returns the host's IPv4 routes (but the default route) and
// addresses.
func hostPrefixes() ([]netip.Prefix, error) {
	var used []netip.Prefix
	out, err := output("ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		// A route begins with its destination, or with its type
		// (local, broadcast, unreachable...) and then its destination.
		for _, dst := range f[:min(2, len(f))] {
			if !strings.Contains(dst, "/") {
				dst += "/32"
			}
			if p, err := netip.ParsePrefix(dst); err == nil {
				used = append(used, p.Masked())
				break
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			used = append(used, p.Masked())
		}
	}
	return used, nil
}

func run(name string, args ...string) error {
	_, err := output(name, args...)
	return err
}

func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
