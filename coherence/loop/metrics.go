package loop

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
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
		m.sent = promreg.MustReuse(reg, m.sent)
		m.received = promreg.MustReuse(reg, m.received)
		m.sendErrors = promreg.MustReuse(reg, m.sendErrors)
		m.dropped = promreg.MustReuse(reg, m.dropped)
		m.refused = promreg.MustReuse(reg, m.refused)
		m.writes = promreg.MustReuse(reg, m.writes)
		m.ackWait = promreg.MustReuse(reg, m.ackWait)
		m.fences = promreg.MustReuse(reg, m.fences)
		m.floors = promreg.MustReuse(reg, m.floors)
		m.holding = promreg.MustReuse(reg, m.holding)
		m.serving = promreg.MustReuse(reg, m.serving)
	}
	return m
}
