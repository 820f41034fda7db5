package loop

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the coherence I/O loop (namespace nimbus, subsystem coherence).
type metrics struct {
	sent       *prometheus.CounterVec // by message type
	received   *prometheus.CounterVec
	sendErrors prometheus.Counter
	dropped    prometheus.Counter
	refused    *prometheus.CounterVec // by reason
	writes     *prometheus.CounterVec // by result
	ackWait    prometheus.Histogram
	fences     prometheus.Counter
	floors     prometheus.Counter
	holding    prometheus.Gauge
	serving    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "nimbus", "coherence"
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_sent_total",
			Help: "Peer messages handed to the transport, by type (INV, ACK, RELEASE); re-sends count."}, []string{"type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_received_total",
			Help: "Peer messages received, by type."}, []string{"type"}),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "send_errors_total",
			Help: "Message batches that could not be delivered (the protocol re-sends what it needs)."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "messages_dropped_total",
			Help: "Messages dropped before sending or on receipt (no address known, inbox full, send queue full)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_refused_total",
			Help: "Requests to POST /coherence refused for their credential (missing, invalid, expired: not a member's), whose messages were never read."}, []string{"reason"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "writes_total",
			Help: "Writes with invalidation targets, by outcome (committed, aborted, refused: no view or session lost)."}, []string{"result"}),
		ackWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "ack_wait_seconds",
			Help:    "From a write's WriteLocked (its row locks held) to its Commit: the extra lock-hold time spent waiting for the ACKs of its INVs.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 20)}),
		fences: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fences_total",
			Help: "Departed incarnations fenced in the store by this instance."}),
		floors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "floor_raises_total",
			Help: "Write-floor raises done in the store (one per incarnation)."}),
		holding: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "holds",
			Help: "Peers' writes holding targets in this instance's cache now."}),
		serving: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "serving",
			Help: "1 while the cache may answer reads (joined, floor raised, session deadline ahead), as of the loop's latest step."}),
	}
	if reg != nil {
		m.sent = register(reg, m.sent)
		m.received = register(reg, m.received)
		m.sendErrors = register(reg, m.sendErrors)
		m.dropped = register(reg, m.dropped)
		m.refused = register(reg, m.refused)
		m.writes = register(reg, m.writes)
		m.ackWait = register(reg, m.ackWait)
		m.fences = register(reg, m.fences)
		m.floors = register(reg, m.floors)
		m.holding = register(reg, m.holding)
		m.serving = register(reg, m.serving)
	}
	return m
}

// register registers c, or returns the collector already registered.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
