package datanode

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics of a DataNode (nimbus_datanode_*).
type metrics struct {
	heartbeats         prometheus.Counter
	heartbeatFailures  prometheus.Counter
	fullReports        prometheus.Counter
	fullReportFailures prometheus.Counter
	fullReportSeconds  prometheus.Gauge
	incrReports        prometheus.Counter
	incrChanges        prometheus.Counter
	incrFailures       prometheus.Counter
	replicas           prometheus.Gauge
	capacity           prometheus.Gauge
	used               prometheus.Gauge
	remaining          prometheus.Gauge
	full               prometheus.Gauge
	failed             prometheus.Gauge
	commands           prometheus.Counter
	commandsRefused    prometheus.Counter
	all                []prometheus.Collector
	reg                prometheus.Registerer
}

func newMetrics(reg prometheus.Registerer, pending, transfers func() float64) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "datanode", Name: name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "datanode", Name: name, Help: help})
	}
	m := &metrics{
		heartbeats:         c("heartbeats_total", "Heartbeats recorded in the store."),
		heartbeatFailures:  c("heartbeat_failures_total", "Heartbeats that failed."),
		fullReports:        c("full_reports_total", "Full block reports completed."),
		fullReportFailures: c("full_report_failures_total", "Full block reports that failed (sent again later)."),
		fullReportSeconds:  g("full_report_last_seconds", "How long the last full block report took."),
		incrReports:        c("incremental_reports_total", "Incremental block reports sent."),
		incrChanges:        c("incremental_changes_total", "Replica changes sent in incremental block reports."),
		incrFailures:       c("incremental_report_failures_total", "Incremental block reports that failed (their changes are sent again)."),
		replicas:           g("replicas", "Replicas held, at the last full report or usage count."),
		capacity:           g("capacity_bytes", "Bytes of the volume usable for blocks (its size less the reserve)."),
		used:               g("used_bytes", "Bytes the replicas take."),
		remaining:          g("remaining_bytes", "Free bytes for blocks (free space less the reserve)."),
		full:               g("full", "1 when free space is below the reserve."),
		failed:             g("failed", "1 when the storage directory failed its check."),
		commands:           c("commands_total", "Commands (member requests on the HTTP port) served."),
		commandsRefused:    c("commands_refused_total", "Commands refused for their signature."),
		reg:                reg,
	}
	m.all = []prometheus.Collector{m.heartbeats, m.heartbeatFailures, m.fullReports, m.fullReportFailures, m.fullReportSeconds,
		m.incrReports, m.incrChanges, m.incrFailures, m.replicas, m.capacity, m.used, m.remaining, m.full, m.failed,
		m.commands, m.commandsRefused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "datanode", Name: "pending_changes",
			Help: "Replica changes waiting for an incremental block report."}, pending),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "datanode", Name: "transfers",
			Help: "Data transfers in flight."}, transfers),
	}
	if err := promreg.RegisterAll(reg, m.all...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.all...) }

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
