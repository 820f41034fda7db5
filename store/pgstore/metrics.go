package pgstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// Statement kinds, the label of nimbus_pgstore_statements_total.
const (
	kindRead    = "read"     // a key batch without locks
	kindLock    = "lock"     // a key batch FOR SHARE / FOR UPDATE
	kindScan    = "scan"     // a range read (one page)
	kindBegin   = "begin"    // BEGIN
	kindWrite   = "write"    // INSERT ... ON CONFLICT or DELETE of buffered writes
	kindRange   = "range"    // DELETE of a key range (DeleteRange)
	kindCommit  = "commit"   // COMMIT
	kindAbort   = "rollback" // ROLLBACK
	kindCounter = "allocate" // AllocateIDs's UPDATE
)

var kinds = []string{kindRead, kindLock, kindScan, kindBegin, kindWrite, kindRange, kindCommit, kindAbort, kindCounter}

type metrics struct {
	reg           prometheus.Registerer
	roundTrips    prometheus.Counter
	statementsVec *prometheus.CounterVec
	statements    map[string]prometheus.Counter // resolved once: no label lookup per statement
	commitSeconds prometheus.Histogram
	retryable     prometheus.Counter
	connLost      prometheus.Counter
	commitUnknown prometheus.Counter
	coalesced     prometheus.Counter
	// insertConflicts counts commits refused because a row inserted as new
	// existed (store.ErrConflict): a race the caller's locks did not cover.
	insertConflicts prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		roundTrips: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "round_trips_total",
			Help: "Round trips to the database (one pipelined batch of statements is one).",
		}),
		statementsVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "statements_total",
			Help: "Statements sent to the database, by kind (read, lock, scan, begin, write, range, commit, rollback, allocate).",
		}, []string{"kind"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "commit_seconds",
			Help:    "Latency of commits that wrote (one round trip: the writes and COMMIT).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2.5, 12),
		}),
		retryable: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "retryable_errors_total",
			Help: "Reads and commits that failed with a retryable error (lock busy, lock timeout, deadlock, serialization failure).",
		}),
		connLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "unavailable_errors_total",
			Help: "Operations that failed, retryably, because the database could not be reached or a connection broke before anything could have committed.",
		}),
		commitUnknown: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "commit_outcome_unknown_total",
			Help: "Commits whose connection broke after COMMIT was sent: the outcome is unknown and the error is not retryable.",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "coalesced_reads_total",
			Help: "Unlocked reads that waited for a statement slot and were sent with the others waiting (ReadConcurrency); the statements that carried them count in statements_total{kind=\"read\"}.",
		}),
		insertConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pgstore", Name: "insert_conflicts_total",
			Help: "Commits refused, and retried, because a row inserted as new already existed: a race that the writer's locks should have excluded.",
		}),
		statements: map[string]prometheus.Counter{},
	}
	for _, k := range kinds {
		m.statements[k] = m.statementsVec.WithLabelValues(k)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.roundTrips, m.statementsVec, m.commitSeconds, m.retryable, m.connLost, m.commitUnknown, m.coalesced, m.insertConflicts}
}

// register registers the metrics on reg (nil: none).
func (m *metrics) register(reg prometheus.Registerer) error {
	if err := promreg.RegisterAll(reg, m.collectors()...); err != nil {
		return err
	}
	m.reg = reg
	return nil
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.collectors()...) }
