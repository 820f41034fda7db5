package netzone

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The switch: every zone, and the host, has a TUN device whose packets the
// test process reads, holds for the delay and writes to the TUN device of
// the packet's destination. It stands where a bridge and netem qdiscs
// would: kernels without sch_netem (the sandboxes these tests run in have
// none, nor tc filters) still have TUN devices, and a switch of the test's
// own cuts and delays packets exactly and the same way everywhere.

// queueLen bounds the packets in flight to one port; more are dropped,
// as a full router queue drops them (TCP retransmits).
const queueLen = 4096

// fabric is the switch.
type fabric struct {
	delay time.Duration
	ports []*port
	byIP  map[netip.Addr]*port
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu struct {
		sync.RWMutex
		apart map[[2]*port]bool // pairs cut from each other, both orders
	}

	forwarded atomic.Int64 // packets delivered
	dropped   atomic.Int64 // packets dropped: cut, unknown address, full queue
}

// port is one TUN device on the switch.
type port struct {
	name string // zone name, or "host"
	ip   netip.Addr
	f    *os.File
	zone *Zone // nil for the host
	out  chan packet
}

type packet struct {
	b  []byte
	at time.Time // when to deliver it
}

func newFabric(delay time.Duration) *fabric {
	return &fabric{delay: delay, byIP: map[netip.Addr]*port{}, done: make(chan struct{})}
}

// add attaches p; the switch does not run yet.
func (fb *fabric) add(p *port) {
	p.out = make(chan packet, queueLen)
	fb.ports = append(fb.ports, p)
	fb.byIP[p.ip] = p
}

func (fb *fabric) start() {
	for _, p := range fb.ports {
		fb.wg.Add(2)
		go fb.read(p)
		go fb.write(p)
	}
}

// stop ends the switch's goroutines and closes the TUN devices, which
// removes them.
func (fb *fabric) stop() {
	fb.once.Do(func() {
		close(fb.done)
		for _, p := range fb.ports {
			p.f.Close()
		}
		fb.wg.Wait()
	})
}

func (p *port) isCut() bool { return p.zone != nil && p.zone.IsCut() }

// read takes the packets p's side sends and queues each on its
// destination's port, due after the delay.
func (fb *fabric) read(p *port) {
	defer fb.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := p.f.Read(buf)
		if err != nil {
			return // closed by stop
		}
		pkt := buf[:n]
		// IPv4 only: the zones have no IPv6 addresses, and what the
		// kernel sends unasked over IPv6 (router solicitations) has no
		// destination here.
		if n < 20 || pkt[0]>>4 != 4 {
			continue
		}
		dst := fb.byIP[netip.AddrFrom4([4]byte(pkt[16:20]))]
		if dst == nil || dst == p || p.isCut() || dst.isCut() || fb.isApart(p, dst) {
			fb.dropped.Add(1)
			continue
		}
		select {
		case dst.out <- packet{b: append([]byte(nil), pkt...), at: time.Now().Add(fb.delay)}:
		default:
			fb.dropped.Add(1)
		}
	}
}

// write delivers the packets queued on p when they are due. One delay for
// all keeps a queue in due order.
func (fb *fabric) write(p *port) {
	defer fb.wg.Done()
	for {
		select {
		case <-fb.done:
			return
		case pk := <-p.out:
			if d := time.Until(pk.at); d > 0 {
				time.Sleep(d)
			}
			if p.isCut() || fb.sourceCut(p, pk.b) {
				fb.dropped.Add(1)
				continue
			}
			if _, err := p.f.Write(pk.b); err != nil {
				select {
				case <-fb.done:
					return
				default:
					fb.dropped.Add(1)
				}
				continue
			}
			fb.forwarded.Add(1)
		}
	}
}

// sourceCut reports whether the packet's sender was cut off, or from dst,
// while the packet was on its way.
func (fb *fabric) sourceCut(dst *port, pkt []byte) bool {
	src := fb.byIP[netip.AddrFrom4([4]byte(pkt[12:16]))]
	return src != nil && (src.isCut() || fb.isApart(src, dst))
}

func (fb *fabric) isApart(x, y *port) bool {
	fb.mu.RLock()
	defer fb.mu.RUnlock()
	return fb.mu.apart[[2]*port{x, y}]
}

func (fb *fabric) setApart(x, y *port, apart bool) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.mu.apart == nil {
		fb.mu.apart = map[[2]*port]bool{}
	}
	if apart {
		fb.mu.apart[[2]*port{x, y}] = true
		fb.mu.apart[[2]*port{y, x}] = true
	} else {
		delete(fb.mu.apart, [2]*port{x, y})
		delete(fb.mu.apart, [2]*port{y, x})
	}
}

// Partition drops every packet between zones x and y, both ways, until
// Join; each still reaches the other zones and the host.
func (nt *Net) Partition(x, y *Zone) { nt.sw.setApart(nt.port(x), nt.port(y), true) }

// Join undoes Partition.
func (nt *Net) Join(x, y *Zone) { nt.sw.setApart(nt.port(x), nt.port(y), false) }

func (nt *Net) port(z *Zone) *port {
	p := nt.sw.byIP[z.IP]
	if p == nil || p.zone != z {
		panic("netzone: zone " + z.Name + " is not on this Net")
	}
	return p
}

// openTUN creates the TUN device name (IPv4 packets without a header) in
// the calling thread's network namespace. Closing the file removes it.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/net/tun for %s: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUN device %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("creating TUN device %s: %w", name, err)
	}
	// Non-blocking, so that the runtime's poller waits for packets and
	// Close interrupts a Read.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUN device %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// Stats returns the packets the switch delivered and dropped (cut off,
// unknown destination, full queue) so far.
func (nt *Net) Stats() (forwarded, dropped int64) {
	return nt.sw.forwarded.Load(), nt.sw.dropped.Load()
}
