package coordinator

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// Metrics are the coordinator metrics (namespace nimbus, subsystem
// coordinator) that every backend keeps, labelled with the backend's name.
// Methods are safe for concurrent use and on a nil *Metrics (no metrics).
type Metrics struct {
	ops          *prometheus.CounterVec
	opSeconds    *prometheus.HistogramVec
	sessions     prometheus.Gauge
	sessionsLost prometheus.Counter
	renewals     *prometheus.CounterVec
	renewSeconds prometheus.Histogram
	headroom     prometheus.Gauge
	leaderships  prometheus.Counter
	watchEvents  *prometheus.CounterVec
}

// NewMetrics registers the metrics of backend on reg (nil: kept but not
// registered). A second coordinator of the same backend on the same
// registry shares the first one's collectors.
func NewMetrics(reg prometheus.Registerer, backend string) *Metrics {
	cl := prometheus.Labels{"backend": backend}
	const ns, sub = "nimbus", "coordinator"
	m := &Metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "ops_total", ConstLabels: cl,
			Help: "Coordinator calls by operation and result (ok, error, unavailable: retryable)."}, []string{"op", "result"}),
		opSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "op_seconds", ConstLabels: cl,
			Help:    "Latency of coordinator calls (a campaign: until it was won or given up).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"op"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "sessions", ConstLabels: cl,
			Help: "Sessions (members) this process holds now."}),
		sessionsLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "sessions_lost_total", ConstLabels: cl,
			Help: "Sessions that ended because their lease was lost (not by Leave or Close): the member fenced itself."}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lease_renewals_total", ConstLabels: cl,
			Help: "Lease renewals by result (ok, error)."}, []string{"result"}),
		renewSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "lease_renewal_seconds", ConstLabels: cl,
			Help:    "Round trip of a successful lease renewal.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		headroom: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "lease_headroom_seconds", ConstLabels: cl,
			Help: "Time left before the local lease deadline, right after the latest renewal of any session."}),
		leaderships: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "elections_won_total", ConstLabels: cl,
			Help: "Elections won by sessions of this process."}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "watch_events_total", ConstLabels: cl,
			Help: "Membership events delivered to watchers, by kind (snapshot, joined, left)."}, []string{"kind"}),
	}
	if reg != nil {
		m.ops = promreg.MustReuse(reg, m.ops)
		m.opSeconds = promreg.MustReuse(reg, m.opSeconds)
		m.sessions = promreg.MustReuse(reg, m.sessions)
		m.sessionsLost = promreg.MustReuse(reg, m.sessionsLost)
		m.renewals = promreg.MustReuse(reg, m.renewals)
		m.renewSeconds = promreg.MustReuse(reg, m.renewSeconds)
		m.headroom = promreg.MustReuse(reg, m.headroom)
		m.leaderships = promreg.MustReuse(reg, m.leaderships)
		m.watchEvents = promreg.MustReuse(reg, m.watchEvents)
	}
	return m
}

// Op records one call of op that took since start and ended with err.
func (m *Metrics) Op(op string, start time.Time, err error) {
	if m == nil {
		return
	}
	res := "ok"
	switch {
	case errors.Is(err, ErrUnavailable):
		res = "unavailable"
	case err != nil:
		res = "error"
	}
	m.ops.WithLabelValues(op, res).Inc()
	m.opSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// SessionStarted and SessionEnded count live sessions; lost says the lease
// was lost.
func (m *Metrics) SessionStarted() {
	if m != nil {
		m.sessions.Inc()
	}
}

func (m *Metrics) SessionEnded(lost bool) {
	if m == nil {
		return
	}
	m.sessions.Dec()
	if lost {
		m.sessionsLost.Inc()
	}
}

// Renewal records a renewal: its round trip and the headroom it left, or
// its error.
func (m *Metrics) Renewal(rtt, headroom time.Duration, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.renewals.WithLabelValues("error").Inc()
		return
	}
	m.renewals.WithLabelValues("ok").Inc()
	m.renewSeconds.Observe(rtt.Seconds())
	m.headroom.Set(headroom.Seconds())
}

// Won counts an election won.
func (m *Metrics) Won() {
	if m != nil {
		m.leaderships.Inc()
	}
}

// Delivered counts a watch event delivered.
func (m *Metrics) Delivered(k EventKind) {
	if m != nil {
		m.watchEvents.WithLabelValues(k.String()).Inc()
	}
}
