package rpc

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerClosed reports whether the peer of a TCP connection has closed its
// side or reset it, as the kernel knows it now, without reading: the
// connection's state is CLOSE_WAIT (the peer's FIN arrived, perhaps behind
// data not read yet) or CLOSE (reset). Anything else, or a connection that
// is not TCP, reports false: the reader will see the end when it reads.
func peerClosed(nc net.Conn) bool {
	// Through the wrappers of the listeners (TLS, the server's connection
	// limit, WebHDFS's early answers), each of which names the connection
	// underneath.
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true // closed
	}
	var state uint8
	var serr error
	if err := rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr == nil {
			state = info.State
		}
	}); err != nil {
		return true // closed
	}
	if serr != nil {
		return false // not TCP (a Unix socket): unknown
	}
	return state == tcpCloseWait || state == tcpClose
}

// The kernel's TCP states (include/net/tcp_states.h).
const (
	tcpClose     = 7
	tcpCloseWait = 8
)
