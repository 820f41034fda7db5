package dfsio

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what a process's streams do; one is shared by every
// stream of a client (WriterConfig.Metrics, ReaderConfig.Metrics). A nil
// *Metrics counts nothing.
type Metrics struct {
	bytesWritten prometheus.Counter
	bytesRead    prometheus.Counter
	recoveries   prometheus.Counter
	replaced     prometheus.Counter
	abandoned    prometheus.Counter
	failovers    prometheus.Counter
	badReported  prometheus.Counter
}

// NewMetrics registers the streams' metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "dfsio", Name: name, Help: help})
	}
	m := &Metrics{
		bytesWritten: c("bytes_written_total", "Bytes written to DataNode pipelines (sent again by a recovery: counted once)."),
		bytesRead:    c("bytes_read_total", "Bytes read from DataNodes and returned."),
		recoveries:   c("pipeline_recoveries_total", "Pipeline recoveries after a DataNode of a write pipeline failed."),
		replaced:     c("datanodes_replaced_total", "DataNodes added to a recovered pipeline in place of failed ones."),
		abandoned:    c("blocks_abandoned_total", "Blocks abandoned because their pipeline could not be set up."),
		failovers:    c("read_failovers_total", "Reads moved to another replica after a DataNode failed."),
		badReported:  c("bad_replicas_reported_total", "Replicas reported corrupt to the NameNode after a checksum error."),
	}
	if reg != nil {
		all := []prometheus.Collector{m.bytesWritten, m.bytesRead, m.recoveries, m.replaced, m.abandoned, m.failovers, m.badReported}
		for i, col := range all {
			if err := reg.Register(col); err != nil {
				for _, done := range all[:i] {
					reg.Unregister(done)
				}
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) inc(c func(*Metrics) prometheus.Counter, n int) {
	if m != nil && n > 0 {
		c(m).Add(float64(n))
	}
}

func mBytesWritten(m *Metrics) prometheus.Counter { return m.bytesWritten }
func mBytesRead(m *Metrics) prometheus.Counter    { return m.bytesRead }
func mRecoveries(m *Metrics) prometheus.Counter   { return m.recoveries }
func mReplaced(m *Metrics) prometheus.Counter     { return m.replaced }
func mAbandoned(m *Metrics) prometheus.Counter    { return m.abandoned }
func mFailovers(m *Metrics) prometheus.Counter    { return m.failovers }
func mBadReported(m *Metrics) prometheus.Counter  { return m.badReported }
