package hadooprpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/tenant"
)

// Config bounds what one server accepts.
type Config struct {
	// MaxFrame is the largest call frame accepted; a longer one closes the
	// connection. Hadoop's ipc.maximum.data.length defaults to 128 MiB;
	// Nimbus serves metadata calls only on this port, whose requests are
	// small, and defaults to 16 MiB.
	MaxFrame int
	// MaxCallsPerConn bounds the calls of one connection being served at
	// once; the connection's reader waits for a slot.
	MaxCallsPerConn int
	// MaxCalls bounds the calls being served at once over all connections.
	MaxCalls int
	// MaxConns bounds the open connections; further ones are closed at once.
	MaxConns int
	// IdleTimeout closes a connection that sends nothing (no call, no
	// ping) for this long. Hadoop's client closes its idle connections
	// after 10 s (ipc.client.connection.maxidletime) and pings every
	// minute while it waits for an answer (ipc.ping.interval).
	IdleTimeout time.Duration
	Logger      *slog.Logger
	// Registerer receives the server's metrics; nil: none.
	Registerer prometheus.Registerer
	// Tenants, when set, counts every call under its tenant (the
	// connection's user) and refuses, retryably (RetriableException),
	// those over a tenant's limit.
	Tenants *tenant.Tracker
	// Meter, when set, records every call as instance activity.
	Meter interface {
		Begin()
		End()
	}
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{MaxFrame: 16 << 20, MaxCallsPerConn: 32, MaxCalls: 512, MaxConns: 4096, IdleTimeout: 5 * time.Minute}
}

// Protocol names the interface a call is addressed to: Hadoop's client sends
// the Java interface's name in every call (RequestHeaderProto's
// declaringClassProtocolName) and in the connection context.
const Protocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// A handler serves one method: it decodes body into its request message
// and returns the response message, or an error.
type handler func(ctx context.Context, u meta.User, body []byte) (proto.Message, error)

// RemoteError is an error sent to the client as a Java exception.
type RemoteError struct {
	Class  string // the Java exception's class name
	Msg    string
	Detail hadoop.RpcResponseHeaderProto_RpcErrorCodeProto
}

func (e *RemoteError) Error() string { return e.Class + ": " + e.Msg }

// Server serves Hadoop IPC connections.
type Server struct {
	cfg      Config
	log      *slog.Logger
	methods  map[string]handler
	m        *metrics
	calls    chan struct{}
	conns    chan struct{}
	mu       sync.Mutex
	open     map[net.Conn]struct{}
	wg       sync.WaitGroup
	closed   bool
	listener []net.Listener
	draining atomic.Bool
	base     context.Context // cancelled by Close: every call's context ends
	cancel   context.CancelFunc
}

func newServer(cfg Config, methods map[string]handler) (*Server, error) {
	d := DefaultConfig()
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = d.MaxFrame
	}
	if cfg.MaxCallsPerConn <= 0 {
		cfg.MaxCallsPerConn = d.MaxCallsPerConn
	}
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = d.MaxCalls
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = d.MaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = d.IdleTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: metrics: %w", err)
	}
	base, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: log, methods: methods, m: m,
		calls: make(chan struct{}, cfg.MaxCalls), conns: make(chan struct{}, cfg.MaxConns),
		open: map[net.Conn]struct{}{}, base: base, cancel: cancel}, nil
}

// Serve accepts connections on ln until ctx ends or Close is called; it
// closes ln and waits for the connections' goroutines before returning.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.listener = append(s.listener, ln)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	stopBase := context.AfterFunc(s.base, cancel)
	defer stopBase()
	defer s.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("hadooprpc: accept: %w", err)
		}
		select {
		case s.conns <- struct{}{}:
		default:
			s.log.Warn("hadoop rpc: connection refused, too many open", "remote", c.RemoteAddr().String(), "max", s.cfg.MaxConns)
			c.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			<-s.conns
			return nil
		}
		s.open[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() { <-s.conns }()
			s.serveConn(ctx, c)
			s.mu.Lock()
			delete(s.open, c)
			s.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting and reading calls, waits for the calls in
// flight to be answered (bounded by ctx, then it closes as Close does) and
// closes the connections. Hadoop's client sends the calls it had not sent
// again on a new connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	s.closed = true
	for _, ln := range s.listener {
		ln.Close()
	}
	for c := range s.open {
		_ = c.SetReadDeadline(time.Now()) // the reader stops; answers still go out
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return fmt.Errorf("hadooprpc: shutdown: %w", ctx.Err())
	}
}

// Close stops the listeners, closes every open connection and cancels the
// calls in flight.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, ln := range s.listener {
		ln.Close()
	}
	for c := range s.open {
		c.Close()
	}
	return nil
}

// conn is one client connection.
type conn struct {
	s    *Server
	c    net.Conn
	wmu  sync.Mutex
	w    *bufio.Writer
	user meta.User
	auth byte
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	s.m.conns.Inc()
	defer s.m.conns.Dec()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cn := &conn{s: s, c: c, w: bufio.NewWriter(c)}
	var calls sync.WaitGroup
	defer func() {
		// A connection that ends cancels its calls, except in a
		// shutdown's drain, whose calls are answered first.
		if !s.draining.Load() {
			cancel()
		}
		calls.Wait()
		cancel()
	}()
	r := bufio.NewReader(c)
	var hb [headerLen]byte
	_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return
	}
	h, err := ParseConnHeader(hb[:])
	if err != nil {
		s.log.Info("hadoop rpc: connection refused", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	cn.auth = h.AuthProtocol
	haveContext := false
	slots := make(chan struct{}, s.cfg.MaxCallsPerConn)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if s.draining.Load() { // read after the deadline is set: Shutdown's own deadline wins
			return
		}
		frame, err := readFrame(r, s.cfg.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.log.Info("hadoop rpc: connection closed", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		received := time.Now()
		req, err := DecodeRequest(frame)
		if err != nil {
			cn.fatal(-1, nil, hadoop.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "org.apache.hadoop.ipc.RpcServerException", err.Error())
			return
		}
		id := req.Header.GetCallId()
		switch {
		case id == saslCallID:
			if cn.auth != authSASL || haveContext {
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "org.apache.hadoop.ipc.RpcServerException", "SASL message on a connection that did not ask for SASL")
				return
			}
			var m hadoop.RpcSaslProto
			if err := proto.Unmarshal(req.Body, &m); err != nil || m.GetState() != hadoop.RpcSaslProto_NEGOTIATE {
				// With security off the server offers SIMPLE only and
				// answers the client's NEGOTIATE with SUCCESS; anything else
				// would be a mechanism it does not offer.
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "org.apache.hadoop.security.AccessControlException", "SASL: only SIMPLE authentication is enabled")
				return
			}
			ok := hadoop.RpcSaslProto_SUCCESS
			if err := cn.send(&hadoop.RpcResponseHeaderProto{CallId: proto.Uint32(uint32(id)), Status: hadoop.RpcResponseHeaderProto_SUCCESS.Enum(), ServerIpcVersionNum: proto.Uint32(ipcVersion)}, &hadoop.RpcSaslProto{State: &ok}); err != nil {
				return
			}
		case id == contextCall:
			var m hadoop.IpcConnectionContextProto
			if err := proto.Unmarshal(req.Body, &m); err != nil {
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_DESERIALIZING_REQUEST, "org.apache.hadoop.ipc.RpcServerException", "connection context: "+err.Error())
				return
			}
			u := m.GetUserInfo().GetEffectiveUser()
			if u == "" {
				u = m.GetUserInfo().GetRealUser()
			}
			if u == "" || haveContext {
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_UNAUTHORIZED, "org.apache.hadoop.security.AccessControlException", "connection context without a user, or sent twice")
				return
			}
			if p := m.GetProtocol(); p != "" && p != Protocol {
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_UNKNOWN, "org.apache.hadoop.ipc.RpcNoSuchProtocolException", "Unknown protocol: "+p)
				return
			}
			cn.user = meta.User{Name: u}
			haveContext = true
		case id == pingCall:
		case id < 0:
			cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "org.apache.hadoop.ipc.RpcServerException", fmt.Sprintf("unknown control call id %d", id))
			return
		default:
			if !haveContext {
				cn.fatal(id, req.Header.ClientId, hadoop.RpcResponseHeaderProto_FATAL_INVALID_RPC_HEADER, "org.apache.hadoop.ipc.RpcServerException", "Connection context not established")
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case s.calls <- struct{}{}:
			case <-ctx.Done():
				<-slots
				return
			}
			calls.Add(1)
			go func() {
				defer calls.Done()
				defer func() { <-s.calls; <-slots }()
				cn.serveCall(ctx, req, received)
			}()
		}
	}
}

func (cn *conn) serveCall(ctx context.Context, req *Request, received time.Time) {
	h := req.Header
	rh := &hadoop.RpcResponseHeaderProto{CallId: proto.Uint32(uint32(h.GetCallId())), ClientId: h.ClientId, RetryCount: h.RetryCount, ServerIpcVersionNum: proto.Uint32(ipcVersion)}
	name := req.Method.GetMethodName()
	var resp proto.Message
	var err error
	if p := req.Method.GetDeclaringClassProtocolName(); p != Protocol {
		err = &RemoteError{Class: "org.apache.hadoop.ipc.RpcNoSuchProtocolException", Msg: "Unknown protocol: " + p, Detail: hadoop.RpcResponseHeaderProto_ERROR_NO_SUCH_PROTOCOL}
	} else if f := cn.s.methods[name]; f == nil {
		err = &RemoteError{Class: "org.apache.hadoop.ipc.RpcNoSuchMethodException", Msg: "Unknown method " + name + " called on " + p + " protocol.", Detail: hadoop.RpcResponseHeaderProto_ERROR_NO_SUCH_METHOD}
	} else {
		cctx := ctx
		if len(h.ClientId) > 0 && h.GetCallId() >= 0 {
			cctx = meta.WithRequest(ctx, meta.Request{
				Client:      fmt.Sprintf("hrpc-%x", h.ClientId),
				ID:          uint64(h.GetCallId()) + 1, // 0 is "no id"
				Resubmitted: h.GetRetryCount() > 0,
				Received:    received,
			})
		}
		resp, err = cn.run(cctx, f, name, req.Body)
	}
	label := name
	if cn.s.methods[name] == nil {
		label = "unknown"
	}
	defer func() { cn.s.m.seconds.WithLabelValues(label).Observe(time.Since(received).Seconds()) }()
	if err != nil {
		re := toRemote(err)
		cn.s.m.calls.WithLabelValues(label, re.Class).Inc()
		rh.Status = hadoop.RpcResponseHeaderProto_ERROR.Enum()
		rh.ExceptionClassName = proto.String(re.Class)
		rh.ErrorMsg = proto.String(re.Msg)
		rh.ErrorDetail = re.Detail.Enum()
		resp = nil
		cn.s.log.Debug("hadoop rpc: call failed", "method", name, "user", cn.user.Name, "err", err)
	} else {
		rh.Status = hadoop.RpcResponseHeaderProto_SUCCESS.Enum()
		cn.s.m.calls.WithLabelValues(label, "").Inc()
	}
	b, err := encodeResponse(rh, resp)
	if err != nil {
		// A response missing a required field is a server bug: the
		// client gets an error rather than a message it cannot parse.
		cn.s.log.Error("hadoop rpc: cannot encode a response", "method", name, "err", err)
		rh.Status = hadoop.RpcResponseHeaderProto_ERROR.Enum()
		rh.ExceptionClassName = proto.String("org.apache.hadoop.ipc.RpcServerException")
		rh.ErrorMsg = proto.String(name + ": cannot encode the response: " + err.Error())
		rh.ErrorDetail = hadoop.RpcResponseHeaderProto_ERROR_RPC_SERVER.Enum()
		if b, err = encodeResponse(rh, nil); err != nil {
			cn.c.Close()
			return
		}
	}
	if err := cn.write(b); err != nil {
		cn.c.Close()
	}
}

// run runs one call under the server's meter and tenant limits.
func (cn *conn) run(ctx context.Context, f handler, name string, body []byte) (proto.Message, error) {
	s := cn.s
	if mt := s.cfg.Meter; mt != nil {
		mt.Begin()
		defer mt.End()
	}
	if tn := s.cfg.Tenants; tn != nil {
		id := tenant.ID(cn.user.Name, "")
		if err := tn.Admit(id); err != nil {
			return nil, meta.Errorf(name, "", meta.ErrBusy, "%v", err)
		}
		start := time.Now()
		resp, err := f(ctx, cn.user, body)
		tn.Done(id, time.Since(start), err != nil)
		return resp, err
	}
	return f(ctx, cn.user, body)
}

// fatal sends a FATAL response and leaves the caller to close the connection.
func (cn *conn) fatal(id int32, clientID []byte, code hadoop.RpcResponseHeaderProto_RpcErrorCodeProto, class, msg string) {
	cn.s.log.Info("hadoop rpc: fatal connection error", "remote", cn.c.RemoteAddr().String(), "class", class, "msg", msg)
	_ = cn.send(&hadoop.RpcResponseHeaderProto{CallId: proto.Uint32(uint32(id)), Status: hadoop.RpcResponseHeaderProto_FATAL.Enum(),
		ServerIpcVersionNum: proto.Uint32(ipcVersion), ExceptionClassName: proto.String(class), ErrorMsg: proto.String(msg), ErrorDetail: code.Enum(), ClientId: clientID}, nil)
}

func (cn *conn) send(h *hadoop.RpcResponseHeaderProto, body proto.Message) error {
	b, err := encodeResponse(h, body)
	if err != nil {
		return err
	}
	return cn.write(b)
}

// writeTimeout bounds one response's write: a client that stops reading
// loses its connection rather than holding the call's goroutines.
const writeTimeout = time.Minute

func (cn *conn) write(b []byte) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	_ = cn.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := cn.w.Write(b); err != nil {
		return err
	}
	return cn.w.Flush()
}
