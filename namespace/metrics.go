package namespace

import (
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
	// byOp holds each operation's ok counter and latency histogram once
	// looked up (op name -> *opMetrics): a cached read costs a few hundred
	// nanoseconds, and two label look-ups were a tenth of it.
	byOp       sync.Map
	retries    *prometheus.CounterVec
	hintHits   prometheus.Counter
	hintMisses prometheus.Counter
	recovered  prometheus.Counter
	// monitorLeader is 1 while this engine's lease monitor runs (the
	// elected one, when a server runs it as a duty).
	monitorLeader prometheus.Gauge
	// quiesceSeconds: the wait of a subtree operation's quiesce for the
	// attempts in flight (grace.go), the walk of a shared store not included.
	quiesceSeconds prometheus.Histogram

	// Subtree operations (subtree.go, ops_delete.go): how many are in each
	// phase, and the entries their work has done, so that an operator (and
	// the crash test) can follow a long one.
	subtreePhase *prometheus.GaugeVec   // phase
	subtreeDone  *prometheus.CounterVec // op

	// Request records (once.go).
	requestsAnswered *prometheus.CounterVec // op
	requestsInDoubt  prometheus.Counter
	requestsStale    prometheus.Counter
	requestsKept     prometheus.Gauge
	requestsExpired  prometheus.Counter

	// Invalidations (invalidate.go): the targets each write sent, and how
	// many of each kind.
	invTargets     prometheus.Histogram
	invTargetKinds *prometheus.CounterVec // kind
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
		monitorLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "lease_monitor_leader",
			Help: "1 while this NameNode runs the lease monitor (on a shared store: while it leads the lease-monitor election), else 0.",
		}),
		quiesceSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "subtree_quiesce_seconds",
			Help:    "How long a subtree operation waited for the operations in flight when its flag was set.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18),
		}),
		subtreePhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "subtree_phase",
			Help: "Subtree operations (recursive delete, move, chmod, chown, set quota of a non-empty directory) now in each phase: set_flag, quiesce, work, clear, wait.",
		}, []string{"phase"}),
		subtreeDone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "subtree_entries_done_total",
			Help: "Inodes the work phase of subtree operations has committed (a recursive delete counts each inode it removed, batch by batch).",
		}, []string{"op"}),
		requestsAnswered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "request_duplicates_total",
			Help: "Writes resubmitted with the request id of one already applied, answered from its record instead of applied again.",
		}, []string{"op"}),
		requestsInDoubt: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "request_commits_in_doubt_total",
			Help: "Commits of recorded writes whose answer the store lost (commit outcome unknown), settled by reading the record again.",
		}),
		requestsStale: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "request_stale_total",
			Help: "Recorded writes not started because their request was received more than half the request TTL ago (answered busy).",
		}),
		requestsKept: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "request_records",
			Help: "Request records in the store younger than the TTL, as the last sweep counted them.",
		}),
		requestsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "request_records_expired_total",
			Help: "Request records deleted by the sweep once older than the TTL.",
		}),
		invTargets: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "invalidation_targets",
			Help:    "Cache invalidation targets per write, sent before its commit (0: the write changed nothing a cache holds). Observed only while a cache or an invalidator is configured.",
			Buckets: []float64{0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64},
		}),
		invTargetKinds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "namespace", Name: "invalidation_targets_total",
			Help: "Cache invalidation targets sent by writes, by kind (key, inode, listing, attrs, subtree).",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.latency, m.retries, m.hintHits, m.hintMisses, m.recovered, m.monitorLeader, m.subtreePhase, m.subtreeDone, m.quiesceSeconds,
			m.requestsAnswered, m.requestsInDoubt, m.requestsStale, m.requestsKept, m.requestsExpired, m.invTargets, m.invTargetKinds)
	}
	return m
}

func (m *metrics) observe(op string, err error, d time.Duration) {
	if err != nil {
		m.ops.WithLabelValues(op, meta.KindOf(err).String()).Inc()
		m.latency.WithLabelValues(op).Observe(d.Seconds())
		return
	}
	v, ok := m.byOp.Load(op)
	if !ok {
		v, _ = m.byOp.LoadOrStore(op, &opMetrics{ok: m.ops.WithLabelValues(op, "ok"), latency: m.latency.WithLabelValues(op)})
	}
	om := v.(*opMetrics)
	om.ok.Inc()
	om.latency.Observe(d.Seconds())
}

// opMetrics is one operation's series in ops (outcome ok) and latency.
type opMetrics struct {
	ok      prometheus.Counter
	latency prometheus.Observer
}

// subtreeIn moves one subtree operation's count in subtree_phase from the
// phase *cur to next (0 or DoFinish: out of every phase).
func (m *metrics) subtreeIn(cur *subtree.Do, next subtree.Do) {
	if next == subtree.DoFinish {
		next = 0
	}
	if *cur == next {
		return
	}
	if *cur != 0 {
		m.subtreePhase.WithLabelValues(phaseLabel(*cur)).Dec()
	}
	if next != 0 {
		m.subtreePhase.WithLabelValues(phaseLabel(next)).Inc()
	}
	*cur = next
}

func phaseLabel(d subtree.Do) string { return strings.ReplaceAll(d.String(), " ", "_") }
