package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/nimbus-fs/nimbus/webhdfs"
)

// The gateway is the local platform's front door, what an API gateway or
// Knative's activator is to a serverless platform: every request becomes
// an invocation of a deployment (Local.Invoke), is forwarded to the
// instance the policy chose, and the instance's answer comes back with the
// instance named in a header. Headers (docs/ELASTIC.md, "The local
// platform and its hosting"):
//
//	Nimbus-Deployment: D          request: the deployment invoked (decimal; absent: 0)
//	Nimbus-*                      request: passed through to the instance (Nimbus-Callback pinned to the client's host: pinCallback)
//	Nimbus-Instance: ID BASEURL   response: the instance that answered
//
// Statuses of its own: 400 for a bad Nimbus-Deployment or a request body
// that stalled (GatewayOptions.FrameTimeout, UploadIdleTimeout); 413 for
// a request frame over GatewayOptions.MaxBody; 503 with Retry-After when
// the platform is busy (queue full, caps reached, no instance within
// GatewayOptions.InvokeTimeout, the bodies in flight at
// GatewayOptions.BodyBudget) or when the request could not be sent to an
// instance (a failed dial: nothing was sent, so it may be retried); 500
// when instances cannot start for a cause retrying will not change
// (ErrPermanent, with the instance's own error); 502 when the instance
// failed mid-call (its outcome is unknown: the request may or may not
// have been executed, as after a lost reply).
const (
	HeaderDeployment = "Nimbus-Deployment"
	HeaderInstance   = "Nimbus-Instance"
	headerPrefix     = "Nimbus-"
	// HeaderGatewayCredential carries the platform's gateway credential on
	// every request the gateway forwards to an instance: an instance at
	// its connection limit serves such a connection in a slot reserved for
	// the gateway (server.Limits.GatewayCredential). The gateway drops a
	// copy a client sends.
	HeaderGatewayCredential = "Nimbus-Gateway-Credential"
	// EnvGatewayCredential is the environment variable through which
	// ProcessHost hands the credential to the instances it starts: the
	// command line of a process is readable by every local user
	// (/proc/PID/cmdline), its environment only by its owner.
	EnvGatewayCredential = "NIMBUS_GATEWAY_CREDENTIAL"
)

// GatewayOptions configure a Gateway; zero fields take the defaults.
type GatewayOptions struct {
	// Client forwards requests to instances; nil: a pooled client of its
	// own (keep-alive connections to each instance).
	Client *http.Client
	// InvokeTimeout bounds the wait for an instance (a cold start, a
	// queue); past it the request is answered 503. 0: 30 s.
	InvokeTimeout time.Duration
	// MaxBody bounds a /rpc/call body (one request frame); past it the
	// gateway answers 413 itself. It matches the instances' frame limit
	// (a larger frame would only be refused by them). 0: the RPC's
	// default frame limit plus its length prefix.
	MaxBody int64
	// FrameTimeout bounds the reading of a /rpc/call body, from the
	// headers to its last byte: a client that stalls halfway is answered
	// 400 and its connection closed. 0: rpc.DefaultFrameTimeout.
	FrameTimeout time.Duration
	// UploadIdleTimeout bounds each read of a WebHDFS request body the
	// gateway forwards (CREATE, APPEND): a client that sends nothing for
	// that long is answered 400 and the instance's upload fails, as the
	// server's own (webhdfs.Config.BodyIdleTimeout). 0: 30 s.
	UploadIdleTimeout time.Duration
	// BodyBudget bounds the bytes of /rpc/call bodies held at once, from
	// their reading to the instance's answer; a request that would pass
	// it is answered 503 with Retry-After before its body is read. 0:
	// rpc.DefaultMaxServerBytes.
	BodyBudget int64
	// Metrics serves /metrics (the gateway's own registry); nil: 404.
	Metrics http.Handler
	// Credential is sent in HeaderGatewayCredential on every request
	// forwarded to an instance, which its instances were started with
	// (ProcessHost.Credential, server.Limits.GatewayCredential): it admits
	// the gateway to slots reserved for it when clients hold an instance's
	// others. "": none sent.
	Credential string
	// StatusTimeout bounds each instance's answer when /status/cluster
	// asks them for their cache counters. 0: 300 ms.
	StatusTimeout time.Duration
	// Gatherer is the registry the status page's sampler reads (the
	// gateway's and the platform's metrics); nil: the page has no charts.
	Gatherer prometheus.Gatherer
	// Version is shown on the status page.
	Version string
	// Prices turn the platform's usage into dollars (GET /status/instance,
	// usage.go); zero: DefaultPrices.
	Prices     Prices
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nimbus_gateway_requests_total; nil: none
	// FaultInjection turns on POST /platform/kill (faults.go); off, it
	// answers 403.
	FaultInjection bool
}

// Gateway forwards requests to the local platform's instances.
type Gateway struct {
	l    *Local
	opts GatewayOptions
	hc   *http.Client
	mux  *http.ServeMux
	met  *gatewayMetrics
	page *gatewayPage // the status page (statuspage.go)
	// held is the bytes of /rpc/call bodies reserved against BodyBudget.
	held atomic.Int64
}

// NewGateway returns the gateway of l; it fails only to register its
// metrics.
func NewGateway(l *Local, opts GatewayOptions) (*Gateway, error) {
	if opts.InvokeTimeout <= 0 {
		opts.InvokeTimeout = 30 * time.Second
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = rpc.DefaultMaxFrameSize + 16
	}
	if opts.FrameTimeout <= 0 {
		opts.FrameTimeout = rpc.DefaultFrameTimeout
	}
	if opts.UploadIdleTimeout <= 0 {
		opts.UploadIdleTimeout = 30 * time.Second
	}
	if opts.BodyBudget <= 0 {
		opts.BodyBudget = rpc.DefaultMaxServerBytes
	}
	if opts.Prices == (Prices{}) {
		opts.Prices = DefaultPrices()
	}
	if opts.StatusTimeout <= 0 {
		opts.StatusTimeout = 300 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	hc := opts.Client
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
		hc = &http.Client{Transport: tr}
	}
	g := &Gateway{l: l, opts: opts, hc: hc, mux: http.NewServeMux()}
	met, err := newGatewayMetrics(opts.Registerer, func() float64 { return float64(g.held.Load()) }, float64(opts.BodyBudget))
	if err != nil {
		return nil, err
	}
	g.met = met
	g.mux.HandleFunc("POST /rpc/call", g.call)
	g.mux.HandleFunc("/rpc/", g.noConn)
	g.mux.HandleFunc("/webhdfs/v1/", g.webhdfs)
	g.mux.HandleFunc("/webhdfs/v1", g.webhdfs)
	g.mux.HandleFunc("GET /readyz", g.readyz)
	g.mux.HandleFunc("GET /status/cluster", g.cluster)
	g.routePage()
	g.mux.HandleFunc("GET /status/instance", g.instanceJSON)
	g.registerFaults()
	if opts.Metrics != nil {
		g.mux.Handle("/metrics", opts.Metrics)
	}
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/webhdfs/v1") {
		// As sent: the mux would redirect a raw "/a/../b", which the
		// instance refuses as HDFS does.
		g.webhdfs(w, r)
		return
	}
	g.mux.ServeHTTP(w, r)
}

// deploymentOf reads the Nimbus-Deployment header.
func deploymentOf(h http.Header, n int) (int, error) {
	v := h.Get(HeaderDeployment)
	if v == "" {
		return 0, nil
	}
	d, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || d < 0 || d >= n {
		return 0, fmt.Errorf("platform: bad %s header %q: want a deployment 0 to %d", HeaderDeployment, v, n-1)
	}
	return d, nil
}

// invoke waits for an instance of dep for r, answering r itself when
// there is none (nil lease).
func (g *Gateway) invoke(w http.ResponseWriter, r *http.Request, kind string, dep int) *Lease {
	ctx, cancel := context.WithTimeout(r.Context(), g.opts.InvokeTimeout)
	defer cancel()
	le, err := g.l.Invoke(ctx, dep)
	if err == nil {
		return le
	}
	switch {
	case r.Context().Err() != nil:
		// The client went away: nobody to answer.
	case errors.Is(err, ErrPermanent):
		// Fails at once, with the instances' own error: waiting and
		// retrying would not help.
		g.met.requests.WithLabelValues(kind, outcomeUnavailable).Inc()
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
		g.met.requests.WithLabelValues(kind, outcomeBusy).Inc()
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		g.met.requests.WithLabelValues(kind, outcomeRefused).Inc()
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
	return nil
}

func instanceHeader(le *Lease) string { return fmt.Sprintf("%d %s", le.ID(), le.Addr()) }

// call forwards POST /rpc/call: one request frame in, one response frame
// out. The body is read whole before the invocation, so that a slow
// client does not hold an instance's slot.
func (g *Gateway) call(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	dep, err := deploymentOf(r.Header, g.l.Config().Deployments)
	if err != nil {
		g.met.requests.WithLabelValues("call", outcomeRefused).Inc()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer g.met.observe("call", dep, start)
	body, release, ok := g.readCall(w, r)
	if !ok {
		return
	}
	defer release()
	// A request that could not even be sent (the instance's port refused
	// the connection: it died and the platform has not seen it go yet) was
	// not executed, so it goes to another instance; at most three tries.
	var le *Lease
	var resp *http.Response
	for attempt := 1; ; attempt++ {
		if le = g.invoke(w, r, "call", dep); le == nil {
			return
		}
		resp, err = g.forward(r, le, body)
		if err == nil {
			break
		}
		if r.Context().Err() != nil {
			le.Release()
			return
		}
		if !refused(err) || attempt == 3 {
			if notSent(err) {
				g.unsent(w, "call", le, err)
			} else {
				g.failed(w, "call", le, err)
			}
			le.Release()
			return
		}
		g.opts.Logger.Debug("an instance refused a connection; the request goes to another", "instance", le.ID(), "err", err)
		le.Release()
		// Its exit is what makes the policy choose another: wait for it
		// briefly, and report it at once rather than leave it to the
		// instance's watcher, which may not have run yet.
		select {
		case <-le.Instance().Done():
			g.l.exited(le.rec)
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	defer le.Release()
	defer resp.Body.Close()
	g.met.requests.WithLabelValues("call", outcomeForwarded).Inc()
	for k, vs := range resp.Header {
		switch k {
		case "Connection", "Keep-Alive", "Transfer-Encoding":
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set(HeaderInstance, instanceHeader(le))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// keepBody is the largest /rpc/call body that the gateway reads and drops
// when it answers 503 for its budget, within dropBodyTimeout, so as to keep
// the connection: a client told to retry need not open a new one, which a
// flood at the gateway's connection cap would leave it little chance to
// get. A larger body, or one that does not arrive in time, closes it.
const (
	keepBody        = 64 << 10
	dropBodyTimeout = time.Second
)

// dropBody reads and drops r's body within dropBodyTimeout (the frame
// timeout if shorter) and reports whether it all came.
func (g *Gateway) dropBody(w http.ResponseWriter, r *http.Request) bool {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(min(dropBodyTimeout, g.opts.FrameTimeout)))
	_, err := io.Copy(io.Discard, r.Body)
	_ = rc.SetReadDeadline(time.Time{})
	return err == nil
}

// readCall reads a /rpc/call body within FrameTimeout and BodyBudget; it
// answers r itself when it cannot (ok false). release gives the body's
// reservation back: call it once the body is no longer needed.
func (g *Gateway) readCall(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	n := r.ContentLength
	refuse := func(status int, msg string) ([]byte, func(), bool) {
		if status == http.StatusServiceUnavailable {
			g.met.requests.WithLabelValues("call", outcomeBusy).Inc()
			w.Header().Set("Retry-After", "1")
		} else {
			g.met.requests.WithLabelValues("call", outcomeRefused).Inc()
		}
		if !(status == http.StatusServiceUnavailable && n >= 0 && n <= keepBody && g.dropBody(w, r)) {
			w.Header().Set("Connection", "close") // the rest of the body is not read
		}
		http.Error(w, msg, status)
		return nil, nil, false
	}
	if n > g.opts.MaxBody {
		return refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("platform: request frame too large: %d bytes, over the limit of %d", n, g.opts.MaxBody))
	}
	// A body of unknown length reserves the largest frame until it is in.
	reserve := n
	if n < 0 {
		reserve = g.opts.MaxBody
	}
	if g.held.Add(reserve) > g.opts.BodyBudget {
		g.held.Add(-reserve)
		return refuse(http.StatusServiceUnavailable, fmt.Sprintf("platform: busy: the request bodies in flight hold the gateway's budget of %d bytes", g.opts.BodyBudget))
	}
	release = func() { g.held.Add(-reserve) }
	// A body that stops halfway would hold the connection and its
	// reservation forever: the frame timeout applies, and is lifted once
	// the body is in (net/http's background read of the connection would
	// fail at the deadline and cancel the request's context).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(g.opts.FrameTimeout))
	var err error
	if n >= 0 {
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, g.opts.MaxBody))
	}
	if err != nil {
		release()
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("platform: request frame too large: over the limit of %d bytes", g.opts.MaxBody))
		case errors.Is(err, os.ErrDeadlineExceeded):
			return refuse(http.StatusBadRequest, fmt.Sprintf("platform: reading the request: the frame did not arrive within %v", g.opts.FrameTimeout))
		}
		return refuse(http.StatusBadRequest, "platform: reading the request: "+err.Error())
	}
	_ = rc.SetReadDeadline(time.Time{})
	if n < 0 {
		// Keep what the body holds, give the rest back.
		held := int64(cap(body))
		g.held.Add(held - reserve)
		reserve = held
	}
	return body, release, true
}

// forward sends one request frame to le's instance.
func (g *Gateway) forward(r *http.Request, le *Lease, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, le.Addr()+"/rpc/call", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		out.Header.Set("Content-Type", ct)
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, headerPrefix) {
			out.Header[k] = vs
		}
	}
	g.credential(out.Header)
	pinCallback(out.Header, r.RemoteAddr)
	return g.hc.Do(out)
}

// credential puts the gateway's credential in h in place of any copy a
// client sent: a client must not take the slots an instance reserves for
// the gateway.
func (g *Gateway) credential(h http.Header) {
	h.Del(HeaderGatewayCredential)
	if g.opts.Credential != "" {
		h.Set(HeaderGatewayCredential, g.opts.Credential)
	}
}

// notSent reports whether err says the request never reached the
// instance: the connection to it could not be made (refused by a dead
// instance, or the gateway's own descriptors or ports ran out). Nothing
// of the request was written.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refused reports whether err is a connection the instance's port refused:
// it died, and another instance may take the request.
func refused(err error) bool {
	return notSent(err) && errors.Is(err, syscall.ECONNREFUSED)
}

// unsent answers 503 for a request that could not be sent to le's
// instance: nothing of it was executed, and the client may send it again.
func (g *Gateway) unsent(w http.ResponseWriter, kind string, le *Lease, err error) {
	g.met.requests.WithLabelValues(kind, outcomeBusy).Inc()
	g.opts.Logger.Warn("could not connect to an instance", "instance", le.ID(), "addr", le.Addr(), "err", err)
	w.Header().Set(HeaderInstance, instanceHeader(le))
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("platform: busy: could not connect to instance %d at %s (%v): the request was not sent",
		le.ID(), le.Addr(), err), http.StatusServiceUnavailable)
}

// failed answers 502 for a request whose instance failed under it.
func (g *Gateway) failed(w http.ResponseWriter, kind string, le *Lease, err error) {
	g.met.requests.WithLabelValues(kind, outcomeFailed).Inc()
	g.opts.Logger.Warn("an instance failed mid-call", "instance", le.ID(), "addr", le.Addr(), "err", err)
	w.Header().Set(HeaderInstance, instanceHeader(le))
	http.Error(w, fmt.Sprintf("platform: instance %d at %s failed mid-call (%v): the request's outcome is unknown (it may or may not have been executed)",
		le.ID(), le.Addr(), err), http.StatusBadGateway)
}

// WebHDFSDeployment is the deployment the gateway invokes for a WebHDFS
// path: by an FNV-1a hash of the path's parent directory, so that the
// operations on one directory's entries go to one deployment (the
// namespace's own routing is by the parent's inode id, which the gateway
// does not know; the instance serves any path either way, only its cache
// may hold less).
func WebHDFSDeployment(p string, n int) int {
	if n <= 1 {
		return 0
	}
	p = strings.TrimPrefix(p, "/webhdfs/v1")
	parent := path.Dir(path.Clean("/" + p))
	h := fnv.New64a()
	h.Write([]byte(parent))
	return int(h.Sum64() % uint64(n))
}

// webhdfs forwards a WebHDFS request, keeping the Host the client sent so
// that the instance's redirects (create, append, open) point back at the
// gateway.
func (g *Gateway) webhdfs(w http.ResponseWriter, r *http.Request) {
	p := r.URL.RawPath
	if p == "" {
		p = r.URL.Path
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	dep := WebHDFSDeployment(p, g.l.Config().Deployments)
	defer g.met.observe("webhdfs", dep, time.Now())
	le := g.invoke(w, r, "webhdfs", dep)
	if le == nil {
		return
	}
	defer le.Release()
	var body *webhdfs.IdleBody
	if r.Body != nil && r.Body != http.NoBody {
		body = webhdfs.NewIdleBody(w, r, g.opts.UploadIdleTimeout)
		r.Body = body
	}
	target, err := url.Parse(le.Addr())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			g.credential(pr.Out.Header)
		},
		Transport: g.hc.Transport,
		ModifyResponse: func(resp *http.Response) error {
			g.met.requests.WithLabelValues("webhdfs", outcomeForwarded).Inc()
			resp.Header.Set(HeaderInstance, instanceHeader(le))
			if resp.Close || (body != nil && !body.Complete()) {
				// The instance answered before the body's end (it failed
				// the upload): close the client's connection rather than
				// let net/http read the rest of the body first, from a
				// client that may have stopped sending. (Connection is
				// hop-by-hop: the proxy dropped the instance's own.)
				resp.Header.Set("Connection", "close")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			switch {
			case body != nil && body.Failed():
				// The client's body stalled or broke: the instance's
				// upload fails with the connection the gateway drops,
				// and the client hears why, as from a server.
				g.met.requests.WithLabelValues("webhdfs", outcomeRefused).Inc()
				webhdfs.WriteBodyError(w, r, err)
			case r.Context().Err() != nil:
			case notSent(err):
				g.unsent(w, "webhdfs", le, err)
			default:
				g.failed(w, "webhdfs", le, err)
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// noConn answers the RPC paths the gateway does not serve.
func (g *Gateway) noConn(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Nimbus-Gateway", "1") // rpc.HeaderGateway: a client that dialled here turns hybrid (rpc.ErrGateway)
	http.Error(w, "platform: the gateway serves the RPC as POST /rpc/call (one request per invocation, deployment in the "+
		HeaderDeployment+" header); a multiplexed connection (/rpc/conn) goes to an instance directly", http.StatusNotImplemented)
}

func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	g.l.mu.Lock()
	ok := g.l.mu.started && !g.l.mu.closed
	g.l.mu.Unlock()
	broken := g.l.Unavailable()
	if !ok {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if broken != nil {
		http.Error(w, "not ready: "+broken.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// Status returns the cluster as /status/cluster shows it, with each
// serving instance's cache hit ratio asked of it.
func (g *Gateway) Status(ctx context.Context) ClusterStatus {
	cs := NewClusterStatus(g.l.Config().Deployments)
	now := g.l.opts.Now()
	for _, s := range g.l.Instances() {
		age := now.Sub(s.StartedAt).Seconds()
		inflight := s.InFlight
		ci := ClusterInstance{ID: strconv.FormatUint(uint64(s.ID), 10), Address: s.Addr, State: s.State, AgeSeconds: &age, Inflight: &inflight}
		if s.ColdStart > 0 {
			ms := float64(s.ColdStart.Microseconds()) / 1e3
			ci.ColdStartMS = &ms
		}
		cs.Deployments[s.Deployment].Instances = append(cs.Deployments[s.Deployment].Instances, ci)
		cs.Totals.Instances++
	}
	cs.Totals.Invocations, cs.Totals.ColdStarts = g.l.Totals()
	FillHitRatios(ctx, g.hc, &cs, g.opts.StatusTimeout)
	return cs
}

func (g *Gateway) cluster(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(g.Status(r.Context()))
}
