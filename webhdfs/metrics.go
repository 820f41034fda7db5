package webhdfs

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
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
	// A second handler on the same registry shares the first one's
	// collectors instead of failing.
	var err error
	if m.requests, err = promreg.Reuse(reg, m.requests); err != nil {
		return nil, err
	}
	if m.seconds, err = promreg.Reuse(reg, m.seconds); err != nil {
		return nil, err
	}
	if m.bytesRead, err = promreg.Reuse(reg, m.bytesRead); err != nil {
		return nil, err
	}
	if m.bytesWritten, err = promreg.Reuse(reg, m.bytesWritten); err != nil {
		return nil, err
	}
	if m.disconnects, err = promreg.Reuse(reg, m.disconnects); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) observe(op string, code int, seconds float64) {
	m.requests.WithLabelValues(op, strconv.Itoa(code)).Inc()
	m.seconds.WithLabelValues(op).Observe(seconds)
}
