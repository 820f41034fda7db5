package platform

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// localMetrics are the local platform's (subsystem platform): what the
// gateway's /metrics shows about instances and invocations.
type localMetrics struct {
	instances   *prometheus.GaugeVec   // {deployment}: starting, serving or stopping
	queue       *prometheus.GaugeVec   // {deployment}: invocations waiting
	invocations *prometheus.CounterVec // {deployment}: assigned to an instance
	refused     *prometheus.CounterVec // {deployment}: answered busy
	coldStarts  prometheus.Counter
	startFails  prometheus.Counter
	crashes     prometheus.Counter
	coldStart   prometheus.Histogram
	wait        prometheus.Histogram // Invoke to assignment
}

func newLocalMetrics(reg prometheus.Registerer, deployments int) (*localMetrics, error) {
	m := &localMetrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "platform", Name: "instances",
			Help: "Instances of each deployment, starting, serving or stopping."}, []string{"deployment"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "platform", Name: "queue_length",
			Help: "Invocations of each deployment waiting for an instance."}, []string{"deployment"}),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "invocations_total",
			Help: "Invocations handed to an instance, per deployment."}, []string{"deployment"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "refused_total",
			Help: "Invocations refused busy (queue full, or no instance in time), per deployment."}, []string{"deployment"}),
		coldStarts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "cold_starts_total",
			Help: "Instances started and serving."}),
		startFails: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "start_failures_total",
			Help: "Instance starts that failed."}),
		crashes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "crashes_total",
			Help: "Instances that exited without being stopped."}),
		// 5 ms to ~20 s: a process start on PostgreSQL and etcd is tens of
		// milliseconds, a container's seconds.
		coldStart: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nimbus", Subsystem: "platform", Name: "cold_start_seconds",
			Help: "Time from asking the host for an instance to its serving.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 13)}),
		// 50 µs to ~3 s: most invocations find a free slot at once; those
		// that wait for a cold start wait tens of milliseconds or more.
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nimbus", Subsystem: "platform", Name: "invoke_wait_seconds",
			Help: "Time an invocation waited for an instance (a free slot, a cold start), assigned ones only.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 17)}),
	}
	for d := range deployments {
		l := strconv.Itoa(d)
		m.instances.WithLabelValues(l)
		m.queue.WithLabelValues(l)
		m.invocations.WithLabelValues(l)
		m.refused.WithLabelValues(l)
	}
	if err := promreg.RegisterAll(reg, m.instances, m.queue, m.invocations, m.refused, m.coldStarts, m.startFails, m.crashes, m.coldStart, m.wait); err != nil {
		return nil, fmt.Errorf("platform: registering the local platform's metrics: %w", err)
	}
	return m, nil
}

// gatewayMetrics are the gateway's (subsystem gateway).
type gatewayMetrics struct {
	requests *prometheus.CounterVec   // {kind, outcome}
	latency  *prometheus.HistogramVec // {kind, deployment}: what the status page charts
}

// observe records a request of kind for deployment dep that arrived at
// start.
func (m *gatewayMetrics) observe(kind string, dep int, start time.Time) {
	m.latency.WithLabelValues(kind, "d"+strconv.Itoa(dep)).Observe(time.Since(start).Seconds())
}

// Gateway outcomes: forwarded (whatever the instance answered), busy
// (503), failed (502: the instance failed mid-call), refused (400, 413),
// unavailable (500: instances cannot start, ErrPermanent).
const (
	outcomeForwarded   = "forwarded"
	outcomeBusy        = "busy"
	outcomeFailed      = "failed"
	outcomeRefused     = "refused"
	outcomeUnavailable = "unavailable"
)

// newGatewayMetrics registers the gateway's metrics; held reads the bytes
// of request bodies reserved, budget is their bound.
func newGatewayMetrics(reg prometheus.Registerer, held func() float64, budget float64) (*gatewayMetrics, error) {
	m := &gatewayMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "gateway", Name: "requests_total",
		Help: "Requests the gateway took, by kind (call, webhdfs) and outcome (forwarded, busy, failed, refused, unavailable)."}, []string{"kind", "outcome"})}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "nimbus", Subsystem: "gateway", Name: "request_seconds",
		Help:    "Time from a request's arrival at the gateway to its answer (the instance's included), by kind (call, webhdfs) and deployment (d0, d1, ...).",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, []string{"kind", "deployment"})
	for _, k := range []string{"call", "webhdfs"} {
		for _, o := range []string{outcomeForwarded, outcomeBusy, outcomeFailed, outcomeRefused, outcomeUnavailable} {
			m.requests.WithLabelValues(k, o)
		}
	}
	if reg != nil {
		bodies := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "gateway", Name: "body_bytes",
			Help: "Bytes of /rpc/call request bodies the gateway holds (read, not yet answered by an instance)."}, held)
		limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "gateway", Name: "body_budget_bytes",
			Help: "The bound on nimbus_gateway_body_bytes; past it requests are answered 503."}, func() float64 { return budget })
		if err := promreg.RegisterAll(reg, m.requests, m.latency, bodies, limit); err != nil {
			return nil, fmt.Errorf("platform: registering the gateway's metrics: %w", err)
		}
	}
	return m, nil
}
