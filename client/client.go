package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/user"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// DefaultAddr is the server address when NIMBUS_ADDR is not set.
const DefaultAddr = "http://127.0.0.1:9870"

// AddrFromEnv returns NIMBUS_ADDR, or DefaultAddr when it is empty.
func AddrFromEnv() string {
	if a := os.Getenv("NIMBUS_ADDR"); a != "" {
		return a
	}
	return DefaultAddr
}

// DefaultUser returns the caller as HDFS simple authentication sees it:
// NIMBUS_USER, else the OS user name (else "nobody").
func DefaultUser() meta.User {
	if u := os.Getenv("NIMBUS_USER"); u != "" {
		return meta.User{Name: u}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return meta.User{Name: u.Username}
	}
	if u := os.Getenv("USER"); u != "" {
		return meta.User{Name: u}
	}
	return meta.User{Name: "nobody"}
}

// DefaultHTTPShare is Options.HTTPShare's default: one request in 500.
// An invocation crosses the gateway and two HTTP servers; at 1% (the
// default before it) the share cost a fifth of the cached stat
// rate of two instances over PostgreSQL (docs/ELASTIC.md, "Which path").
const DefaultHTTPShare = 0.002

// Options configure a Client. The zero value is usable.
type Options struct {
	// Conns is the number of TCP connections in the pool; 0 means 4. While
	// fewer requests are under way than there are connections, a request
	// takes the first connection with nothing under way on it, so that a few
	// callers each have one to themselves; otherwise requests go round-robin
	// to the first half of the pool, where they share the writes and reads of
	// few connections (see pick).
	Conns int
	// Logger receives reconnects and other connection events; nil discards.
	Logger *slog.Logger
	// DialTimeout bounds one connection attempt (TCP + upgrade); 0 means 5s.
	DialTimeout time.Duration
	// MaxFrameSize must match the server's; 0 means rpc.DefaultMaxFrameSize.
	MaxFrameSize int
	// HTTPClient serves EchoHTTP and other calls over POST /rpc/call; nil
	// uses a client of its own.
	HTTPClient *http.Client
	// LeaseRenewInterval is how often an open writer renews its lease; 0
	// means 10s.
	LeaseRenewInterval time.Duration
	// Resubmits is how often a call in flight on a connection that broke is
	// sent again on another, with its request id unchanged (a write is
	// answered from the server's record of it if it was applied); 0 means
	// 2. After that a write fails meta.ErrOutcomeUnknown, a read busy.
	Resubmits int
	// Job names the caller's job (a Spark application, an ETL run) in
	// every request: the server counts and may limit load per user and per
	// user/job. Empty: none. JobFromEnv reads NIMBUS_JOB for callers that
	// take it from the environment, as the CLI does.
	Job string
	// ThrottleWait is the longest a call waits, in all, for the server to
	// take a request it refused for the caller's tenant limit (a busy error
	// with a retry-after: the request was not executed, so it is sent
	// again with its id, after the time the server said). 0 means 30s;
	// negative: never wait, return the busy error at once.
	ThrottleWait time.Duration
	// StragglerFactor: a stat or read that has waited this many times the
	// moving average of its operation's latency is sent again, as a new
	// request on another pooled connection where there is one, and the
	// first answer wins (λFS's straggler mitigation; reads only, so a
	// duplicate is harmless). 0 means 10; negative: never.
	StragglerFactor float64
	// StragglerFloor is the least wait before a straggler is sent again,
	// whatever the average (a fast average must not turn a 1 ms hiccup
	// into duplicate load). 0 means 5ms.
	StragglerFloor time.Duration
	// SettleWait bounds how long a resubmitted write keeps being sent
	// again while servers answer it busy. A busy answer to a resubmission
	// says only that this attempt did not apply the write: the first
	// submission may still (its NameNode died halfway through a subtree
	// operation whose flag a peer clears or finishes once it is judged
	// gone, by default 10 s later), so busy cannot be passed on as "not
	// done". The client sends it again, with backoff, until an answer
	// settles it (the server's record of the first, or the write applied
	// by this one); after SettleWait it fails meta.ErrOutcomeUnknown. 0
	// means 30s.
	SettleWait time.Duration
	// Route sends each request to an instance of the deployment that owns
	// it, as far as the client knows, and marks it routed, so that a
	// server of another deployment refuses it with a wrong-owner answer
	// carrying the routing map; the client then learns the owner of that
	// directory and sends it there (docs/ELASTIC.md, "Request routing").
	// Off by default: unrouted requests are served by any server, as
	// before.
	Route bool

	// Hybrid makes Dial's address a platform gateway, and the client a
	// hybrid HTTP/TCP one (docs/ELASTIC.md, "Hybrid RPC and resilient
	// clients"): a request to a deployment with no connection goes as an
	// HTTP invocation (POST /rpc/call, Nimbus-Deployment: its deployment,
	// 0 until a wrong-owner answer names the owner), naming the process's
	// callback endpoint; the instance that serves it connects back, and
	// later requests to that deployment go over that connection. Dial then
	// opens nothing: the first call makes the first invocation. Off by
	// default: the client keeps its pool of connections to Dial's address,
	// unless that address turns out to be a platform gateway (its answer
	// to /rpc/conn says so: rpc.ErrGateway), when Dial turns the client
	// hybrid itself (HybridStats.Gateway).
	Hybrid bool
	// HTTPShare is the probability that a request with a connection to
	// its deployment is sent as an HTTP invocation all the same, so that
	// the platform can hand it to another instance (a new one the client
	// then moves to). The platform sees the load on connections without
	// it (its load poll). 0 means DefaultHTTPShare; negative: never.
	HTTPShare float64
	// CallbackWait is how long after an invocation's answer an instance
	// has to connect back before the client dials it directly (its
	// /rpc/conn: a client behind NAT, an instance that cannot reach it),
	// counted in HybridStats.DirectFallbacks. 0 means 200ms; negative:
	// never dial, use connect-backs only.
	CallbackWait time.Duration
	// NoCallback sends no callback endpoint with invocations: the client
	// dials each instance that answers at once (a client known to be
	// unreachable).
	NoCallback bool
	// CallbackAddr is the listen address of the process's callback
	// endpoint, which every hybrid client asking for the same address
	// shares (with its connections); the first one's MaxFrameSize applies
	// to them. Empty means "127.0.0.1:0" (loopback, any port).
	CallbackAddr string
	// HTTPRetryBase, HTTPRetryMax and HTTPRetryDeadline rule the retries
	// of an invocation answered busy (503) or whose gateway cannot be
	// reached: retry n waits a uniform random time in [0, min(max,
	// base·2^n)) (exponential backoff, full jitter), at least the
	// answer's Retry-After, until the deadline, counted from the first
	// retry, would pass; then the call fails busy. 0 means 10ms, 1s and
	// 10s; a negative deadline: no retries.
	HTTPRetryBase, HTTPRetryMax, HTTPRetryDeadline time.Duration
	// ThrashFactor: when a call's latency exceeds this many times its
	// transport's moving average, the client prefers existing connections
	// over new invocations (no HTTPShare; a deployment without a
	// connection is served unrouted over another's) until ten calls in a
	// row are back within it. 0 means 2.5; negative: never.
	ThrashFactor float64
	// Now is the clock hybrid latencies are measured with; nil means
	// time.Now.
	Now func() time.Time
}

// JobFromEnv returns NIMBUS_JOB: the job `nimbus fs` and `nimbus bench`
// name in their requests when set.
func JobFromEnv() string { return os.Getenv("NIMBUS_JOB") }

// DefaultOptions returns the options with every default filled in.
func DefaultOptions() Options {
	return Options{Conns: 4, DialTimeout: 5 * time.Second, MaxFrameSize: rpc.DefaultMaxFrameSize, LeaseRenewInterval: 10 * time.Second, Resubmits: 2}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.Conns < 0:
		return fmt.Errorf("client: Conns %d is negative", o.Conns)
	case o.Conns > 1024:
		return fmt.Errorf("client: Conns %d is more than 1024", o.Conns)
	case o.DialTimeout < 0 || o.LeaseRenewInterval < 0 || o.MaxFrameSize < 0:
		return errors.New("client: negative DialTimeout, LeaseRenewInterval or MaxFrameSize")
	case o.Resubmits < 0 && !o.Hybrid:
		return errors.New("client: negative Resubmits")
	case !(o.HTTPShare <= 1) || o.HTTPRetryBase < 0 || o.HTTPRetryMax < 0:
		return fmt.Errorf("client: HTTPShare %v above 1, or negative HTTPRetryBase or HTTPRetryMax", o.HTTPShare)
	}
	return nil
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Conns == 0 {
		o.Conns = d.Conns
	}
	if o.ThrottleWait == 0 {
		o.ThrottleWait = 30 * time.Second
	}
	if o.StragglerFactor == 0 {
		o.StragglerFactor = 10
	}
	if o.StragglerFloor == 0 {
		o.StragglerFloor = 5 * time.Millisecond
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = d.DialTimeout
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = d.MaxFrameSize
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = d.LeaseRenewInterval
	}
	if o.Resubmits == 0 {
		o.Resubmits = d.Resubmits
	}
	if o.SettleWait == 0 {
		o.SettleWait = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPShare == 0 {
		o.HTTPShare = DefaultHTTPShare
	}
	if o.CallbackWait == 0 {
		o.CallbackWait = 200 * time.Millisecond
	}
	if o.CallbackAddr == "" {
		o.CallbackAddr = "127.0.0.1:0"
	}
	if o.HTTPRetryBase == 0 {
		o.HTTPRetryBase = 10 * time.Millisecond
	}
	if o.HTTPRetryMax == 0 {
		o.HTTPRetryMax = time.Second
	}
	if o.HTTPRetryDeadline == 0 {
		o.HTTPRetryDeadline = 10 * time.Second
	}
	if o.ThrashFactor == 0 {
		o.ThrashFactor = 2.5
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("client: closed")

// Client is a meta.FileSystem served by a remote Nimbus server. Safe for
// concurrent use; Close releases its connections.
type Client struct {
	addr    string // TCP host:port of the default server
	baseURL string // http://host:port
	opts    Options
	lat     latency // moving averages, for straggler mitigation
	// stragglers counts reads sent again (sent) and those whose second
	// copy answered first (won).
	stragglers struct{ sent, won atomic.Int64 }
	clock      stragglerClock // wakes the calls that straggle (straggler.go)

	stopTicks chan struct{} // closed by Close
	log       *slog.Logger
	hc        *http.Client
	name      string
	tag       uint64 // random high bits of every request id
	seq       atomic.Uint64
	calls     atomic.Int32 // requests under way on the pools (see pick)
	def       *pool        // the default server's
	closed    atomic.Bool
	routes    routes // Options.Route (route.go)
	hyb       hybrid // Options.Hybrid (hybrid.go)
}

// pool is the connections to one server address.
type pool struct {
	addr  string // TCP host:port
	next  atomic.Uint32
	slots []slot
}

// slot is one pooled connection, redialled when it fails.
type slot struct {
	mu   sync.Mutex
	conn *rpc.Conn
	// cur is conn, for pick's scan for an idle connection without the lock.
	cur atomic.Pointer[rpc.Conn]
	// redialing is set while a background redial of this slot is under way.
	redialing atomic.Bool
}

// Dial connects to the server at addr ("http://host:port"; see
// AddrFromEnv) and opens the connection pool. ctx bounds the dialling.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	hp, err := rpc.HostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("client: random client id: %w", err)
	}
	c := &Client{
		addr: hp, baseURL: "http://" + hp, opts: opts, log: opts.Logger, hc: opts.HTTPClient, stopTicks: make(chan struct{}),
		name: "nimbus-" + hex.EncodeToString(rnd[:8]),
		// 24 random bits on top, a 40-bit sequence below: unique per client
		// for 10^12 requests, and unlikely to collide across clients.
		tag: (binary.LittleEndian.Uint64(rnd[8:]) & (1<<24 - 1)) << 40,
		def: &pool{addr: hp, slots: make([]slot, opts.Conns)},
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	}
	for i := range c.def.slots {
		if c.opts.Hybrid {
			break // addr is a gateway: connections come from its instances
		}
		if _, err := c.slotConn(ctx, c.def, &c.def.slots[i]); err != nil {
			if i == 0 && errors.Is(err, rpc.ErrGateway) {
				// A platform gateway serves invocations only: talk to it as
				// a hybrid client, whatever Options said.
				c.opts.Hybrid = true
				c.hyb.gateway = true
				c.log.Info("client: the address is a platform gateway; using the hybrid HTTP/TCP RPC", "addr", addr)
				break
			}
			c.Close()
			return nil, fmt.Errorf("client: dial %s: %w", addr, err)
		}
	}
	return c, nil
}

// ClientName is this client's lease holder name, "nimbus-<hex>", unique per
// Client.
func (c *Client) ClientName() string { return c.name }

// Close closes every connection. Calls in flight fail; later calls return
// ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	close(c.stopTicks)
	for _, p := range append(c.routedPools(), c.def) {
		for i := range p.slots {
			s := &p.slots[i]
			s.mu.Lock()
			if s.conn != nil {
				s.conn.Close()
				s.conn = nil
				s.cur.Store(nil)
			}
			s.mu.Unlock()
		}
	}
	if t, ok := c.hc.Transport.(*http.Transport); ok && c.opts.HTTPClient == nil {
		t.CloseIdleConnections()
	}
	return nil
}

func (c *Client) nextID() uint64 {
	return c.tag | (c.seq.Add(1) & (1<<40 - 1))
}

// slotConn returns the slot's working connection, dialling a new one when it
// has none or the old one failed.
func (c *Client) slotConn(ctx context.Context, p *pool, s *slot) (*rpc.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if s.conn != nil {
		if !s.conn.Broken() {
			return s.conn, nil
		}
		c.log.Info("client: reconnecting", "addr", p.addr, "cause", s.conn.Err())
		s.conn = nil
		s.cur.Store(nil)
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	conn, err := rpc.Dial(dctx, p.addr, rpc.ConnOptions{MaxFrameSize: c.opts.MaxFrameSize})
	if err != nil {
		return nil, err
	}
	s.conn = conn
	s.cur.Store(conn)
	return conn, nil
}

// pick returns a working connection. While fewer requests are under way on
// the pool than it has connections, it takes the first one with nothing
// under way on it: a caller alone there is not queued behind other callers'
// frames, and its write is not held back to gather theirs. Otherwise it goes
// round-robin over the first half of the pool (the shared slots), so that
// under load many requests share each write and read of few connections
// (spare connections that each carried one request would cost a wake-up on
// both sides per request, which is what a loaded machine cannot spare), and
// it falls back to the other slots when a shared one cannot be dialled. A
// slot found broken in the scan is redialled in the background.
func (c *Client) pick(ctx context.Context, p *pool, busy int) (*rpc.Conn, error) {
	if busy < len(p.slots) {
		for i := range p.slots {
			s := &p.slots[i]
			conn := s.cur.Load()
			if conn != nil && conn.Idle() {
				return conn, nil
			}
			if conn == nil || conn.Broken() {
				c.redial(p, s)
			}
		}
	}
	n := uint32(len(p.slots))
	shared := max(n/2, 1)
	start := p.next.Add(1)
	var firstErr error
	for i := range n {
		k := (start + i) % shared // the shared slots first, from the round-robin one
		if i >= shared {
			k = i
		}
		conn, err := c.slotConn(ctx, p, &p.slots[k])
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return nil, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// redial dials slot s again in the background, unless that is under way or
// the client is closed: a spare slot is otherwise only reached through pick's
// scan, which takes working connections only.
func (c *Client) redial(p *pool, s *slot) {
	if c.closed.Load() || !s.redialing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.redialing.Store(false)
		if _, err := c.slotConn(context.Background(), p, s); err != nil && !errors.Is(err, ErrClosed) {
			c.log.Debug("client: redial failed", "addr", p.addr, "err", err)
		}
	}()
}

// call sends req and returns its response, or an *meta.OpError naming op and
// path. It applies the retry rules of the package documentation.
func (c *Client) call(ctx context.Context, m rpc.Method, path string, u meta.User, req *api.Request) (*api.Response, error) {
	return c.exchange(ctx, m, path, u, req, nil)
}

// callView is call for a response read in place (rpc.Conn.CallView): it is
// decoded into resp, and got sees it only until it returns, with strings that
// alias the received frame, so got copies what it keeps.
func (c *Client) callView(ctx context.Context, m rpc.Method, path string, u meta.User, req *api.Request, resp *api.Response, got func()) error {
	_, err := c.exchange(ctx, m, path, u, req, &viewCall{resp, got})
	return err
}

// A viewCall is where callView decodes and what it calls.
type viewCall struct {
	resp *api.Response
	got  func()
}

// exchange runs call, or callView when view is not nil (it then returns no
// response).
func (c *Client) exchange(ctx context.Context, m rpc.Method, path string, u meta.User, req *api.Request, view *viewCall) (*api.Response, error) {
	op := m.String()
	if c.closed.Load() {
		return nil, &meta.OpError{Op: op, Path: path, Err: ErrClosed}
	}
	req.RequestId = c.nextID()
	req.ClientName = c.name
	req.User = u.Name
	req.Job = c.opts.Job
	if dl, ok := ctx.Deadline(); ok {
		if ms := time.Until(dl).Milliseconds(); ms > 0 && ms < 1<<32 {
			req.TimeoutMs = uint32(ms)
		}
	}
	// sent: the request may have reached the server (a connection broke
	// with it in flight), so a write's later failure to get an answer
	// leaves its outcome unknown, where before it is busy (not done).
	sent := 0
	var waited time.Duration // for the server to take a throttled request
	if c.opts.Hybrid {
		return c.hybridExchange(ctx, m, op, path, req, view)
	}
	var settling settleState // a resubmitted write answered busy (settle)
	busy := int(c.calls.Add(1)) - 1
	defer c.calls.Add(-1)
	p, rt := c.def, route{}
	if c.opts.Route && rpc.Routed(m) {
		rt = c.routeOf(m, req)
		p = rt.pool
		req.Routed = true
	}
	for attempt := 0; ; attempt++ {
		conn, err := c.pick(ctx, p, busy)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClosed) {
				return nil, meta.WrapOp(op, path, err)
			}
			if p != c.def {
				// The owner's instance cannot be reached: any server
				// answers an unrouted request.
				c.log.Debug("client: owner unreachable, sending unrouted to the default server", "addr", p.addr, "err", err)
				p, req.Routed = c.def, false
				continue
			}
			if sent > 0 && !m.ReadOnly() {
				return nil, meta.Errorf(op, path, meta.ErrOutcomeUnknown,
					"connection lost with the request in flight, and the server at %s cannot be reached to resubmit it: %v", c.addr, err)
			}
			return nil, meta.Errorf(op, path, meta.ErrBusy, "cannot reach the server at %s: %v", c.addr, err)
		}
		if view == nil {
			var resp *api.Response
			if c.opts.StragglerFactor > 0 && (m == rpc.MethodStat || m == rpc.MethodRead) {
				resp, err = c.hedgedCall(ctx, m, p, conn, req, busy)
			} else {
				resp, err = conn.Call(ctx, req)
			}
			if err == nil {
				e := resp.GetError()
				if e == nil {
					return resp, nil
				}
				// Followed only for a routed request: a server never refuses
				// an unrouted one, and if one did, the call must end.
				if e.GetKind() == api.Kind_KIND_WRONG_OWNER && req.Routed {
					p = c.misrouted(&rt, req, e.GetRoutingMap(), e.GetOwner())
					continue
				}
				// A throttled request's retry-after, ms: wait and send again.
				if after := e.GetRetryAfterMs(); after == 0 || !c.waitThrottled(ctx, &waited, after) {
					err := rpc.ErrorFromProto(e)
					if sent > 0 && !m.ReadOnly() && c.settle(ctx, &settling, err) {
						continue
					}
					return nil, c.unsettled(op, path, sent, m, err)
				}
				continue
			}
		} else {
			// What the response said: the operation's own error, and its
			// retry-after (ms) when throttled. One variable, one allocation
			// for the closure.
			var said struct {
				err   error
				after uint32
				wrong bool
				owner uint32
				m     []byte
			}
			// CallView merges into view.resp: an error an earlier attempt
			// left there (a wrong-owner or throttled answer, aliasing a
			// frame since reused) must not survive into this one's answer.
			view.resp.Error = nil
			err = conn.CallView(ctx, req, view.resp, func(resp *api.Response) error {
				if e := resp.GetError(); e != nil && e.GetKind() == api.Kind_KIND_WRONG_OWNER && req.Routed {
					// Copied: the frame is reused once this returns.
					said.wrong, said.owner, said.m = true, e.GetOwner(), slices.Clone(e.GetRoutingMap())
				} else if e != nil {
					said.err, said.after = rpc.ErrorFromProto(e), e.GetRetryAfterMs()
				} else {
					view.got()
				}
				return nil
			})
			if err == nil && said.wrong {
				p = c.misrouted(&rt, req, said.m, said.owner)
				continue
			}
			if err == nil {
				if said.after == 0 || !c.waitThrottled(ctx, &waited, said.after) {
					if sent > 0 && !m.ReadOnly() && c.settle(ctx, &settling, said.err) {
						continue
					}
					return nil, c.unsettled(op, path, sent, m, said.err)
				}
				continue
			}
		}
		unknown := sent > 0 && !m.ReadOnly()
		switch {
		case ctx.Err() != nil:
			return nil, meta.WrapOp(op, path, err)
		case errors.Is(err, rpc.ErrConnClosed) && attempt < 3:
			continue // never sent: always safe to send again
		case errors.Is(err, rpc.ErrConnBroken) && sent < c.opts.Resubmits:
			// A read is safe to send again; a write is sent again with
			// the same request id, which the server answers from its
			// record of the first if that one was applied (exactly once,
			// docs/RPC.md).
			sent++
			req.Resubmitted = true
			c.log.Debug("client: resubmitting after a broken connection", "op", op, "path", path, "id", req.RequestId, "err", err)
			continue
		case errors.Is(err, rpc.ErrConnBroken) && m.ReadOnly():
			return nil, meta.Errorf(op, path, meta.ErrBusy, "connection lost %d times with the request in flight: %v", sent+1, err)
		case errors.Is(err, rpc.ErrConnBroken):
			return nil, meta.Errorf(op, path, meta.ErrOutcomeUnknown, "connection lost %d times with the request in flight: %v", sent+1, err)
		case errors.Is(err, rpc.ErrFrameTooLarge):
			return nil, meta.Errorf(op, path, meta.ErrTooLarge, "%v", err)
		case unknown:
			return nil, meta.Errorf(op, path, meta.ErrOutcomeUnknown, "%v", err)
		default:
			return nil, meta.Errorf(op, path, meta.ErrBusy, "%v", err)
		}
	}
}

// settleState is what settle keeps across the attempts of one call.
type settleState struct {
	since time.Time // the first busy answer to a resubmission
	tries int
}

// settle decides, for a resubmitted write answered err, whether to send
// it again (Options.SettleWait): when err is busy, after a backoff from
// 20 ms doubling to 1 s with full jitter, while SettleWait since the first
// such answer has not passed and ctx allows.
func (c *Client) settle(ctx context.Context, st *settleState, err error) bool {
	if meta.KindOf(err) != meta.KindBusy {
		return false
	}
	now := time.Now()
	if st.tries == 0 {
		st.since = now
	}
	if now.Sub(st.since) >= c.opts.SettleWait {
		return false
	}
	backoff := min(20*time.Millisecond<<min(st.tries, 6), time.Second)
	st.tries++
	t := time.NewTimer(mrand.N(backoff) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// unsettled is the error a call ends with: err, except that a busy answer
// to a write that was resubmitted leaves its outcome unknown (settle gave
// up), which the error says.
func (c *Client) unsettled(op, path string, sent int, m rpc.Method, err error) error {
	if sent == 0 || m.ReadOnly() || meta.KindOf(err) != meta.KindBusy {
		return err
	}
	return meta.Errorf(op, path, meta.ErrOutcomeUnknown,
		"resubmitted after its connection broke, and still answered busy after %v (the first submission may yet apply): %v", c.opts.SettleWait, err)
}

// waitThrottled waits the retry-after of a request the server refused for
// the caller's tenant limit, and reports whether to send it again: not
// when the wait would pass Options.ThrottleWait in all, or ctx ends first.
// The request was refused before it ran, so sending it again is safe.
//
// The wait is the server's retry-after or, once a call has been refused
// before, an exponential backoff from 10 ms (capped at 1 s) if longer, with
// up to half of it again at random: the clients of one throttled tenant
// all hear "the next token is in 5 ms", and without the backoff and the
// jitter they would all come back for the same one, again and again.
func (c *Client) waitThrottled(ctx context.Context, waited *time.Duration, afterMs uint32) bool {
	d := time.Duration(afterMs) * time.Millisecond
	if *waited > 0 {
		d = max(d, min(2**waited, time.Second), 10*time.Millisecond)
	}
	d += mrand.N(d/2 + 1)
	if c.opts.ThrottleWait < 0 || *waited+d > c.opts.ThrottleWait {
		return false
	}
	*waited += d
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// latency keeps, for the methods straggler mitigation applies to (stat
// and read), the moving average of a successful call's latency (float64
// bits of nanoseconds; 0: none yet).
type latency struct{ stat, read atomic.Uint64 }

func (l *latency) slot(m rpc.Method) *atomic.Uint64 {
	if m == rpc.MethodStat {
		return &l.stat
	}
	return &l.read
}

func (l *latency) observe(m rpc.Method, d time.Duration) {
	a := l.slot(m)
	for {
		old := a.Load()
		avg := float64(d)
		if old != 0 {
			avg = 0.9*math.Float64frombits(old) + 0.1*float64(d)
		}
		if a.CompareAndSwap(old, math.Float64bits(avg)) {
			return
		}
	}
}

func (l *latency) average(m rpc.Method) time.Duration {
	return time.Duration(math.Float64frombits(l.slot(m).Load()))
}

// hedgedCall is Call for a read: if no answer came within StragglerFactor
// times the operation's moving average (at least StragglerFloor), it sends
// the request again with a new id, on the connection pick gives, and takes
// the first answer. Without an average yet it is a plain Call.
func (c *Client) hedgedCall(ctx context.Context, m rpc.Method, p *pool, conn *rpc.Conn, req *api.Request, busy int) (*api.Response, error) {
	var p1 rpc.Pending
	first := &p1
	if resp, done, err := c.awaitFirst(ctx, m, conn, req, first); done {
		return resp, err
	}
	// A straggler: the same read again, as a request of its own.
	again := c.stragglerCopy(req)
	var second *rpc.Pending
	if again != nil {
		if conn2, err := c.pick(ctx, p, busy); err == nil {
			second, _ = conn2.Start(ctx, again)
		}
	}
	if second == nil {
		select {
		case <-first.C():
			return first.Result()
		case <-ctx.Done():
			return first.Abandon(ctx.Err())
		}
	}
	c.stragglers.sent.Add(1)
	for {
		select {
		case <-first.C():
			resp, err := first.Result()
			if err != nil && second != nil {
				first = second // the other may still answer
				second = nil
				continue
			}
			if second != nil {
				_, _ = second.Abandon(errStragglerLost)
			}
			return resp, err
		case <-secondC(second):
			resp, err := second.Result()
			if err != nil {
				second = nil // wait for the first
				continue
			}
			c.stragglers.won.Add(1)
			_, _ = first.Abandon(errStragglerLost)
			return resp, nil
		case <-ctx.Done():
			if second != nil {
				_, _ = second.Abandon(ctx.Err())
			}
			return first.Abandon(ctx.Err())
		}
	}
}

// awaitFirst sends req on conn (into first) and waits for its answer
// until it straggles: StragglerFactor times m's moving average, at least
// StragglerFloor. done reports that the call ended (answered, failed, or
// ctx ended) with resp and err; otherwise the caller sends a copy
// (hedgedCall, hybridHedged). Without an average yet it is a plain Call.
// No timer per call: the client's straggler clock (stragglerClock, a tick
// of half StragglerFloor) wakes the call once its deadline has come.
func (c *Client) awaitFirst(ctx context.Context, m rpc.Method, conn *rpc.Conn, req *api.Request, first *rpc.Pending) (resp *api.Response, done bool, err error) {
	start := time.Now()
	avg := c.lat.average(m)
	if avg == 0 {
		resp, err := conn.Call(ctx, req)
		if err == nil {
			c.lat.observe(m, time.Since(start))
		}
		return resp, true, err
	}
	if err := conn.StartIn(ctx, req, first); err != nil {
		return nil, true, err
	}
	deadline := start.Add(max(time.Duration(c.opts.StragglerFactor*float64(avg)), c.opts.StragglerFloor))
	for {
		select {
		case <-first.C():
			resp, err := first.Result()
			if err == nil {
				c.lat.observe(m, time.Since(start))
			}
			return resp, true, err
		case <-ctx.Done():
			resp, err := first.Abandon(ctx.Err())
			return resp, true, err
		case <-c.clock.due(deadline, c.opts.StragglerFloor/2, c.stopTicks):
			if !time.Now().Before(deadline) {
				return nil, false, nil
			}
		}
	}
}

// stragglerCopy returns req again as a request of its own (a new id, not
// marked resubmitted: a read's copy is a second read), or nil when it
// cannot be copied.
func (c *Client) stragglerCopy(req *api.Request) *api.Request {
	again := &api.Request{}
	b, err := req.MarshalVT()
	if err != nil || again.UnmarshalVT(b) != nil {
		return nil
	}
	again.RequestId = c.nextID()
	again.Resubmitted = false
	return again
}

// secondC is p's channel, or nil (never ready) when there is no p.
func secondC(p *rpc.Pending) <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.C()
}

var errStragglerLost = errors.New("client: the other copy of a straggling read answered first")

// Stragglers returns how many reads were sent again for being slow, and
// how many of those the second copy answered first.
func (c *Client) Stragglers() (sent, won int64) {
	return c.stragglers.sent.Load(), c.stragglers.won.Load()
}

// Echo makes a no-op round trip over a pooled TCP connection.
func (c *Client) Echo(ctx context.Context) error {
	_, err := c.call(ctx, rpc.MethodEcho, "", meta.User{}, &api.Request{Body: &api.Request_Echo{Echo: &api.EchoRequest{}}})
	return err
}

// EchoHTTP makes a no-op round trip over POST /rpc/call.
func (c *Client) EchoHTTP(ctx context.Context) error {
	req := &api.Request{RequestId: c.nextID(), ClientName: c.name, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}
	resp, err := rpc.CallHTTP(ctx, c.hc, c.baseURL, req, c.opts.MaxFrameSize)
	if err != nil {
		if ctx.Err() != nil {
			return meta.WrapOp("echo", "", err)
		}
		return meta.Errorf("echo", "", meta.ErrBusy, "%v", err)
	}
	if e := resp.GetError(); e != nil {
		return rpc.ErrorFromProto(e)
	}
	return nil
}

// Fsck asks the server to check the namespace invariants in its store, as
// DefaultUser (the server serves fsck to superusers only).
func (c *Client) Fsck(ctx context.Context) (*meta.FsckReport, error) {
	return c.FsckAs(ctx, DefaultUser())
}

// FsckAs is Fsck as user u.
func (c *Client) FsckAs(ctx context.Context, u meta.User) (*meta.FsckReport, error) {
	resp, err := c.call(ctx, rpc.MethodFsck, "/", u, &api.Request{Body: &api.Request_Fsck{Fsck: &api.FsckRequest{}}})
	if err != nil {
		return nil, err
	}
	return rpc.FsckFromProto(resp.GetFsck()), nil
}
