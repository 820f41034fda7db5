package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/internal/drain"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/tenant"
	"github.com/prometheus/client_golang/prometheus"
)

// Paths the Handler serves. Mount the handler at "/rpc/" without stripping
// the prefix.
const (
	ConnPath = "/rpc/conn"
	CallPath = "/rpc/call"
	// UpgradeToken is the Upgrade header value of the multiplexed protocol.
	UpgradeToken = "nimbus-rpc/2"
	// ContentType is the media type of a frame carried by POST /rpc/call.
	ContentType = "application/x-nimbus-rpc"
)

// ServerOptions configure a Server. The zero value is usable: see
// DefaultServerOptions for what zero fields become.
type ServerOptions struct {
	// Logger receives connection-level events (protocol errors, failed
	// writes). Nil discards them.
	Logger *slog.Logger
	// Registerer receives the rpc metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// MaxInflight bounds the requests executing at once across the server;
	// a connection's reader waits for a slot, which pushes back on its
	// client. 0 means the default (1024).
	MaxInflight int
	// MaxFrameSize bounds one frame in either direction; 0 means
	// DefaultMaxFrameSize.
	MaxFrameSize int
	// MaxConnBytes bounds the bytes one connection holds: requests read and
	// not yet answered (a read counts its length from the start) and
	// answers not yet handed to the socket. Over it the connection's reader
	// stops reading until the client takes its answers; requests already
	// read are still answered, so the bound can be passed by one frame.
	// 0 means DefaultMaxConnBytes.
	MaxConnBytes int64
	// MaxServerBytes bounds the same across every connection; 0 means
	// DefaultMaxServerBytes.
	MaxServerBytes int64
	// MaxConnQueued bounds the requests one connection has read and not yet
	// answered on its socket; 0 means DefaultMaxConnQueued.
	MaxConnQueued int
	// FrameTimeout bounds the time from a frame's first byte to its last;
	// a connection that leaves a frame unfinished that long is closed.
	// 0 means DefaultFrameTimeout.
	FrameTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing between frames for
	// that long (a reader waiting for room does not count as idle); 0 means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Fsck, when set, serves the fsck request; without it fsck answers
	// meta.ErrUnsupported.
	Fsck func(ctx context.Context) (*meta.FsckReport, error)
	// Tenants, when set, counts every request under its tenant (user, or
	// user/job) and refuses, retryably, those over a tenant's limit.
	Tenants *tenant.Tracker
	// Meter, when set, records every request as instance activity (what a
	// serverless platform bills: platform.Meter): BeginAt for a request
	// that arrived as an HTTP invocation (CallPath), BeginConnAt for one on
	// a multiplexed connection (ConnPath or a connect-back), EndAt or
	// EndConnAt at their end, each with the server's reading of the wall
	// clock there.
	Meter interface {
		BeginAt(now time.Time)
		BeginConnAt(now time.Time)
		EndAt(now time.Time)
		EndConnAt(now time.Time)
	}
	// Router, when set, refuses routed requests (api.Request.routed) that
	// another deployment owns with KIND_WRONG_OWNER (docs/ELASTIC.md,
	// "Request routing"). Unrouted requests are served whatever owns them.
	Router Router
	// InstanceID is the id this server gives in the Nimbus-Instance header
	// of its CallPath answers and in its connect-back hello (a member id);
	// empty means "0". SetInstance replaces it and AdvertiseURL.
	InstanceID string
	// AdvertiseURL is the base URL ("http://host:port") it gives there,
	// where clients can dial it; empty means "http://" and the Host the
	// invocation was addressed to.
	AdvertiseURL string
	// NoConnectBack stops the server from connecting back to the callback
	// endpoints invocations name (HeaderCallback), so that clients fall
	// back to dialling it: for tests, and for servers that must not open
	// connections outwards.
	NoConnectBack bool
	// TrustLoopbackCallback takes the HeaderCallback of an invocation that
	// arrives over loopback as named: for an instance of a platform whose
	// gateway runs on the same machine and has pinned it to its client's
	// host (PinCallback). Without it, and from any other peer, the host
	// dialled is always the invocation's peer's, with the port named.
	TrustLoopbackCallback bool
}

// Router tells a server whether a routed request belongs to its
// deployment. Implementations are safe for concurrent use.
type Router interface {
	// Misrouted reports whether another deployment owns an operation on
	// path (listing: a listing of path, routed by the directory itself;
	// else routed by path's parent) and if so which one, with the current
	// routing map in its binary form (routing.Map.MarshalBinary). It
	// reports false whenever it cannot tell (one deployment, a path that
	// does not resolve, a store error): the request is then served here,
	// as every server can.
	Misrouted(ctx context.Context, listing bool, path string) (owner int, routingMap []byte, misrouted bool)
}

// Routed reports whether method m is routed by its path: the namespace
// operations on one path. Echo, defaults, fsck and lease renewal have no
// path; concat, content summary, quotas and the recursive operations reach
// beyond one directory and are served anywhere.
func Routed(m Method) bool {
	switch m {
	case MethodMkdirs, MethodCreate, MethodAppend, MethodWrite, MethodComplete, MethodRead, MethodStat, MethodList,
		MethodDelete, MethodRename, MethodSetPermission, MethodSetOwner, MethodSetTimes, MethodSetReplication,
		MethodTruncate, MethodCreateSymlink, MethodAcl, MethodXAttr:
		return true
	}
	return false
}

// cacheAnswers reports whether an instance's metadata cache may answer
// method m: a stat, a read or a listing. Their ownership check is deferred
// until they are about to read the store (meta.OwnerChecker), when the
// file system says it runs the check (meta.DefersOwnerCheck): an answer
// from the cache is one the deployment owns, and the router's walk of the
// path cost as much as that answer.
func cacheAnswers(m Method) bool {
	return m == MethodStat || m == MethodRead || m == MethodList
}

// ownerCheck is the deferred ownership check of one routed request.
type ownerCheck struct {
	r     Router
	m     Method
	path  string
	wrong bool // another deployment owns it: answered with wrongOwner
	owner int
	rm    []byte
}

// CheckOwner implements meta.OwnerChecker.
func (c *ownerCheck) CheckOwner(ctx context.Context) error {
	owner, rm, wrong := c.r.Misrouted(ctx, c.m == MethodList, c.path)
	if !wrong {
		return nil
	}
	c.wrong, c.owner, c.rm = true, owner, rm
	return meta.Errorf(c.m.String(), c.path, meta.ErrWrongOwner, "deployment %d owns it", owner)
}

// wrongOwner is the answer to a request that deployment owner owns, with
// the routing map (rm) the client retries by.
func wrongOwner(req *api.Request, m Method, path string, owner int, rm []byte) *api.Response {
	return &api.Response{RequestId: req.GetRequestId(), Error: &api.Error{Kind: api.Kind_KIND_WRONG_OWNER, Op: m.String(), Path: path,
		Detail: fmt.Sprintf("deployment %d owns it", owner), RoutingMap: rm, Owner: uint32(owner)}}
}

// DefaultServerOptions returns options with every default filled in.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{MaxInflight: 1024, MaxFrameSize: DefaultMaxFrameSize, MaxConnBytes: DefaultMaxConnBytes,
		MaxServerBytes: DefaultMaxServerBytes, MaxConnQueued: DefaultMaxConnQueued, FrameTimeout: DefaultFrameTimeout,
		IdleTimeout: DefaultIdleTimeout}
}

// Validate reports options that cannot work.
func (o ServerOptions) Validate() error {
	if o.MaxInflight < 0 {
		return fmt.Errorf("rpc: MaxInflight %d is negative", o.MaxInflight)
	}
	if o.MaxFrameSize < 0 {
		return fmt.Errorf("rpc: MaxFrameSize %d is negative", o.MaxFrameSize)
	}
	if o.MaxConnBytes < 0 || o.MaxServerBytes < 0 || o.MaxConnQueued < 0 {
		return fmt.Errorf("rpc: negative connection bound (MaxConnBytes %d, MaxServerBytes %d, MaxConnQueued %d)",
			o.MaxConnBytes, o.MaxServerBytes, o.MaxConnQueued)
	}
	if o.FrameTimeout < 0 || o.IdleTimeout < 0 {
		return fmt.Errorf("rpc: negative timeout (FrameTimeout %v, IdleTimeout %v)", o.FrameTimeout, o.IdleTimeout)
	}
	return nil
}

// Server serves a meta.FileSystem over the multiplexed connection protocol
// and the HTTP call path. It is safe for concurrent use; it owns the
// connections it hijacks and closes them on Shutdown.
type Server struct {
	fs      meta.FileSystem
	defers  bool // fs implements meta.DefersOwnerCheck
	opts    ServerOptions
	log     *slog.Logger
	met     *metrics
	sem     chan struct{} // one token per executing request
	work    chan job      // idle workers receive here (see submit)
	baseCtx context.Context
	cancel  context.CancelFunc // cancels every request: the forced end of Shutdown

	// held counts the bytes every connection holds (see budget); heldPeak
	// is its highest value; gate wakes readers waiting for the total to fall.
	held, heldPeak atomic.Int64
	gate           gate
	calls          drain.Gate // CallPath requests being served (Shutdown closes it and waits for them)

	instance atomic.Pointer[instanceName] // ServerOptions.InstanceID, AdvertiseURL; SetInstance

	mu struct {
		sync.Mutex
		conns    map[*serverConn]struct{}
		shutdown bool
		// callbacks holds the client endpoints (callbackKey) the server is
		// connected or connecting back to, and those that refused it lately
		// (connectBack).
		callbacks *callbackTable
	}
}

// NewServer returns a server for fs. Invalid options (negative sizes) are
// replaced by defaults; call ServerOptions.Validate first to reject them.
func NewServer(fs meta.FileSystem, opts ServerOptions) *Server {
	def := DefaultServerOptions()
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = def.MaxInflight
	}
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = def.MaxFrameSize
	}
	if opts.MaxConnBytes <= 0 {
		opts.MaxConnBytes = def.MaxConnBytes
	}
	if opts.MaxServerBytes <= 0 {
		opts.MaxServerBytes = def.MaxServerBytes
	}
	if opts.MaxConnQueued <= 0 {
		opts.MaxConnQueued = def.MaxConnQueued
	}
	if opts.FrameTimeout <= 0 {
		opts.FrameTimeout = def.FrameTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = def.IdleTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{fs: fs, opts: opts, log: log, sem: make(chan struct{}, opts.MaxInflight), work: make(chan job)}
	_, s.defers = fs.(meta.DefersOwnerCheck)
	s.met = newMetrics(opts.Registerer, func() float64 { return float64(s.held.Load()) })
	s.baseCtx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = make(map[*serverConn]struct{})
	s.mu.callbacks = newCallbackTable()
	s.registerCallbackGauges(opts.Registerer)
	s.instance.Store(&instanceName{id: opts.InstanceID, url: opts.AdvertiseURL})
	return s
}

// Handler returns the HTTP handler for ConnPath (the upgrade to the
// multiplexed protocol) and CallPath (one request per POST). Other paths
// answer 404.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case ConnPath:
			s.serveUpgrade(w, r)
		case CallPath:
			s.serveCall(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// Shutdown stops accepting requests on every hijacked connection, lets the
// requests in flight finish and their responses be written, then closes the
// connections; CallPath requests that arrive meanwhile are answered 503
// (not run), and those in flight are waited for too. When ctx ends first,
// the remaining requests' contexts are cancelled, the connections are
// closed at once and ctx's error is returned. The HTTP listener itself
// belongs to the caller (http.Server.Shutdown): a server that must keep
// answering other paths while its requests drain (its coherence endpoint,
// until it leaves its coordinator) calls Shutdown first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.calls.Close()
	s.mu.Lock()
	s.mu.shutdown = true
	conns := make([]*serverConn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.stopReading()
	}
	var err error
	for _, c := range conns {
		select {
		case <-c.closed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	// Invocations in flight (CallPath), refused since the gate closed.
	if err == nil {
		err = s.calls.Wait(ctx)
	}
	if err != nil {
		s.cancel()
		for _, c := range conns {
			c.nc.Close()
		}
	}
	return err
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.shutdown
}

// handle decodes one request frame, executes it and encodes the response
// frame into out (appended). A frame that does not decode yields a protocol
// error response with request id 0 and ok=false. invocation says the frame
// came as an HTTP invocation (CallPath), not on a connection: the meter
// bills the two differently on a platform instance.
func (s *Server) handle(ctx context.Context, frame []byte, out []byte, invocation bool, received time.Time) (_ []byte, ok bool) {
	req := &api.Request{}
	if err := unmarshal(frame, req); err != nil {
		s.met.protoErrors.Inc()
		resp := &api.Response{Error: &api.Error{Kind: api.Kind_KIND_INVALID_ARGUMENT, Op: "rpc",
			Detail: fmt.Sprintf("undecodable request frame: %v", err)}}
		out, _ = AppendFrame(out, resp, s.opts.MaxFrameSize)
		return out, false
	}
	m, path := MethodOf(req)
	// One clock reading at each end, shared by the meter, the tenant's
	// count and the metrics.
	start := time.Now()
	mt := s.opts.Meter
	if mt != nil {
		if invocation {
			mt.BeginAt(start)
		} else {
			mt.BeginConnAt(start)
		}
	}
	s.met.inflight.Inc()
	if t := req.GetTimeoutMs(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t)*time.Millisecond)
		defer cancel()
	}
	var resp *api.Response
	var end time.Time // read when the request was answered
	var deferred *ownerCheck
	if r := s.opts.Router; r != nil && req.GetRouted() && Routed(m) {
		if s.defers && cacheAnswers(m) {
			deferred = &ownerCheck{r: r, m: m, path: path}
			ctx = meta.WithOwnerCheck(ctx, deferred)
		} else if owner, rm, wrong := r.Misrouted(ctx, m == MethodList, path); wrong {
			resp = wrongOwner(req, m, path, owner, rm)
		}
	}
	if resp != nil {
		// Refused before it ran: not counted against the tenant.
	} else if tn := s.opts.Tenants; tn != nil {
		id := tenant.ID(req.GetUser(), req.GetJob())
		if err := tn.Admit(id); err != nil {
			e := &api.Error{Kind: api.Kind_KIND_BUSY, Op: m.String(), Path: path, Detail: err.Error()}
			var te *tenant.ThrottledError
			if errors.As(err, &te) {
				e.RetryAfterMs = uint32(min(max(te.RetryAfter.Milliseconds(), 1), 60_000))
			}
			resp = &api.Response{RequestId: req.GetRequestId(), Error: e}
		} else {
			resp = s.dispatch(ctx, req, m, path, received)
			end = time.Now()
			if deferred == nil || !deferred.wrong {
				// A read refused by its deferred check did not run: it
				// was admitted, but is not counted as served.
				tn.DoneAt(id, end.Sub(start), resp.Error != nil, end)
			}
		}
	} else {
		resp = s.dispatch(ctx, req, m, path, received)
	}
	if deferred != nil && deferred.wrong {
		resp = wrongOwner(req, m, path, deferred.owner, deferred.rm)
	}
	if end.IsZero() {
		end = time.Now()
	}
	s.met.inflight.Dec()
	s.met.done(m, meta.Kind(resp.GetError().GetKind()), resp.Error != nil, end.Sub(start))
	if mt != nil {
		if invocation {
			mt.EndAt(end)
		} else {
			mt.EndConnAt(end)
		}
	}
	n := len(out)
	out, err := AppendFrame(out, resp, s.opts.MaxFrameSize)
	if l := resp.GetListing(); l != nil {
		l.ReturnToVTPool() // encoded: its entries serve the next page
	}
	if err != nil {
		// The result is too big for one frame (a huge read or listing):
		// tell the caller instead of breaking the connection.
		out = out[:n]
		resp = &api.Response{RequestId: req.GetRequestId(), Error: &api.Error{Kind: api.Kind_KIND_TOO_LARGE, Op: m.String(), Path: path,
			Detail: fmt.Sprintf("response exceeds the frame limit of %d bytes; ask for less", s.opts.MaxFrameSize)}}
		out, _ = AppendFrame(out, resp, s.opts.MaxFrameSize)
	}
	return out, true
}
