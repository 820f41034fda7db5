package rpc

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's instruments, registered on the injected
// Registerer (none when it is nil).
type metrics struct {
	requests    *prometheus.CounterVec   // by method and outcome kind
	latency     *prometheus.HistogramVec // by method
	inflight    prometheus.Gauge
	conns       prometheus.Gauge
	connsTotal  prometheus.Counter
	protoErrors prometheus.Counter
	// backpressure counts the times a connection's reader stopped reading
	// because the connection or the server held too much; closed counts
	// connections the server closed, by reason.
	backpressure prometheus.Counter
	closed       *prometheus.CounterVec
	heldBytes    prometheus.GaugeFunc
	// staleRefused counts requests not started because their connection
	// ended while they waited for a slot (serverConn.takeSlot).
	staleRefused prometheus.Counter
	// callbacks counts connect-back attempts by outcome (dialled,
	// unreachable, refused, accepted).
	callbacks *prometheus.CounterVec

	// Hot-path caches so that a request costs no label lookup.
	ok  [numMethods]prometheus.Counter
	obs [numMethods]prometheus.Observer
	// errs caches counters by method and kind, filled on first use.
	errs [numMethods][18]atomic.Pointer[prometheus.Counter]
}

// newMetrics registers the instruments on reg; held reads the bytes the
// connections hold (a gauge read at scrape time, so the request path only
// keeps its own counter).
func newMetrics(reg prometheus.Registerer, held func() float64) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "requests_total",
			Help: "RPC requests served, by method and result kind (ok or an error kind).",
		}, []string{"method", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "request_duration_seconds",
			Help:    "Time from decoding a request to encoding its response, by method.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 14),
		}, []string{"method"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "inflight_requests",
			Help: "Requests being executed now.",
		}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "connections",
			Help: "Open multiplexed RPC connections.",
		}),
		connsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "connections_total",
			Help: "Multiplexed RPC connections accepted.",
		}),
		protoErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "protocol_errors_total",
			Help: "Connections or calls rejected for breaking the protocol (oversized or undecodable frames, bad handshakes).",
		}),
		backpressure: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "backpressure_waits_total",
			Help: "Times a connection stopped reading requests because it or the server held too many unanswered bytes or requests.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "connections_closed_total",
			Help: "Connections the server closed on its own, by reason (frame_timeout, idle_timeout, protocol_error).",
		}, []string{"reason"}),
		staleRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "stale_requests_refused_total",
			Help: "Requests whose connection (or HTTP call) ended while they waited for a request slot: not started.",
		}),
		heldBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "held_bytes",
			Help: "Bytes of requests read and not yet answered plus answers not yet written, across connections.",
		}, held),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "rpc", Name: "callbacks_total",
			Help: "Connections back to clients' callback endpoints, by outcome (dialled, unreachable, refused, accepted).",
		}, []string{"outcome"}),
	}
	for i := Method(0); i < numMethods; i++ {
		m.ok[i] = m.requests.WithLabelValues(i.String(), "ok")
		m.obs[i] = m.latency.WithLabelValues(i.String())
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.inflight, m.conns, m.connsTotal, m.protoErrors, m.backpressure, m.closed, m.heldBytes, m.staleRefused, m.callbacks)
	}
	return m
}

// kindLabel is the metric label of an error kind: "not_found", "busy", ...
func kindLabel(k meta.Kind) string {
	switch k {
	case meta.KindUnknown:
		return "unknown"
	case meta.KindExists:
		return "exists"
	case meta.KindNotDir:
		return "not_dir"
	case meta.KindIsDir:
		return "is_dir"
	case meta.KindNotEmpty:
		return "not_empty"
	case meta.KindPermission:
		return "permission"
	case meta.KindBusy:
		return "busy"
	case meta.KindLease:
		return "lease"
	case meta.KindTooLarge:
		return "too_large"
	case meta.KindUnresolvedLink:
		return "unresolved_link"
	case meta.KindWrongOwner:
		return "wrong_owner"
	}
	return strings.ReplaceAll(k.String(), " ", "_")
}

func (m *metrics) done(meth Method, kind meta.Kind, failed bool, d time.Duration) {
	m.obs[meth].Observe(d.Seconds())
	if !failed {
		m.ok[meth].Inc()
		return
	}
	if int(kind) >= len(m.errs[meth]) {
		m.requests.WithLabelValues(meth.String(), kindLabel(kind)).Inc()
		return
	}
	p := m.errs[meth][kind].Load()
	if p == nil {
		c := m.requests.WithLabelValues(meth.String(), kindLabel(kind))
		p = &c
		m.errs[meth][kind].Store(p)
	}
	(*p).Inc()
}
