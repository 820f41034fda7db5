package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	retry "github.com/nimbus-fs/nimbus/internal/backoff"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// Hybrid HTTP/TCP RPC (Options.Hybrid; docs/ELASTIC.md, "Hybrid RPC and
// resilient clients").
//
// A hybrid client sends its first request to a deployment as an HTTP
// invocation to the gateway (Dial's address) naming the deployment and the
// process's callback endpoint. The instance that serves it connects back
// to the endpoint (rpc.Server.connectBack); the endpoint checks the token
// of the hello and keeps the connection, by the instance's base URL, for
// every client of the process. Later requests to that deployment go over
// the connection, each with probability Options.HTTPShare over HTTP
// instead, so that the platform still sees load and scales. An instance
// that has not connected back within Options.CallbackWait of its answer is
// dialled directly (its /rpc/conn), and the client counts the fallback.

// endpoint is a process's callback endpoint: one listener, one token, and
// the connections instances opened to it (or that clients dialled to them
// when they did not), shared by every hybrid client of the process.
type endpoint struct {
	ln       net.Listener
	addr     string // host:port, as invocations name it
	token    string
	maxFrame int
	accepted atomic.Int64 // hellos accepted
	refused  atomic.Int64 // hellos refused (bad token, not a hello)
	mu       struct {
		sync.Mutex
		conns   map[string][]*rpc.Conn   // working connections by instance base URL
		arrived map[string]chan struct{} // closed when a connection to the URL registers
		dialing map[string]bool          // a fallback for the URL is under way
	}
}

// endpoints are the process's callback endpoints by listen address
// (Options.CallbackAddr): one unless clients ask for others.
var endpoints struct {
	mu sync.Mutex
	m  map[string]*endpoint
}

// endpointFor returns the process's endpoint listening on listen, started
// on first use; it lives as long as the process.
func endpointFor(listen string, maxFrame int) (*endpoint, error) {
	endpoints.mu.Lock()
	defer endpoints.mu.Unlock()
	if e := endpoints.m[listen]; e != nil {
		return e, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("client: callback endpoint: %w", err)
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		ln.Close()
		return nil, err
	}
	e := &endpoint{ln: ln, addr: ln.Addr().String(), token: hex.EncodeToString(tok[:]), maxFrame: maxFrame}
	e.mu.conns = make(map[string][]*rpc.Conn)
	e.mu.arrived = make(map[string]chan struct{})
	e.mu.dialing = make(map[string]bool)
	if endpoints.m == nil {
		endpoints.m = make(map[string]*endpoint)
	}
	endpoints.m[listen] = e
	go e.acceptLoop()
	return e, nil
}

func (e *endpoint) acceptLoop() {
	for {
		nc, err := e.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go e.hello(nc)
	}
}

// helloTimeout bounds an instance's hello.
const helloTimeout = 5 * time.Second

// hello reads an instance's hello, answers it, and registers the
// connection when the token is the endpoint's.
func (e *endpoint) hello(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(helloTimeout))
	br := bufio.NewReaderSize(nc, 32<<10)
	h, err := rpc.ReadHello(br)
	if err != nil || subtle.ConstantTimeCompare([]byte(h.Token), []byte(e.token)) != 1 {
		e.refused.Add(1)
		reason := "bad token"
		if err != nil {
			reason = "not a hello"
		}
		_ = rpc.AcceptHello(nc, false, reason)
		nc.Close()
		return
	}
	if err := rpc.AcceptHello(nc, true, ""); err != nil {
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	e.accepted.Add(1)
	e.add(h.URL, rpc.NewConn(nc, br, e.maxFrame))
}

// add registers conn as a connection to the instance at url until it fails.
func (e *endpoint) add(url string, conn *rpc.Conn) {
	e.mu.Lock()
	e.mu.conns[url] = append(e.mu.conns[url], conn)
	if ch := e.mu.arrived[url]; ch != nil {
		close(ch)
		delete(e.mu.arrived, url)
	}
	e.mu.Unlock()
	go func() {
		<-conn.Done()
		e.mu.Lock()
		defer e.mu.Unlock()
		cs := e.mu.conns[url]
		for i, c := range cs {
			if c == conn {
				cs = append(cs[:i:i], cs[i+1:]...)
				break
			}
		}
		if len(cs) == 0 {
			delete(e.mu.conns, url)
		} else {
			e.mu.conns[url] = cs
		}
	}()
}

// conn returns a working connection to the instance at url, an idle one
// if there is, or nil.
func (e *endpoint) conn(url string) *rpc.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	var any *rpc.Conn
	for _, c := range e.mu.conns[url] {
		if c.Broken() {
			continue
		}
		if c.Idle() {
			return c
		}
		if any == nil {
			any = c
		}
	}
	return any
}

// arrival returns a channel closed when a connection to url registers,
// or nil when there is one already.
func (e *endpoint) arrival(url string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.mu.conns[url] {
		if !c.Broken() {
			return nil
		}
	}
	ch := e.mu.arrived[url]
	if ch == nil {
		ch = make(chan struct{})
		e.mu.arrived[url] = ch
	}
	return ch
}

// HybridStats counts what a hybrid client (Options.Hybrid) did.
type HybridStats struct {
	// TCP and HTTP count the requests sent over each path (every attempt:
	// a request sent again counts again).
	TCP, HTTP int64
	// Callbacks and CallbacksRefused count the hellos the process's
	// callback endpoint accepted and refused: across every client of the
	// process, which share it.
	Callbacks, CallbacksRefused int64
	// DirectFallbacks counts the connections this client dialled to an
	// instance that had not connected back within Options.CallbackWait.
	DirectFallbacks int64
	// Resubmissions counts requests sent again, flagged resubmitted,
	// after the connection or instance they were in flight on failed.
	Resubmissions int64
	// HTTPRetries counts invocations sent again after a busy (503) answer
	// or a gateway that could not be reached.
	HTTPRetries int64
	// Thrashing counts the times anti-thrashing began; Rerouted the
	// requests it sent over another deployment's connection, unrouted.
	Thrashing, Rerouted int64
	// Gateway says Dial found a platform gateway at its address without
	// Options.Hybrid, and made the client hybrid.
	Gateway bool
}

// hybrid is a hybrid client's state.
type hybrid struct {
	gateway bool // Dial turned the client hybrid (HybridStats.Gateway)
	epOnce  sync.Once
	ep      *endpoint // nil: none could be started (no callback header)
	mu      struct {
		sync.RWMutex
		deps map[int][]string // deployment -> base URLs of instances that answered for it, newest first
	}
	tcp, http, direct, resubmits, retries, thrashes, rerouted atomic.Int64
	thrash                                                    thrash
}

// maxInstancesPerDeployment bounds the instances remembered per deployment.
const maxInstancesPerDeployment = 8

// HybridStats returns the hybrid client's counters (zero without
// Options.Hybrid).
func (c *Client) HybridStats() HybridStats {
	h := &c.hyb
	s := HybridStats{TCP: h.tcp.Load(), HTTP: h.http.Load(), DirectFallbacks: h.direct.Load(),
		Resubmissions: h.resubmits.Load(), HTTPRetries: h.retries.Load(), Thrashing: h.thrashes.Load(), Rerouted: h.rerouted.Load(),
		Gateway: h.gateway}
	if c.opts.Hybrid && c.endpoint() != nil {
		s.Callbacks, s.CallbacksRefused = h.ep.accepted.Load(), h.ep.refused.Load()
	}
	return s
}

// endpoint returns the process's callback endpoint, or nil.
func (c *Client) endpoint() *endpoint {
	h := &c.hyb
	h.epOnce.Do(func() {
		ep, err := endpointFor(c.opts.CallbackAddr, c.opts.MaxFrameSize)
		if err != nil {
			c.log.Warn("client: no callback endpoint; instances will be dialled directly", "err", err)
			return
		}
		h.ep = ep
	})
	return h.ep
}

// tcpConn returns a working connection to an instance of deployment d, or
// nil.
func (c *Client) tcpConn(d int) *rpc.Conn {
	ep := c.endpoint()
	if ep == nil {
		return nil
	}
	h := &c.hyb
	h.mu.RLock()
	urls := h.mu.deps[d]
	h.mu.RUnlock()
	for _, u := range urls {
		if conn := ep.conn(u); conn != nil {
			return conn
		}
	}
	return nil
}

// anyConn returns a working connection to an instance of any deployment
// (anti-thrashing), or nil.
func (c *Client) anyConn() *rpc.Conn {
	ep := c.endpoint()
	if ep == nil {
		return nil
	}
	h := &c.hyb
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, urls := range h.mu.deps {
		for _, u := range urls {
			if conn := ep.conn(u); conn != nil {
				return conn
			}
		}
	}
	return nil
}

// served records that the instance named by an answer's HeaderInstance
// served deployment d, and makes sure a connection to it is coming: from
// the instance, or dialled by this client after CallbackWait.
func (c *Client) served(d int, instance string) {
	_, url, ok := strings.Cut(instance, " ")
	if !ok || url == "" {
		return
	}
	h := &c.hyb
	h.mu.RLock()
	urls := h.mu.deps[d]
	known := len(urls) > 0 && urls[0] == url
	h.mu.RUnlock()
	if !known {
		h.mu.Lock()
		if h.mu.deps == nil {
			h.mu.deps = make(map[int][]string)
		}
		next := []string{url}
		for _, u := range h.mu.deps[d] {
			if u != url && len(next) < maxInstancesPerDeployment {
				next = append(next, u)
			}
		}
		h.mu.deps[d] = next
		h.mu.Unlock()
	}
	ep := c.endpoint()
	if ep == nil || c.opts.CallbackWait < 0 {
		return
	}
	wait := c.opts.CallbackWait
	if c.opts.NoCallback {
		wait = 0 // no instance will call: dial at once
	}
	arrived := ep.arrival(url)
	if arrived == nil {
		return
	}
	ep.mu.Lock()
	if ep.mu.dialing[url] {
		ep.mu.Unlock()
		return
	}
	ep.mu.dialing[url] = true
	ep.mu.Unlock()
	go func() {
		defer func() {
			ep.mu.Lock()
			delete(ep.mu.dialing, url)
			ep.mu.Unlock()
		}()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-arrived:
			return
		case <-c.stopTicks:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
		defer cancel()
		conn, err := rpc.Dial(ctx, url, rpc.ConnOptions{MaxFrameSize: c.opts.MaxFrameSize})
		if err != nil {
			c.log.Info("client: instance did not connect back and cannot be dialled", "instance", url, "err", err)
			return
		}
		h.direct.Add(1)
		c.log.Info("client: instance did not connect back; dialled it directly", "instance", url, "wait", c.opts.CallbackWait)
		ep.add(url, conn)
	}()
}

// invoke sends req as an HTTP invocation for deployment d through the
// gateway, naming the callback endpoint.
func (c *Client) invoke(ctx context.Context, d int, req *api.Request) (*api.Response, error) {
	hdr := http.Header{}
	hdr.Set(rpc.HeaderDeployment, strconv.Itoa(d))
	if ep := c.endpoint(); ep != nil && !c.opts.NoCallback {
		hdr.Set(rpc.HeaderCallback, ep.addr)
		hdr.Set(rpc.HeaderCallbackToken, ep.token)
	}
	resp, h, err := rpc.Invoke(ctx, c.hc, c.baseURL, req, c.opts.MaxFrameSize, hdr)
	if err == nil {
		c.served(d, h.Get(rpc.HeaderInstance))
	}
	return resp, err
}

// Transports, for the latency averages.
const (
	overTCP = iota
	overHTTP
)

// hybridExchange is exchange for a hybrid client: each attempt goes over a
// connection to an instance of the request's deployment when there is one
// (save the HTTPShare), else as an HTTP invocation.
func (c *Client) hybridExchange(ctx context.Context, m rpc.Method, op, path string, req *api.Request, view *viewCall) (*api.Response, error) {
	h := &c.hyb
	d, dir := 0, ""
	if rpc.Routed(m) {
		_, p := rpc.MethodOf(req)
		dir = routeDir(m, p)
		if o, ok := c.learntOwner(dir); ok {
			d = o
			c.routes.owned.Add(1)
		}
		req.Routed = true
	}
	var (
		hops, resent, closed int
		retries              int
		retryUntil           time.Time // set by the first HTTP retry
		waited               time.Duration
		settling             settleState // a resubmitted write answered busy
	)
	for {
		conn := c.tcpConn(d)
		thrashing := h.thrash.active()
		if conn == nil && thrashing {
			// Latency is up: an existing connection, even to another
			// deployment (served unrouted), rather than a new invocation.
			if conn = c.anyConn(); conn != nil {
				req.Routed = false
				h.rerouted.Add(1)
			}
		}
		if conn != nil && !thrashing && c.opts.HTTPShare > 0 && mrand.Float64() < c.opts.HTTPShare {
			conn = nil
		}
		start := c.opts.Now()
		var resp *api.Response
		var err error
		tr := overTCP
		if conn != nil {
			h.tcp.Add(1)
			switch {
			case view != nil:
				var delivered bool
				if resp, delivered, err = tcpView(ctx, conn, req, view); err == nil && delivered {
					if h.thrash.observe(overTCP, c.opts.Now().Sub(start), c.opts.ThrashFactor) {
						h.thrashes.Add(1)
					}
					return nil, nil
				}
			case c.opts.StragglerFactor > 0 && (m == rpc.MethodStat || m == rpc.MethodRead):
				resp, err = c.hybridHedged(ctx, m, d, conn, req)
			default:
				resp, err = conn.Call(ctx, req)
			}
		} else {
			tr = overHTTP
			h.http.Add(1)
			resp, err = c.invoke(ctx, d, req)
		}
		if err == nil {
			if h.thrash.observe(tr, c.opts.Now().Sub(start), c.opts.ThrashFactor) {
				h.thrashes.Add(1)
				c.log.Debug("client: latency above its average; preferring connections", "factor", c.opts.ThrashFactor)
			}
			e := resp.GetError()
			if e == nil {
				if view != nil {
					return nil, viewFrom(view, resp)
				}
				return resp, nil
			}
			if e.GetKind() == api.Kind_KIND_WRONG_OWNER && req.Routed {
				hops++
				if _, ok := c.learnOwner(dir, e.GetRoutingMap(), e.GetOwner()); !ok || hops > maxRouteHops {
					req.Routed, d = false, 0
				} else {
					d = int(e.GetOwner())
				}
				continue
			}
			if after := e.GetRetryAfterMs(); after == 0 || !c.waitThrottled(ctx, &waited, after) {
				err := rpc.ErrorFromProto(e)
				if resent > 0 && !m.ReadOnly() && c.settle(ctx, &settling, err) {
					continue
				}
				return nil, c.unsettled(op, path, resent, m, err)
			}
			continue
		}
		if ctx.Err() != nil {
			return nil, meta.WrapOp(op, path, err)
		}
		var se *rpc.StatusError
		isStatus := errors.As(err, &se)
		switch {
		case errors.Is(err, rpc.ErrConnClosed) && closed < 3:
			closed++ // never sent: always safe to send again
			continue
		case errors.Is(err, rpc.ErrFrameTooLarge):
			return nil, meta.Errorf(op, path, meta.ErrTooLarge, "%v", err)
		case isStatus && se.Status == http.StatusServiceUnavailable, !isStatus && conn == nil && notSent(err):
			// Busy, or the gateway could not be reached: not run.
			if !c.retryHTTP(ctx, &retries, &retryUntil, retryAfter(se)) {
				return nil, meta.Errorf(op, path, meta.ErrBusy, "%d retries: %v", retries, err)
			}
			h.retries.Add(1)
			continue
		case isStatus && se.Status != http.StatusBadGateway:
			return nil, meta.Errorf(op, path, meta.ErrBusy, "%v", err)
		}
		// The connection broke with the request in flight, the instance
		// died (502), or the invocation failed halfway: it may have run.
		// Sent again, flagged: the server answers a write it applied from
		// its record of it (exactly once).
		if resent >= c.opts.Resubmits || c.opts.Resubmits < 0 {
			if m.ReadOnly() {
				return nil, meta.Errorf(op, path, meta.ErrBusy, "sent %d times, lost each time: %v", resent+1, err)
			}
			return nil, meta.Errorf(op, path, meta.ErrOutcomeUnknown, "sent %d times, lost each time: %v", resent+1, err)
		}
		resent++
		req.Resubmitted = true
		h.resubmits.Add(1)
		c.log.Debug("client: resubmitting", "op", op, "path", path, "id", req.RequestId, "err", err)
		if conn == nil && !c.retryHTTP(ctx, &retries, &retryUntil, 0) {
			if m.ReadOnly() {
				return nil, meta.Errorf(op, path, meta.ErrBusy, "%v", err)
			}
			return nil, meta.Errorf(op, path, meta.ErrOutcomeUnknown, "%v", err)
		}
	}
}

// hybridHedged is hedgedCall for the hybrid path: a read on conn that has
// waited StragglerFactor times its operation's moving average (at least
// StragglerFloor) is sent again, as a request of its own, as an HTTP
// invocation for deployment d (the platform may answer it from another
// instance), and the first answer wins.
func (c *Client) hybridHedged(ctx context.Context, m rpc.Method, d int, conn *rpc.Conn, req *api.Request) (*api.Response, error) {
	var first rpc.Pending
	if resp, done, err := c.awaitFirst(ctx, m, conn, req, &first); done {
		return resp, err
	}
	again := c.stragglerCopy(req)
	if again == nil {
		select {
		case <-first.C():
			return first.Result()
		case <-ctx.Done():
			return first.Abandon(ctx.Err())
		}
	}
	type answer struct {
		resp *api.Response
		err  error
	}
	second := make(chan answer, 1)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.stragglers.sent.Add(1)
	c.hyb.http.Add(1)
	go func() {
		resp, err := c.invoke(hctx, d, again)
		second <- answer{resp, err}
	}()
	for {
		select {
		case <-first.C():
			resp, err := first.Result()
			if err != nil && second != nil {
				a := <-second // the copy may still answer
				if a.err == nil {
					c.stragglers.won.Add(1)
					return a.resp, nil
				}
			}
			return resp, err
		case a := <-second:
			if a.err != nil {
				second = nil // wait for the first
				continue
			}
			c.stragglers.won.Add(1)
			_, _ = first.Abandon(errStragglerLost)
			return a.resp, nil
		case <-ctx.Done():
			return first.Abandon(ctx.Err())
		}
	}
}

// notSent reports whether an invocation's transport error says the request
// never left: the gateway could not be dialled.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

func retryAfter(se *rpc.StatusError) time.Duration {
	if se == nil {
		return 0
	}
	return se.RetryAfter
}

// backoff is the wait before HTTP retry n (0 first): full jitter, a
// uniform draw u in [0, 1) of the exponential bound min(max, base·2^n).
func backoff(n int, base, max time.Duration, u float64) time.Duration {
	return retry.Policy{Initial: base, Max: max, Jitter: retry.Full}.Jittered(n, u)
}

// retryHTTP waits before an invocation is sent again and reports whether
// to send it: not once Options.HTTPRetryDeadline has passed since the
// first retry (or would, waiting), when retries are off, or when ctx
// ends. at least is the server's Retry-After.
func (c *Client) retryHTTP(ctx context.Context, n *int, until *time.Time, atLeast time.Duration) bool {
	if c.opts.HTTPRetryDeadline < 0 {
		return false
	}
	now := time.Now()
	if until.IsZero() {
		*until = now.Add(c.opts.HTTPRetryDeadline)
	}
	d := max(backoff(*n, c.opts.HTTPRetryBase, c.opts.HTTPRetryMax, mrand.Float64()), atLeast)
	*n++
	if now.Add(d).After(*until) {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// tcpView is conn.CallView for a view call: an answer without error is
// decoded in place and handed to the view (delivered); an error answer is
// returned as a response of its own, copied out of the frame.
func tcpView(ctx context.Context, conn *rpc.Conn, req *api.Request, v *viewCall) (resp *api.Response, delivered bool, err error) {
	// CallView merges into v.resp: an error an earlier attempt left there
	// must not survive into this one's answer.
	v.resp.Error = nil
	err = conn.CallView(ctx, req, v.resp, func(r *api.Response) error {
		e := r.GetError()
		if e == nil {
			v.got()
			delivered = true
			return nil
		}
		b, err := e.MarshalVT() // copied: the frame is reused once this returns
		if err != nil {
			return err
		}
		resp = &api.Response{RequestId: r.GetRequestId(), Error: &api.Error{}}
		return resp.Error.UnmarshalVT(b)
	})
	return resp, delivered, err
}

// viewFrom hands a response taken whole to a view call (callView), which
// reads it through its own response, as CallView would have decoded it.
func viewFrom(v *viewCall, resp *api.Response) error {
	b, err := resp.MarshalVT()
	if err != nil {
		return err
	}
	v.resp.Error = nil
	if err := v.resp.UnmarshalVT(b); err != nil {
		return fmt.Errorf("%w: %v", rpc.ErrProtocol, err)
	}
	v.got()
	return nil
}

// recoverAfter is how many calls in a row within ThrashFactor times their
// average end anti-thrashing.
const recoverAfter = 10

// thrash is the anti-thrashing state: moving averages of latency per
// transport, and whether a call exceeded ThrashFactor times its
// transport's average without recoverAfter calls within it since.
type thrash struct {
	mu   sync.Mutex
	avg  [2]float64  // ns; 0: no call yet
	on   atomic.Bool // written under mu; read without it on every call
	calm int
}

// observe records a call's latency d over transport tr and reports
// whether anti-thrashing began with it. factor <= 0: never.
func (t *thrash) observe(tr int, d time.Duration, factor float64) (began bool) {
	if factor <= 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	avg := t.avg[tr]
	if avg > 0 {
		switch {
		case float64(d) > factor*avg:
			began = !t.on.Load()
			t.on.Store(true)
			t.calm = 0
		case t.on.Load():
			t.calm++
			if t.calm >= recoverAfter {
				t.on.Store(false)
			}
		}
		t.avg[tr] = 0.9*avg + 0.1*float64(d)
	} else {
		t.avg[tr] = float64(d)
	}
	return began
}

func (t *thrash) active() bool { return t.on.Load() }
