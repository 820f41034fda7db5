package namespace

import (
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	ops        *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	retries    *prometheus.CounterVec
	hintHits   prometheus.Counter
	hintMisses prometheus.Counter
	recovered  prometheus.Counter
	// quiesceSeconds: the wait of a subtree operation's quiesce for the
	// attempts in flight (grace.go), the walk of a shared store not included.
	quiesceSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "operations_total",
			Help: "Namespace operations by operation and outcome (ok or the error kind).",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "operation_seconds",
			Help:    "Namespace operation latency, lock phase to durable commit.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}, []string{"op"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "retries_total",
			Help: "Operation restarts after a stale hint, a late lock need (a rename whose source turns out to be a directory is one) or a busy lock.",
		}, []string{"op"}),
		hintHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "hint_hits_total",
			Help: "Path components whose key came from the inode hint cache.",
		}),
		hintMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "hint_misses_total",
			Help: "Path components read from the store to learn their id.",
		}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "lease_recoveries_total",
			Help: "Files closed by lease recovery after their writer went away.",
		}),
		quiesceSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "subtree_quiesce_seconds",
			Help:    "How long a subtree operation waited for the operations in flight when its flag was set.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18),
		}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.latency, m.retries, m.hintHits, m.hintMisses, m.recovered, m.quiesceSeconds)
	}
	return m
}

func (m *metrics) observe(op string, err error, d time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = meta.KindOf(err).String()
	}
	m.ops.WithLabelValues(op, outcome).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
