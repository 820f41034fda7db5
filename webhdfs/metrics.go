package webhdfs

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts requests per op and status, and the bytes moved.
type metrics struct {
	requests     *prometheus.CounterVec   // op, code
	seconds      *prometheus.HistogramVec // op
	bytesRead    prometheus.Counter
	bytesWritten prometheus.Counter
	disconnects  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "webhdfs", Name: "requests_total",
			Help: "WebHDFS requests by operation and HTTP status code.",
		}, []string{"op", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "webhdfs", Name: "request_seconds",
			Help:    "WebHDFS request latency by operation, body transfer included.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10), // 100µs .. ~26s
		}, []string{"op"}),
		bytesRead: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "webhdfs", Name: "read_bytes_total",
			Help: "File content bytes sent by OPEN.",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "webhdfs", Name: "written_bytes_total",
			Help: "File content bytes accepted by CREATE and APPEND.",
		}),
		disconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "webhdfs", Name: "client_disconnects_total",
			Help: "Requests that failed because the client went away, cut its upload short or stalled it.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.requests, m.seconds, m.bytesRead, m.bytesWritten, m.disconnects}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// A second handler on the same registry shares the first one's
			// collectors instead of failing.
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			cs[i] = are.ExistingCollector
		}
	}
	m.requests = cs[0].(*prometheus.CounterVec)
	m.seconds = cs[1].(*prometheus.HistogramVec)
	m.bytesRead = cs[2].(prometheus.Counter)
	m.bytesWritten = cs[3].(prometheus.Counter)
	m.disconnects = cs[4].(prometheus.Counter)
	return m, nil
}

func (m *metrics) observe(op string, code int, seconds float64) {
	m.requests.WithLabelValues(op, strconv.Itoa(code)).Inc()
	m.seconds.WithLabelValues(op).Observe(seconds)
}
