package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/nimbus-fs/nimbus/api"
)

// ConnOptions configure the client end of a connection.
type ConnOptions struct {
	// MaxFrameSize bounds one frame in either direction; 0 means
	// DefaultMaxFrameSize. It must match the server's to be useful.
	MaxFrameSize int
	// Dialer opens the TCP connection; nil uses a zero net.Dialer.
	Dialer *net.Dialer
}

// Conn is the client end of one multiplexed connection. Call is safe for
// concurrent use: calls are pipelined on the connection and their responses
// matched by request id. Once the connection fails it stays failed (Err is
// set and Done is closed); the owner dials a new one.
type Conn struct {
	nc   net.Conn
	br   *bufio.Reader
	max  int
	w    *frameWriter
	done chan struct{} // closed when the connection has failed or been closed

	mu struct {
		sync.Mutex
		pending map[uint64]*call
		err     error // why the connection ended; nil while it works
	}
}

type call struct {
	ch    chan struct{} // receives when frame or err is set
	frame *[]byte       // the response frame
	err   error
}

var callPool = sync.Pool{New: func() any { return &call{ch: make(chan struct{}, 1)} }}

// HostPort turns an address such as "http://127.0.0.1:9870", "127.0.0.1:9870"
// or "localhost" into a TCP host:port (port 9870 when none is given).
func HostPort(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("rpc: empty address")
	}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", fmt.Errorf("rpc: bad address %q: %v", addr, err)
		}
		if u.Scheme != "http" {
			return "", fmt.Errorf("rpc: bad address %q: only http:// is supported", addr)
		}
		addr = u.Host
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "9870")
	}
	return addr, nil
}

// Dial opens a connection to the server at addr (see HostPort) and performs
// the upgrade handshake. ctx bounds the dial and the handshake only. A
// platform gateway at addr makes it fail with ErrGateway.
func Dial(ctx context.Context, addr string, opts ConnOptions) (*Conn, error) {
	hp, err := HostPort(addr)
	if err != nil {
		return nil, err
	}
	d := opts.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	nc, err := d.DialContext(ctx, "tcp", hp)
	if err != nil {
		return nil, err
	}
	// Bound the handshake by ctx.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	br, err := handshake(nc, hp)
	if !stop() {
		nc.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return newConn(nc, br, opts.MaxFrameSize), nil
}

func handshake(nc net.Conn, host string) (*bufio.Reader, error) {
	if _, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ConnPath, host, UpgradeToken); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 32<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return nil, fmt.Errorf("%w: reading the upgrade answer: %v", ErrProtocol, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), UpgradeToken) {
		resp.Body.Close()
		if resp.Header.Get(HeaderGateway) != "" {
			return nil, fmt.Errorf("%w (it answered %q to %s)", ErrGateway, resp.Status, ConnPath)
		}
		return nil, fmt.Errorf("%w: server answered %q to the %s upgrade (is this a Nimbus server?)", ErrProtocol, resp.Status, UpgradeToken)
	}
	return br, nil
}

// NewConn runs the protocol on an already upgraded connection: nc is the raw
// connection and br reads from it (it may hold bytes already read). It is
// for callers that do the handshake themselves (tests, connect-back).
func NewConn(nc net.Conn, br *bufio.Reader, maxFrame int) *Conn {
	return newConn(nc, br, maxFrame)
}

func newConn(nc net.Conn, br *bufio.Reader, max int) *Conn {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	if br == nil {
		br = bufio.NewReaderSize(nc, 32<<10)
	}
	c := &Conn{nc: nc, br: br, max: max, done: make(chan struct{})}
	c.w = newFrameWriter(nc, func(err error) { c.fail(fmt.Errorf("%w: %v", ErrConnBroken, err)) })
	c.mu.pending = make(map[uint64]*call)
	go c.readLoop()
	return c
}

// Idle reports whether the connection works and has no call under way on
// it. A pool prefers an idle connection, so that a caller alone on it neither
// queues behind another caller's frames nor waits for the writer to gather
// company for a write.
func (c *Conn) Idle() bool { return c.w.inflight.Load() == 0 && !c.Broken() }

// Broken reports whether the connection has failed or been closed (Done is
// closed).
func (c *Conn) Broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Done is closed when the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Close closes the connection; calls in flight fail with ErrConnBroken.
func (c *Conn) Close() error {
	c.fail(fmt.Errorf("%w: closed by the client", ErrConnClosed))
	return nil
}

// fail ends the connection once, failing every pending call with err.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	c.mu.err = err
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.Unlock()
	close(c.done)
	c.nc.Close()
	// A call that was in flight may have been executed: that is ErrConnBroken
	// whatever ended the connection.
	perr := err
	if !errors.Is(err, ErrConnBroken) {
		perr = fmt.Errorf("%w: %v", ErrConnBroken, err)
	}
	for _, cl := range pending {
		cl.err = perr
		cl.ch <- struct{}{}
	}
}

func (c *Conn) readLoop() {
	for {
		bp := getBuf()
		frame, err := ReadFrame(c.br, (*bp)[:0], c.max)
		if err != nil {
			putBuf(bp)
			c.fail(fmt.Errorf("%w: %v", ErrConnBroken, err))
			return
		}
		*bp = frame
		id, ok := peekRequestID(frame)
		if !ok {
			putBuf(bp)
			c.fail(fmt.Errorf("%w: %w: undecodable response frame", ErrConnBroken, ErrProtocol))
			return
		}
		if id == 0 {
			// A connection-level error from the server; it closes next.
			resp := &api.Response{}
			detail := "connection-level error"
			if unmarshal(frame, resp) == nil {
				detail = resp.GetError().GetDetail()
			}
			putBuf(bp)
			c.fail(fmt.Errorf("%w: %w: server: %s", ErrConnBroken, ErrProtocol, detail))
			return
		}
		c.mu.Lock()
		cl := c.mu.pending[id]
		delete(c.mu.pending, id)
		c.mu.Unlock()
		if cl == nil {
			putBuf(bp) // the caller gave up (context done)
			continue
		}
		cl.frame = bp
		cl.ch <- struct{}{}
	}
}

// Call sends req and waits for its response. req.RequestId must be non-zero
// and unique among the calls in flight on this connection. An error is
// ErrConnClosed (wrapped) when the request was never sent, ErrConnBroken when
// the connection failed with it in flight, ErrFrameTooLarge when it is too
// big to send, or ctx's error; an error of the operation itself comes back
// inside the response.
func (c *Conn) Call(ctx context.Context, req *api.Request) (*api.Response, error) {
	return c.call(ctx, req, nil)
}

// CallView is Call for a caller that reads the response in place. The
// response is decoded into resp, merged into what it holds as proto's
// UnmarshalMerge does, so that a caller may preset a message of its oneof to
// reuse that message's memory (a pooled listing page). Its strings and bytes
// alias the received frame and are valid only until fn returns: fn copies
// whatever it keeps. CallView returns Call's errors, or fn's.
func (c *Conn) CallView(ctx context.Context, req *api.Request, resp *api.Response, fn func(*api.Response) error) error {
	_, err := c.call(ctx, req, &view{resp, fn})
	return err
}

// A view is where CallView decodes and what it calls.
type view struct {
	resp *api.Response
	fn   func(*api.Response) error
}

// call is Call, or CallView when v is not nil.
func (c *Conn) call(ctx context.Context, req *api.Request, v *view) (*api.Response, error) {
	var p Pending // on the stack: Call allocates nothing for it
	if err := c.start(ctx, req, v, &p); err != nil {
		return nil, err
	}
	select {
	case <-p.cl.ch:
		return p.result()
	case <-ctx.Done():
		return p.abandon(ctx.Err())
	}
}

// Pending is a request sent by Start whose answer has not been taken.
// Exactly one of Result (after C delivered) or Abandon must be called.
type Pending struct {
	c  *Conn
	cl *call
	id uint64
	v  *view
}

// Start sends req and returns at once: C delivers when its answer (or the
// connection's failure) is in, Result then returns it, and Abandon gives
// up on it. A caller that waits for one of several requests (a hedged
// read: the first answer wins) starts each and selects on their C. Start's
// error is Call's for a request that was never sent.
func (c *Conn) Start(ctx context.Context, req *api.Request) (*Pending, error) {
	p := &Pending{}
	if err := c.start(ctx, req, nil, p); err != nil {
		return nil, err
	}
	return p, nil
}

// StartIn is Start into a Pending of the caller's (one on its stack: no
// allocation on a hot path).
func (c *Conn) StartIn(ctx context.Context, req *api.Request, p *Pending) error {
	return c.start(ctx, req, nil, p)
}

// C delivers once the answer is in; then call Result.
func (p *Pending) C() <-chan struct{} { return p.cl.ch }

// Result returns the answer, after C delivered.
func (p *Pending) Result() (*api.Response, error) { return p.result() }

// Abandon gives up on the request (its answer, if it comes, is dropped)
// and returns err, or the answer if it raced in: use whichever comes back.
func (p *Pending) Abandon(err error) (*api.Response, error) { return p.abandon(err) }

func (p *Pending) result() (*api.Response, error) {
	defer p.c.w.end()
	return p.c.decode(p.cl, p.v)
}

func (p *Pending) abandon(err error) (*api.Response, error) {
	defer p.c.w.end()
	return p.c.finish(p.cl, p.id, err, p.v)
}

func (c *Conn) start(ctx context.Context, req *api.Request, v *view, p *Pending) error {
	id := req.GetRequestId()
	if id == 0 {
		return errors.New("rpc: request id 0 is reserved")
	}
	ob := getBuf()
	out, err := AppendFrame((*ob)[:0], req, c.max)
	if err != nil {
		putBuf(ob)
		return err
	}
	*ob = out
	cl := callPool.Get().(*call)
	c.mu.Lock()
	if c.mu.err != nil {
		err := c.mu.err
		c.mu.Unlock()
		putBuf(ob)
		callPool.Put(cl)
		return fmt.Errorf("%w: %v", ErrConnClosed, err)
	}
	if _, dup := c.mu.pending[id]; dup {
		c.mu.Unlock()
		putBuf(ob)
		callPool.Put(cl)
		return fmt.Errorf("rpc: request id %d already in flight", id)
	}
	c.mu.pending[id] = cl
	c.mu.Unlock()

	c.w.begin() // ended by result or abandon
	*p = Pending{c: c, cl: cl, id: id, v: v}
	if err := ctx.Err(); err != nil {
		putBuf(ob)
		_, err := p.abandon(err)
		return err
	}
	// A write error fails the connection, and with it this call.
	c.w.send(ob)
	return nil
}

// finish abandons call id with err, unless its response raced in.
func (c *Conn) finish(cl *call, id uint64, err error, v *view) (*api.Response, error) {
	c.mu.Lock()
	_, mine := c.mu.pending[id]
	if mine {
		delete(c.mu.pending, id)
	}
	c.mu.Unlock()
	if mine {
		callPool.Put(cl)
		return nil, err
	}
	// The reader (or fail) took the call and is delivering to it.
	<-cl.ch
	return c.decode(cl, v)
}

// decode decodes the call's response frame and recycles it: into a response
// of its own, or, for a view, in place and through the view's function
// before the frame is reused.
func (c *Conn) decode(cl *call, v *view) (*api.Response, error) {
	bp, err := cl.frame, cl.err
	cl.frame, cl.err = nil, nil
	callPool.Put(cl)
	if err != nil {
		return nil, err
	}
	defer putBuf(bp)
	if v == nil {
		resp := &api.Response{}
		if err := unmarshal(*bp, resp); err != nil {
			return nil, fmt.Errorf("%w: undecodable response: %v", ErrProtocol, err)
		}
		return resp, nil
	}
	if err := v.resp.UnmarshalVTUnsafe(*bp); err != nil {
		return nil, fmt.Errorf("%w: undecodable response: %v", ErrProtocol, err)
	}
	return nil, v.fn(v.resp)
}
