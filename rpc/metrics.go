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

	// Hot-path caches so that a request costs no label lookup.
	ok  [numMethods]prometheus.Counter
	obs [numMethods]prometheus.Observer
	// errs caches counters by method and kind, filled on first use.
	errs [numMethods][16]atomic.Pointer[prometheus.Counter]
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
	}
	for i := Method(0); i < numMethods; i++ {
		m.ok[i] = m.requests.WithLabelValues(i.String(), "ok")
		m.obs[i] = m.latency.WithLabelValues(i.String())
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency, m.inflight, m.conns, m.connsTotal, m.protoErrors)
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
