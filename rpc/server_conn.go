package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/api"
)

// serveUpgrade answers GET /rpc/conn: checks the upgrade request, answers 101,
// hijacks the connection and serves frames on it until it ends.
func (s *Server) serveUpgrade(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), UpgradeToken) {
		s.met.protoErrors.Inc()
		w.Header().Set("Upgrade", UpgradeToken)
		http.Error(w, "rpc: GET "+ConnPath+" needs Connection: Upgrade and Upgrade: "+UpgradeToken, http.StatusUpgradeRequired)
		return
	}
	if s.shuttingDown() {
		http.Error(w, "rpc: server is shutting down", http.StatusServiceUnavailable)
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "rpc: cannot take over the connection: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// The server may have set deadlines for the HTTP request; the protocol
	// has its own lifetime.
	_ = nc.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + UpgradeToken + "\r\n\r\n"); err != nil {
		nc.Close()
		return
	}
	if err := brw.Flush(); err != nil {
		nc.Close()
		return
	}
	c := s.newConn(nc, brw.Reader)
	if c == nil {
		return
	}
	c.serve()
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serverConn is one hijacked connection: a reader loop that starts a
// goroutine per request and a writer goroutine that coalesces responses.
type serverConn struct {
	s      *Server
	nc     net.Conn
	br     *bufio.Reader
	w      *frameWriter // responses, written by the goroutine that made them; a write error ends the connection
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // request goroutines
	// stopping is set by stopReading: the read error that follows is ours,
	// and the requests in flight must finish rather than be cancelled.
	stopping atomic.Bool
	closed   chan struct{} // closed when the connection is fully closed
	budget   budget

	// The reader's deadline (owned by the reader loop): idle between frames,
	// else within a frame; armed is when it was last set.
	inFrame bool
	armed   time.Time
}

func (s *Server) newConn(nc net.Conn, br *bufio.Reader) *serverConn {
	c := &serverConn{s: s, nc: nc, br: br, closed: make(chan struct{}), inFrame: true}
	c.budget.s = s
	c.ctx, c.cancel = context.WithCancel(s.baseCtx)
	c.w = newFrameWriter(nc, func(err error) {
		c.s.log.Debug("rpc: connection write failed", "remote", c.nc.RemoteAddr().String(), "err", err)
		c.cancel()
		c.stopReading()
	})
	c.w.budget = &c.budget
	s.mu.Lock()
	if s.mu.shutdown {
		s.mu.Unlock()
		nc.Close()
		return nil
	}
	s.mu.conns[c] = struct{}{}
	s.mu.Unlock()
	s.met.conns.Inc()
	s.met.connsTotal.Inc()
	return c
}

// stopReading makes the reader loop end at its next read; requests already
// read still finish and get their responses.
func (c *serverConn) stopReading() {
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	c.budget.gate.open()
	c.s.gate.open()
}

func (c *serverConn) serve() {
	c.readLoop()
	if !c.stopping.Load() {
		// The peer went away or broke the protocol: nobody waits for the
		// answers of the requests in flight, so stop them.
		c.cancel()
	}
	c.wg.Wait()
	c.nc.Close()
	c.cancel()
	c.s.mu.Lock()
	delete(c.s.mu.conns, c)
	c.s.mu.Unlock()
	c.s.met.conns.Dec()
	close(c.closed)
}

func (c *serverConn) readLoop() {
	max := c.s.opts.MaxFrameSize
	for {
		if !c.budget.waitRoom(c.ctx, c.stopping.Load) {
			return
		}
		if err := c.awaitFrame(); err != nil {
			c.readFailed(err, false)
			return
		}
		bp := getBuf()
		frame, err := ReadFrame(c.br, (*bp)[:0], max)
		if err != nil {
			putBuf(bp)
			c.readFailed(err, true)
			return
		}
		// When the frame was read, for a write's record (dispatch): a
		// quick request is a read, which needs no clock reading here.
		quick := isQuick(frame)
		var received time.Time
		if !quick {
			received = time.Now()
		}
		if cap(frame) > cap(*bp) {
			*bp = frame // ReadFrame grew the buffer; keep the bigger one
		}
		if !c.takeSlot() {
			putBuf(bp)
			return
		}
		est := estimate(frame, max)
		c.budget.admit(est)
		c.wg.Add(1)
		c.w.begin()
		if quick && c.br.Buffered() == 0 {
			// Nothing else has arrived on this connection and the request
			// is short: run it here. Handing it to a worker would wake a
			// thread (a futex call and, on an idle core, an interrupt),
			// which costs more than a stat; requests that arrive meanwhile
			// wait in the socket for a few microseconds.
			c.run(bp, len(frame), est, received)
			continue
		}
		c.s.submit(job{c, bp, len(frame), est, received})
	}
}

// takeSlot takes a request slot (the server's semaphore) for the frame
// the reader has just read, and reports whether the request may start. A
// reader that waits for a slot reads nothing meanwhile, so it does not see
// its connection end: the client may have seen it break, sent the request
// again to this or another server, and had it applied, and a stale copy
// started now could undo a later write (a delete after the re-create it
// preceded). So after a wait, a request whose connection has ended
// (its context cancelled, or the peer's side closed: peerClosed) does not
// start; the reader ends as it would at the end of the stream, cancelling
// the connection's requests in flight. The engine's own guard (the
// request record read by every attempt, namespace/once.go) does not
// depend on this; this keeps a dead connection's queued requests from
// running at all where the server can know.
func (c *serverConn) takeSlot() bool {
	select {
	case c.s.sem <- struct{}{}:
		return true // no wait: the reader has just read from the connection
	default:
	}
	select {
	case c.s.sem <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	if c.ctx.Err() == nil && !peerClosed(c.nc) {
		return true
	}
	<-c.s.sem
	c.s.met.staleRefused.Inc()
	c.s.log.Debug("rpc: connection ended while its request waited for a slot: not started", "remote", c.nc.RemoteAddr().String())
	return false
}

// errStopping ends the reader when stopReading raced with its own deadline.
var errStopping = errors.New("rpc: connection stopping")

// awaitFrame sets the read deadline for the next frame: the idle timeout
// while nothing of it has arrived, then the frame timeout unless the whole
// frame is already buffered. Setting a deadline takes a lock in the runtime's
// poller, so it is done only where the reader is about to block: a pipelined
// connection reads its frames out of the buffer without one, and a client
// sending one request at a time re-arms the idle deadline only after an
// eighth of it has passed (so it fires after 7/8 to all of IdleTimeout). A
// connection with requests under way is not idle, however long they take.
func (c *serverConn) awaitFrame() error {
	if c.br.Buffered() == 0 {
		now := time.Now()
		if c.inFrame || now.Sub(c.armed) > c.s.opts.IdleTimeout/8 {
			if err := c.setDeadline(now, now.Add(c.s.opts.IdleTimeout), false); err != nil {
				return err
			}
		}
		for {
			_, err := c.br.Peek(1)
			if err == nil {
				break
			}
			if !isTimeout(err) || c.stopping.Load() || c.budget.queued.Load() == 0 {
				return err
			}
			// Silent, but waiting for answers (a long fsck, a big delete):
			// not idle.
			now = time.Now()
			if err := c.setDeadline(now, now.Add(c.s.opts.IdleTimeout), false); err != nil {
				return err
			}
		}
	}
	if c.frameBuffered() {
		return nil
	}
	now := time.Now()
	return c.setDeadline(now, now.Add(c.s.opts.FrameTimeout), true)
}

func (c *serverConn) setDeadline(now, d time.Time, inFrame bool) error {
	_ = c.nc.SetReadDeadline(d)
	c.inFrame, c.armed = inFrame, now
	if c.stopping.Load() {
		// stopReading's deadline may have come before this one.
		return errStopping
	}
	return nil
}

// frameBuffered reports whether the reader's buffer holds a whole frame (or
// a length prefix that is already invalid), so reading it cannot block.
func (c *serverConn) frameBuffered() bool {
	n := c.br.Buffered()
	b, _ := c.br.Peek(min(n, binary.MaxVarintLen64))
	l, k := binary.Uvarint(b)
	if k < 0 {
		return true
	}
	return k > 0 && uint64(n-k) >= l
}

// readFailed logs why the reader ended, and answers a protocol error.
// started says whether part of a frame had arrived.
func (c *serverConn) readFailed(err error, started bool) {
	remote := c.nc.RemoteAddr().String()
	switch {
	case errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrProtocol):
		c.s.met.protoErrors.Inc()
		c.s.met.closed.WithLabelValues("protocol_error").Inc()
		c.s.log.Warn("rpc: closing connection after a protocol error", "remote", remote, "err", err)
		c.sendError(api.Kind_KIND_INVALID_ARGUMENT, err.Error())
	case c.stopping.Load() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
	case isTimeout(err) && (started || c.inFrame):
		c.s.met.closed.WithLabelValues("frame_timeout").Inc()
		c.s.log.Warn("rpc: closing connection: a frame was left unfinished", "remote", remote,
			"frame_timeout", c.s.opts.FrameTimeout, "buffered", c.br.Buffered())
	case isTimeout(err):
		c.s.met.closed.WithLabelValues("idle_timeout").Inc()
		c.s.log.Info("rpc: closing idle connection", "remote", remote, "idle_timeout", c.s.opts.IdleTimeout)
	default:
		c.s.log.Debug("rpc: connection read failed", "remote", remote, "err", err)
	}
}

// job is one request frame waiting for a worker.
type job struct {
	c        *serverConn
	bp       *[]byte
	n        int
	est      int       // the bytes admitted for it (budget.admit)
	received time.Time // when its frame was read (zero for a quick one)
}

// submit hands j to an idle worker, or starts a new one. Workers live on
// after their request: a fresh goroutine per request would grow its stack
// through decoding and the engine every time (measured at a fifth of the
// server's CPU), while a worker keeps the stack it grew. The semaphore the
// reader holds bounds the workers by MaxInflight.
func (s *Server) submit(j job) {
	select {
	case s.work <- j:
	default:
		go s.worker(j)
	}
}

// workerIdle is how long a worker waits for another request before it exits.
const workerIdle = 30 * time.Second

func (s *Server) worker(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.c.run(j.bp, j.n, j.est, j.received)
		idle.Reset(workerIdle)
		select {
		case j = <-s.work:
		case <-idle.C:
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// run executes one request whose frame is (*bp)[:n], read at received (zero
// for a quick request: a read), and for which est bytes were admitted.
func (c *serverConn) run(bp *[]byte, n, est int, received time.Time) {
	defer c.wg.Done()
	ob := getBuf()
	out, ok := c.s.handle(c.ctx, (*bp)[:n], (*ob)[:0], false, received)
	putBuf(bp)
	<-c.s.sem
	*ob = out
	c.budget.adjust(len(out) - est)
	c.w.send(ob)
	c.w.end()
	if !ok {
		c.s.log.Warn("rpc: closing connection after an undecodable frame", "remote", c.nc.RemoteAddr().String())
		c.stopReading()
	}
}

// sendError queues a connection-level error (request id 0) from the reader.
func (c *serverConn) sendError(kind api.Kind, detail string) {
	ob := getBuf()
	out, _ := AppendFrame((*ob)[:0], &api.Response{Error: &api.Error{Kind: kind, Op: "rpc", Detail: detail}}, 0)
	*ob = out
	c.budget.admit(len(out))
	c.w.send(ob)
}
