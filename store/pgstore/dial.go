package pgstore

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dialer returns the store's dial function: a database host that vanishes
// without closing its connections (powered off, cut off by the network)
// would otherwise leave a statement waiting for its answer until the
// kernel's defaults give up (keepalive after two hours, retransmissions
// after about fifteen minutes). With deadPeer > 0, an idle or waiting
// connection is probed after deadPeer/3 of silence, every deadPeer/9, and
// dropped after three unanswered probes; data sent and not acknowledged for
// deadPeer drops it too (TCP_USER_TIMEOUT). The operation then fails as
// store.ErrUnavailable, retryable, and the pool dials again (the next host
// of a multi-host URL, after a failover). A server that is merely slow,
// or a statement waiting for a row lock, still acknowledges at the TCP
// level and is not cut off.
func dialer(connect, deadPeer time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: connect}
	if deadPeer > 0 {
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: deadPeer / 3, Interval: deadPeer / 9, Count: 3}
		ms := int(deadPeer.Milliseconds())
		d.Control = func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket has no peer to lose
			}
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return d.DialContext
}
