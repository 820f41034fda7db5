package webhdfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/internal/drain"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/tenant"
)

// Handler serves WebHDFS over a meta.FileSystem. Create it with New or
// NewHandler; it is safe for concurrent use.
type Handler struct {
	fs        meta.FileSystem
	cfg       Config
	advertise string // validated Config.Advertise as scheme://host:port, or ""
	log       *slog.Logger
	m         *metrics
	clientTag string        // random per handler: lease holder names never repeat across restarts
	seq       atomic.Uint64 // lease holder names are clientTag + seq

	// The requests in flight, for Shutdown: once it is closed, new
	// requests are refused retryably.
	drain drain.Gate
}

// Shutdown refuses new requests from now on (503, RetriableException:
// Hadoop's client tries again, elsewhere or later) and waits for those in
// flight to end, or for ctx. A server calls it while it is still a member
// of its cluster, so that a write in flight can still commit.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.drain.Close()
	if err := h.drain.Wait(ctx); err != nil {
		return fmt.Errorf("webhdfs: shutdown: requests still in flight: %w", err)
	}
	return nil
}

// New validates cfg, registers the metrics on cfg.Registerer and returns a
// Handler serving fs.
func New(fs meta.FileSystem, cfg Config) (*Handler, error) {
	if fs == nil {
		return nil, fmt.Errorf("%w: nil FileSystem", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("webhdfs: registering metrics: %w", err)
	}
	h := &Handler{fs: fs, cfg: cfg, m: m, log: cfg.Logger}
	if cfg.Advertise != "" {
		h.advertise, _ = advertiseBase(cfg.Advertise) // checked by Validate
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	var tag [6]byte
	_, _ = rand.Read(tag[:]) // crypto/rand.Read never fails
	h.clientTag = "webhdfs-" + hex.EncodeToString(tag[:]) + "-"
	return h, nil
}

// NewHandler is New for a configuration known to be valid (DefaultConfig with
// fields set by the program, not by a user): it panics if New fails. Use New
// to get the error instead.
func NewHandler(fs meta.FileSystem, cfg Config) http.Handler {
	h, err := New(fs, cfg)
	if err != nil {
		panic(err)
	}
	return h
}

// Intercept returns a handler that serves every request for a WebHDFS URL
// (PathPrefix, or a path under it, as the client sent it) with h and any
// other with next. Put it in front of an http.ServeMux: a mux answers a path
// with "." or ".." components or "//" with a 301 to the cleaned path, so a
// client's DELETE /webhdfs/v1/a/../b would act on /b once the client followed
// the redirect. HDFS refuses such paths; through Intercept, h sees the path
// as sent and refuses it too (400 InvalidPathException naming the path).
func (h *Handler) Intercept(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == PathPrefix || strings.HasPrefix(p, PathPrefix+"/") {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// request is one WebHDFS call being served.
type request struct {
	w        http.ResponseWriter
	r        *http.Request
	op       *opSpec
	path     string
	q        query
	user     meta.User // effective user (after doas)
	job      string    // the caller's job (Nimbus's job parameter), for tenant accounting
	realUser string
}

func (rq *request) ctx() context.Context { return rq.r.Context() }

// statusWriter remembers the status sent, for metrics and logging.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read deadlines
// for upload bodies).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if mt := h.cfg.Meter; mt != nil {
		mt.Begin()
		defer mt.End()
	}
	start := time.Now()
	entered := h.drain.Enter()
	if entered {
		defer h.drain.Exit()
	}
	sw := &statusWriter{ResponseWriter: w}
	opLabel := "invalid"
	defer func() {
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		h.m.observe(opLabel, sw.status, time.Since(start).Seconds())
	}()
	rq, err := h.parse(sw, r)
	if rq != nil && rq.op != nil {
		opLabel = rq.op.name
	}
	if err == nil && !entered {
		sw.Header().Set("Retry-After", "1")
		err = meta.Errorf(rq.op.lower, rq.path, meta.ErrBusy, "the server is stopping: try again, here or at another NameNode")
	}
	if tn := h.cfg.Tenants; tn != nil && err == nil {
		id := tenant.ID(rq.user.Name, rq.job)
		if err = tn.Admit(id); err != nil {
			var te *tenant.ThrottledError
			if errors.As(err, &te) {
				sw.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(te.RetryAfter.Seconds())), 10))
			}
			err = meta.Errorf(rq.op.lower, rq.path, meta.ErrBusy, "%v", err)
		} else {
			defer func() { tn.Done(id, time.Since(start), sw.status >= 400) }()
		}
	}
	if err == nil {
		err = rq.op.run(h, rq)
		if rq.op.method == http.MethodGet && meta.KindOf(err) == meta.KindNotDir {
			// A lookup through a file finds nothing: HDFS's getFileInfo and
			// getListing answer FileNotFoundException there, and Hadoop's
			// exists() relies on it. Only writes report ParentNotDirectory.
			err = meta.Errorf(rq.op.lower, rq.path, meta.ErrNotFound, "%v", err)
		}
	}
	if err != nil {
		path := "" // unknown until the request parsed far enough
		if rq != nil && rq.op != nil {
			path = rq.path
		}
		h.fail(sw, r, path, err)
	}
}

// fail answers err unless the response has started, in which case the
// connection is cut so the client cannot mistake a partial body for a
// complete one. path is the request's path ("" when it did not parse): the
// message names it even when err names another (the ancestor that denied
// access, say). A client that went away is counted and logged at debug
// level, and not answered when its connection is gone (499 in the metrics,
// nginx's "client closed request"), unless it merely stalled.
func (h *Handler) fail(sw *statusWriter, r *http.Request, path string, err error) {
	gone := clientGone(r, err)
	if gone {
		h.m.disconnects.Inc()
		h.log.Debug("webhdfs: client went away", "method", r.Method, "url", r.URL.String(), "err", err)
	}
	if sw.status != 0 {
		if !gone {
			h.log.Error("webhdfs: error after the response started", "method", r.Method, "url", r.URL.String(), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	// net/http cancels the context of a request whose body read failed, a
	// stalled client's too: that one is still there to read its 400.
	var ie *idleError
	if gone && r.Context().Err() != nil && !errors.As(err, &ie) {
		sw.status = statusClientClosed
		return
	}
	status := writeError(sw, path, err)
	if status >= 500 && !gone {
		h.log.Error("webhdfs: server error", "method", r.Method, "url", r.URL.String(), "status", status, "err", err)
	}
}

// statusClientClosed is the status counted for a request whose client went
// away before it could be answered.
const statusClientClosed = 499

// parse resolves op, path and user. The returned request is non-nil whenever
// the op is known, so that metrics can name it.
func (h *Handler) parse(w http.ResponseWriter, r *http.Request) (*request, error) {
	t, err := parseTarget(r.URL.Path, r.URL.RawQuery)
	rq := &request{w: w, r: r, q: t.q, path: t.path}
	if t.q == nil {
		return rq, err // a malformed query: nothing in it can be trusted
	}
	if t.op == "" {
		return rq, meta.Errorf("webhdfs", r.URL.Path, meta.ErrInvalidArgument, "missing parameter \"op\"")
	}
	spec := ops[t.op]
	if spec == nil || spec.method != r.Method {
		return rq, argError("webhdfs", r.URL.Path, "op", t.q["op"],
			fmt.Sprintf("no %s operation %s", r.Method, t.op))
	}
	rq.op = spec
	if err != nil {
		return rq, err
	}
	rq.realUser = t.q.str("user.name", h.cfg.DefaultUser)
	if !validUser(rq.realUser) {
		return rq, argError(spec.lower, t.path, "user.name", rq.realUser, "not a valid user name")
	}
	rq.user = meta.User{Name: rq.realUser}
	rq.job = t.q["job"]
	if doas := t.q["doas"]; doas != "" && doas != rq.realUser {
		if !validUser(doas) {
			return rq, argError(spec.lower, t.path, "doas", doas, "not a valid user name")
		}
		if h.cfg.Superuser == "" || rq.realUser != h.cfg.Superuser {
			return rq, meta.Errorf(spec.lower, t.path, meta.ErrPermission,
				"User: %s is not allowed to impersonate %s", rq.realUser, doas)
		}
		rq.user = meta.User{Name: doas}
	}
	return rq, nil
}

// leaseHolder returns a client name no other request of any handler uses.
func (h *Handler) leaseHolder() string {
	return h.clientTag + strconv.FormatUint(h.seq.Add(1), 10)
}

// dataURL is the second-step URL of a two-step op: the same path and
// parameters, on the advertised address, with data=true.
func (h *Handler) dataURL(rq *request) string {
	base := h.advertise
	if base == "" {
		scheme := "http"
		if rq.r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + requestHost(rq.r)
	}
	q := url.Values{}
	for k, v := range rq.r.URL.Query() {
		switch strings.ToLower(k) {
		case "noredirect", "data":
			continue
		}
		q[k] = v
	}
	q.Set("data", "true")
	u := url.URL{Path: PathPrefix + rq.path}
	return base + u.EscapedPath() + "?" + q.Encode()
}

// redirect answers the first step of a two-step op.
func (h *Handler) redirect(rq *request) error {
	noRedirect, err := rq.q.boolean(rq.op.lower, rq.path, "noredirect", false)
	if err != nil {
		return err
	}
	loc := h.dataURL(rq)
	if noRedirect {
		return writeJSON(rq.w, http.StatusOK, map[string]string{"Location": loc})
	}
	rq.w.Header().Set("Location", loc)
	rq.w.Header().Set("Content-Type", "application/octet-stream")
	rq.w.Header().Set("Content-Length", "0")
	rq.w.WriteHeader(http.StatusTemporaryRedirect)
	return nil
}

// isDataStep reports whether the request is the second step of a two-step op.
func isDataStep(rq *request) (bool, error) {
	return rq.q.boolean(rq.op.lower, rq.path, "data", false)
}

// requestHost is the address the client used: the Host header, or for an
// HTTP/1.0 request without one, the local address the connection arrived on.
func requestHost(r *http.Request) string {
	if r.Host != "" {
		return r.Host
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return "localhost"
}
