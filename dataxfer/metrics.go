package dataxfer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics of one Server, registered on Config.Registerer.
type metrics struct {
	reg      prometheus.Registerer
	ops      *prometheus.CounterVec
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	refused  prometheus.Counter
	active   prometheus.GaugeFunc
	all      []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer, active func() float64) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "dataxfer", Name: name, Help: help})
	}
	m := &metrics{
		reg: reg,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "dataxfer", Name: "ops_total",
			Help: "Ops served, by op and result (ok, error)."}, []string{"op", "result"}),
		bytesIn:  c("bytes_received_total", "Data bytes received in WRITE_BLOCK packets (stored or skipped as already stored)."),
		bytesOut: c("bytes_sent_total", "Data bytes sent in READ_BLOCK packets."),
		refused:  c("connections_refused_total", "Connections closed at once because MaxConns were being served."),
		active: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "dataxfer", Name: "connections",
			Help: "Connections being served (HDFS's xceiver count)."}, active),
	}
	m.all = []prometheus.Collector{m.ops, m.bytesIn, m.bytesOut, m.refused, m.active}
	if err := promreg.RegisterAll(reg, m.all...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.all...) }

func (m *metrics) op(op Op, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.ops.WithLabelValues(op.String(), r).Inc()
}
