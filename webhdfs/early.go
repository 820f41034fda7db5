package webhdfs

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strconv"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

// Go's HTTP server answers some requests itself, before any handler sees
// them: a request line it cannot parse (a path with a bad percent-escape,
// a raw space or control character), a malformed or missing Host header,
// headers over its size limit, a transfer encoding it does not support. It
// writes that answer straight to the connection, in one Write, as plain
// text:
//
//	HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request
//
// and closes the connection. net/http offers no hook for it, so
// ShapeEarlyErrors rewrites that one Write into WebHDFS's shape: the same
// status, a RemoteException JSON body (IllegalArgumentException), and
// Connection: close. A handler's answers cannot be mistaken for it: they
// carry a Date header and list Connection before Content-Type.

// earlyHeaders is what net/http puts between the status line and the body
// of an answer it writes before any handler.
const earlyHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// ShapeEarlyErrors wraps ln so that the plain-text answers net/http writes
// before a handler runs reach the client as WebHDFS RemoteExceptions. The
// connections it returns keep the kernel's copy (io.ReaderFrom) and
// half-close (CloseWrite) of the connections underneath.
func ShapeEarlyErrors(ln net.Listener) net.Listener { return earlyListener{ln} }

type earlyListener struct{ net.Listener }

func (l earlyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &earlyConn{Conn: c}, nil
}

type earlyConn struct{ net.Conn }

// NetConn returns the connection underneath, for what needs its socket (the
// RPC server's check of a connection's TCP state).
func (c *earlyConn) NetConn() net.Conn { return c.Conn }

func (c *earlyConn) Write(b []byte) (int, error) {
	if out, ok := shapeEarly(b); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *earlyConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *earlyConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// shapeEarly returns b rewritten as a WebHDFS answer when b is an answer
// net/http wrote before any handler ran (see above), ok false otherwise.
func shapeEarly(b []byte) (out []byte, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !found {
		return nil, false
	}
	status, body, found := bytes.Cut(rest, []byte(earlyHeaders))
	if !found || len(status) < 4 || status[3] != ' ' || bytes.ContainsAny(status, "\r\n") {
		return nil, false
	}
	code, err := strconv.Atoi(string(status[:3]))
	if err != nil || code < 400 || code > 599 {
		return nil, false
	}
	ex := wire.ExceptionOf(meta.KindInvalidArgument)
	if code == 501 {
		ex = wire.ExceptionOf(meta.KindUnsupported)
	}
	var re wire.RemoteException
	re.RemoteException.Exception = ex.Name
	re.RemoteException.JavaClassName = ex.ClassName
	re.RemoteException.Message = "malformed HTTP request, answered by the HTTP library before Nimbus read it (" +
		string(bytes.ToValidUTF8(body, []byte("?"))) +
		"): a path with a bad percent-escape, a space or control character in the request line, or a malformed header; nothing was done"
	js, err := json.Marshal(re)
	if err != nil {
		return nil, false
	}
	statusLine := status
	if i := bytes.IndexByte(status, ':'); i > 0 {
		statusLine = status[:i] // the reason phrase without net/http's detail, which is in the message
	}
	out = make([]byte, 0, len(statusLine)+len(js)+128)
	out = append(out, "HTTP/1.1 "...)
	out = append(out, statusLine...)
	out = append(out, "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(js)), 10)
	out = append(out, "\r\n\r\n"...)
	out = append(out, js...)
	return out, true
}
