package server

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/platform"
	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound what clients can hold of the server: connections (and so file
// descriptors, which the store needs too), the time each phase of a
// connection may take, and the memory an RPC connection may hold. The zero
// value of a field means its default (DefaultLimits); docs/OPERATIONS.md
// lists them with the flags that set them and what a client sees.
type Limits struct {
	// MaxConnections bounds the open client connections (HTTP, WebHDFS and
	// upgraded RPC alike). 0 derives it from the descriptor limit:
	// RLIMIT_NOFILE minus a reserve for the store and the rest of the
	// process (ConnectionBudget). A client over the limit is answered 503
	// with Retry-After and the connection closed.
	MaxConnections int
	// ReadHeaderTimeout bounds the reading of a request's headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive HTTP connection idle between requests.
	IdleTimeout time.Duration
	// WriteStallTimeout fails a write to a client (an HTTP response or RPC
	// answers) that makes no progress for that long: a client that stops
	// reading cannot hold a connection and its buffers forever. Long
	// downloads and listings are not cut as long as the client reads.
	WriteStallTimeout time.Duration
	// RPCConnBytes, RPCServerBytes, RPCFrameTimeout and RPCIdleTimeout are
	// the rpc.ServerOptions of the same names (MaxConnBytes, ...).
	RPCConnBytes    int64
	RPCServerBytes  int64
	RPCFrameTimeout time.Duration
	RPCIdleTimeout  time.Duration
	// UploadIdleTimeout bounds each read of a WebHDFS CREATE or APPEND body
	// (webhdfs.Config.BodyIdleTimeout): a client that sends nothing for
	// that long fails its upload, and nothing of it is kept.
	UploadIdleTimeout time.Duration
	// GatewayCredential, when set, reserves GatewayConnections slots past
	// MaxConnections for the local platform's gateway: a connection over
	// the limit whose first request carries it in the
	// platform.HeaderGatewayCredential header (compared in constant time)
	// is served in one of them. The gateway hands it to the instances it
	// starts (platform.EnvGatewayCredential), so that clients holding an
	// instance's every slot do not lock the gateway out of it.
	GatewayCredential string
	// GatewayConnections is the number of reserved slots; 0 means
	// DefaultGatewayConnections. Unused without GatewayCredential.
	GatewayConnections int
}

// DefaultGatewayConnections is the connections reserved for the gateway
// on an instance: the gateway holds one per invocation in flight there
// (at most the platform's --concurrency, 4 by default) and keeps them
// open between invocations; 64 leaves room for a --concurrency up to 64
// and for connections the gateway opens while the instance is still
// closing older ones.
const DefaultGatewayConnections = 64

// DefaultLimits returns the defaults. MaxConnections stays 0: it is worked
// out from the descriptor limit at Start.
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		WriteStallTimeout: 2 * time.Minute,
		UploadIdleTimeout: 30 * time.Second,
	}
}

// Validate reports the first negative field.
func (l *Limits) Validate() error {
	if l.MaxConnections < 0 {
		return fmt.Errorf("server: MaxConnections %d is negative", l.MaxConnections)
	}
	if l.ReadHeaderTimeout < 0 || l.IdleTimeout < 0 || l.WriteStallTimeout < 0 || l.RPCFrameTimeout < 0 || l.RPCIdleTimeout < 0 || l.UploadIdleTimeout < 0 {
		return errors.New("server: a timeout is negative")
	}
	if l.GatewayConnections < 0 {
		return fmt.Errorf("server: GatewayConnections %d is negative", l.GatewayConnections)
	}
	if l.RPCConnBytes < 0 || l.RPCServerBytes < 0 {
		return errors.New("server: an RPC byte bound is negative")
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.WriteStallTimeout == 0 {
		l.WriteStallTimeout = d.WriteStallTimeout
	}
	if l.UploadIdleTimeout == 0 {
		l.UploadIdleTimeout = d.UploadIdleTimeout
	}
	if l.GatewayConnections == 0 {
		l.GatewayConnections = DefaultGatewayConnections
	}
	return l
}

// raiseNoFile raises the soft descriptor limit to the hard one where the
// system allows and returns the soft limit in force afterwards. (Go's
// runtime does the same at start on Linux; doing it here makes the number
// the budget is based on the one in force, whatever started the process.)
func raiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		up := rl
		up.Cur = up.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up); err == nil {
			rl = up
		}
	}
	return rl.Cur, nil
}

// ConnectionBudget returns the connections a process with nofile descriptors
// may hold: nofile minus a reserve of max(1024, nofile/4) for the store's
// files, its write-ahead log, block files, the rejections in progress and
// the runtime; the reserve never takes more than half.
func ConnectionBudget(nofile uint64) int {
	reserve := max(1024, nofile/4)
	if reserve > nofile/2 {
		reserve = nofile / 2
	}
	return int(min(nofile-reserve, 1<<30))
}

// maxScreening bounds the connections over the limit being read (their
// request's head) and answered at once; each holds a descriptor, a
// goroutine and at most maxHead bytes for at most twice screenTimeout
// (the head, then the 503 and the drain of a body). While that many are,
// the listener accepts nothing more until one is done or a slot frees: the
// rest wait in the kernel's backlog, which costs this process nothing,
// rather than be answered before their request. screenTimeout is short
// because a client writes its request as soon as it is connected (it
// reaches the server right after the handshake that the accept
// completes); a connection silent that long is a flood's or a
// slowloris's, and is answered 503 without its request, so that a flood
// of idle connections holds each of the 64 for a quarter of a second.
const (
	maxScreening  = 64
	screenTimeout = 250 * time.Millisecond
	maxHead       = 16 << 10
)

// rejectResponse is what a client over the connection limit reads.
const rejectResponse = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 54\r\n\r\n" +
	"nimbus: too many connections, retry in a few seconds\r\n"

// limitListener caps the connections accepted and not yet closed. Over the
// cap it still accepts, up to maxScreening at once (a connection left in
// the backlog for long is a client waiting in silence until its own
// timeout), reads the request's head (an HTTP
// client takes an answer that comes before it sent its request as a broken
// connection, not as an answer) and answers 503, or serves the connection
// in a reserved slot when the request carries the gateway's credential, or
// in a client slot freed meanwhile.
//
// Accept takes connections from a goroutine that runs the underlying
// Accept (started by the first Accept), so that a connection admitted
// after its screening reaches Accept while the underlying one waits.
type limitListener struct {
	net.Listener
	max         int64
	maxReserved int64
	credential  []byte
	stall       time.Duration
	log         *slog.Logger
	active      atomic.Int64 // connections in client slots
	reserved    atomic.Int64 // connections in the gateway's reserved slots
	screening   chan struct{}
	freed       chan struct{} // a client slot was given back
	conns       chan accepted
	done        chan struct{}
	start       sync.Once
	stop        sync.Once
	lastWarn    atomic.Int64 // unix nanos of the last "limit reached" log line
	rejected    prometheus.Counter
}

type accepted struct {
	c   net.Conn
	err error
}

func newLimitListener(ln net.Listener, max int, stall time.Duration, log *slog.Logger, reg prometheus.Registerer) *limitListener {
	l := &limitListener{Listener: ln, max: int64(max), stall: stall, log: log,
		screening: make(chan struct{}, maxScreening), freed: make(chan struct{}, 1),
		conns: make(chan accepted), done: make(chan struct{}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "http", Name: "connections_rejected_total",
			Help: "Connections turned away with 503 because the server held its maximum.",
		})}
	reg.MustRegister(l.rejected,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "http", Name: "connections",
			Help: "Client connections open (HTTP, WebHDFS and upgraded RPC), the gateway's in reserved slots included.",
		}, func() float64 { return float64(l.active.Load() + l.reserved.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "http", Name: "max_connections",
			Help: "The connection limit in force.",
		}, func() float64 { return float64(l.max) }))
	return l
}

// reserve sets the gateway's credential and its reserved slots.
func (l *limitListener) reserve(credential string, slots int) {
	if credential != "" && slots > 0 {
		l.credential, l.maxReserved = []byte(credential), int64(slots)
	}
}

// Accept returns the next connection admitted.
func (l *limitListener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case a := <-l.conns:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener; connections being screened are closed when
// their screening ends.
func (l *limitListener) Close() error {
	l.stop.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// deliver hands a to Accept; false (c closed) once the listener is closed.
func (l *limitListener) deliver(a accepted) bool {
	select {
	case l.conns <- a:
		return true
	case <-l.done:
		if a.c != nil {
			a.c.Close()
		}
		return false
	}
}

func (l *limitListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !l.deliver(accepted{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a temporary error: the server backs off before its next Accept
		}
		if l.active.Add(1) <= l.max {
			l.deliver(accepted{c: &limitConn{Conn: c, l: l}})
			continue
		}
		l.active.Add(-1)
		if !l.overLimit(c) {
			return
		}
	}
}

// overLimit screens c in a goroutine of its own once one of maxScreening
// is free, or serves it if a client slot frees first. It reports false
// once the listener is closed.
func (l *limitListener) overLimit(c net.Conn) bool {
	for {
		select {
		case l.screening <- struct{}{}:
			go l.screen(c)
			return true
		case <-l.freed:
			if l.active.Add(1) <= l.max {
				return l.deliver(accepted{c: &limitConn{Conn: c, l: l}})
			}
			l.active.Add(-1)
		case <-l.done:
			c.Close()
			return false
		}
	}
}

// recorder keeps what it reads, to be read again by the server.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// screen reads the head of c's first request within screenTimeout and
// serves c in a reserved slot (the head carries the gateway's credential)
// or a client slot freed meanwhile, or answers 503 and closes it. A head
// that is not HTTP, or larger than maxHead, is answered 503 as well, and
// so is a connection that sent nothing within screenTimeout; one that
// closed is closed.
func (l *limitListener) screen(c net.Conn) {
	defer func() { <-l.screening }()
	_ = c.SetDeadline(time.Now().Add(screenTimeout))
	rec := &recorder{r: c}
	req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(rec, maxHead)))
	if err == nil && l.maxReserved > 0 && subtle.ConstantTimeCompare([]byte(req.Header.Get(platform.HeaderGatewayCredential)), l.credential) == 1 {
		if l.reserved.Add(1) <= l.maxReserved {
			_ = c.SetDeadline(time.Time{})
			l.deliver(accepted{c: &limitConn{Conn: c, l: l, gateway: true, head: rec.buf}})
			return
		}
		l.reserved.Add(-1)
	}
	if err == nil && l.active.Add(1) <= l.max {
		_ = c.SetDeadline(time.Time{})
		l.deliver(accepted{c: &limitConn{Conn: c, l: l, head: rec.buf}})
		return
	} else if err == nil {
		l.active.Add(-1)
	}
	defer c.Close()
	if err != nil && len(rec.buf) == 0 {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			// Silent: answered without its request, and not drained.
			l.rejected.Inc()
			_ = c.SetWriteDeadline(time.Now().Add(screenTimeout))
			_, _ = io.WriteString(c, rejectResponse)
		}
		return // or it closed: nobody to answer
	}
	l.reject(c)
}

// reject answers 503 to c, whose request's head was read. It half-closes
// and drains what the client sends after (its body) within screenTimeout,
// so that the client reads the answer rather than a reset.
func (l *limitListener) reject(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(screenTimeout))
	l.rejected.Inc()
	if now := time.Now().UnixNano(); now-l.lastWarn.Load() > int64(10*time.Second) {
		l.lastWarn.Store(now)
		l.log.Warn("connection limit reached: turning clients away with 503", "max_connections", l.max,
			"remote", c.RemoteAddr().String())
	}
	if _, err := io.WriteString(c, rejectResponse); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// limitConn gives its slot back on Close and arms the write-stall deadline
// before writes. Deadlines are set through the runtime's poller under a
// lock, so a write re-arms only when an eighth of the timeout has passed
// since the last arming: a stalled write fails after 7/8 to all of
// WriteStallTimeout. An explicit write deadline (the HTTP server's or a
// handler's through http.ResponseController) takes over until cleared.
type limitConn struct {
	net.Conn
	l       *limitListener
	gateway bool   // in a reserved slot
	head    []byte // read by the screening, to be read again
	closed  atomic.Bool
	armed   atomic.Int64 // unix nanos of the last arming; -1 while an explicit deadline rules
}

func (c *limitConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		if c.gateway {
			c.l.reserved.Add(-1)
		} else {
			c.l.active.Add(-1)
			select {
			case c.l.freed <- struct{}{}:
			default:
			}
		}
	}
	return c.Conn.Close()
}

// NetConn returns the connection underneath, for what needs its socket (the
// RPC server's check of a connection's TCP state).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// Read returns what the screening read first. The server reads a
// connection from one goroutine at a time.
func (c *limitConn) Read(b []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(b, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *limitConn) arm() {
	stall := c.l.stall
	if stall <= 0 {
		return
	}
	a := c.armed.Load()
	if a < 0 {
		return
	}
	now := time.Now().UnixNano()
	if now-a > int64(stall/8) {
		_ = c.Conn.SetWriteDeadline(time.Unix(0, now+int64(stall)))
		c.armed.Store(now)
	}
}

func (c *limitConn) Write(b []byte) (int, error) {
	c.arm()
	return c.Conn.Write(b)
}

// ReadFrom keeps the kernel's copy (sendfile, splice) of the TCP connection
// for large responses, re-arming the stall deadline every chunk.
func (c *limitConn) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := c.Conn.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	const chunk = 4 << 20
	var total int64
	for {
		c.arm()
		lr := &io.LimitedReader{R: r, N: chunk}
		n, err := rf.ReadFrom(lr)
		total += n
		if err != nil || lr.N > 0 {
			return total, err // an error, or r ended inside this chunk
		}
	}
}

func (c *limitConn) SetWriteDeadline(t time.Time) error {
	c.explicit(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitConn) SetDeadline(t time.Time) error {
	c.explicit(t)
	return c.Conn.SetDeadline(t)
}

func (c *limitConn) explicit(t time.Time) {
	if t.IsZero() {
		c.armed.Store(0) // the stall deadline applies again from the next write
	} else {
		c.armed.Store(-1)
	}
}

// limitListener wraps ln with the connection limit: Limits.MaxConnections,
// or the budget of the descriptor limit (raised to its hard limit first).
func (s *Server) limitListener(ln net.Listener) net.Listener {
	return LimitListener(ln, s.cfg.Limits, 1, s.log, s.reg)
}

// LimitListener wraps ln with lim's connection limit and write-stall
// timeout, as a server wraps its own listener; the local platform's gateway
// wraps its listener with it too. A connection over the limit is answered
// 503 with Retry-After and closed. lim.MaxConnections 0 derives the limit
// from the descriptor limit (raised to its hard limit first):
// ConnectionBudget(nofile) divided by perConn, the descriptors each client
// connection may take (1 for a server; 2 for the gateway, which holds a
// connection to an instance for each request it forwards). The metrics
// nimbus_http_connections, nimbus_http_max_connections and
// nimbus_http_connections_rejected_total are registered on reg.
func LimitListener(ln net.Listener, lim Limits, perConn int, log *slog.Logger, reg prometheus.Registerer) net.Listener {
	lim = lim.withDefaults()
	perConn = max(perConn, 1)
	limit := lim.MaxConnections
	nofile, err := raiseNoFile()
	if err != nil {
		log.Warn("reading the descriptor limit", "err", err)
	}
	if limit == 0 {
		limit = 1 << 20
		if err == nil {
			limit = ConnectionBudget(nofile) / perConn
		}
	} else if err == nil && uint64(limit*perConn) > nofile {
		log.Warn("the connection limit is above the descriptor limit: the process may run out of descriptors",
			"max_connections", limit, "descriptors_per_connection", perConn, "nofile", nofile)
	}
	log.Info("connection limit", "max_connections", limit, "nofile", nofile)
	l := newLimitListener(ln, limit, lim.WriteStallTimeout, log.With("component", "http"), reg)
	l.reserve(lim.GatewayCredential, lim.GatewayConnections)
	return l
}
