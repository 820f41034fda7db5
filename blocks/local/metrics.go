package local

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics of one Store, registered on Config.Registerer.
type metrics struct {
	reg              prometheus.Registerer
	bytesWritten     prometheus.Counter
	bytesRead        prometheus.Counter
	checksumFailures prometheus.Counter
	fsyncs           prometheus.Counter
	recoveries       prometheus.Counter
	all              []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "blocks", Name: name, Help: help})
	}
	m := &metrics{
		reg:              reg,
		bytesWritten:     c("bytes_written_total", "Data bytes written to replicas (before sync)."),
		bytesRead:        c("bytes_read_total", "Verified data bytes returned to readers."),
		checksumFailures: c("checksum_failures_total", "Chunks whose stored bytes did not match their CRC32C."),
		fsyncs:           c("fsyncs_total", "fsync/fdatasync calls on replica files and directories."),
		recoveries:       c("recoveries_total", "Replicas finalized by Recover."),
	}
	m.all = []prometheus.Collector{m.bytesWritten, m.bytesRead, m.checksumFailures, m.fsyncs, m.recoveries}
	if err := promreg.RegisterAll(reg, m.all...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.all...) }
