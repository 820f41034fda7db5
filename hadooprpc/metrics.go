package hadooprpc

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts calls per method and outcome, and open connections.
type metrics struct {
	calls   *prometheus.CounterVec   // method, exception ("" on success)
	seconds *prometheus.HistogramVec // method
	conns   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "hadooprpc", Name: "calls_total",
			Help: "Hadoop RPC calls by method and Java exception class (empty on success); methods the server does not have count as \"unknown\".",
		}, []string{"method", "exception"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "hadooprpc", Name: "call_seconds",
			Help:    "Hadoop RPC call latency by method, from the frame read to the answer written.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10), // 100µs .. ~26s
		}, []string{"method"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "hadooprpc", Name: "connections",
			Help: "Open Hadoop RPC connections.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.calls, m.seconds, m.conns}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// A second server on the same registry shares the first one's
			// collectors instead of failing.
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			cs[i] = are.ExistingCollector
		}
	}
	m.calls = cs[0].(*prometheus.CounterVec)
	m.seconds = cs[1].(*prometheus.HistogramVec)
	m.conns = cs[2].(prometheus.Gauge)
	return m, nil
}
