package lockmgr

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics are touched only when a Lock call has to wait or fails, never on
// the uncontended path.
type metrics struct {
	reg         prometheus.Registerer
	waits       prometheus.Counter
	waitSeconds prometheus.Histogram
	timeouts    prometheus.Counter
	busy        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reg: reg,
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "lockmgr", Name: "waits_total",
			Help: "Lock requests that had to wait for a conflicting holder or an earlier waiter.",
		}),
		waitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "lockmgr", Name: "wait_seconds",
			Help:    "Time spent waiting for a lock, whatever the outcome.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 12), // 10µs .. ~42s
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "lockmgr", Name: "timeouts_total",
			Help: "Lock requests that failed with store.ErrLockTimeout.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "lockmgr", Name: "busy_total",
			Help: "NoWait lock requests that failed with store.ErrLockBusy.",
		}),
	}
	if err := promreg.RegisterAll(reg, m.collectors()...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.waits, m.waitSeconds, m.timeouts, m.busy}
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.collectors()...) }
