package platform

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// localMetrics are the local platform's (subsystem platform): what the
// gateway's /metrics shows about instances and invocations.
type localMetrics struct {
	instances   *prometheus.GaugeVec   // {deployment}: starting, serving or stopping
	queue       *prometheus.GaugeVec   // {deployment}: invocations waiting
	invocations *prometheus.CounterVec // {deployment}: assigned to an instance
	refused     *prometheus.CounterVec // {deployment}: answered busy
	coldStarts  prometheus.Counter
	startFails  prometheus.Counter
	crashes     prometheus.Counter
	coldStart   prometheus.Histogram
}

func newLocalMetrics(reg prometheus.Registerer, deployments int) (*localMetrics, error) {
	m := &localMetrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "platform", Name: "instances",
			Help: "Instances of each deployment, starting, serving or stopping."}, []string{"deployment"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nimbus", Subsystem: "platform", Name: "queue_length",
			Help: "Invocations of each deployment waiting for an instance."}, []string{"deployment"}),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "invocations_total",
			Help: "Invocations handed to an instance, per deployment."}, []string{"deployment"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "refused_total",
			Help: "Invocations refused busy (queue full, or no instance in time), per deployment."}, []string{"deployment"}),
		coldStarts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "cold_starts_total",
			Help: "Instances started and serving."}),
		startFails: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "start_failures_total",
			Help: "Instance starts that failed."}),
		crashes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "nimbus", Subsystem: "platform", Name: "crashes_total",
			Help: "Instances that exited without being stopped."}),
		// 5 ms to ~20 s: a process start on PostgreSQL and etcd is tens of
		// milliseconds, a container's seconds.
		coldStart: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "nimbus", Subsystem: "platform", Name: "cold_start_seconds",
			Help: "Time from asking the host for an instance to its serving.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 13)}),
	}
	for d := range deployments {
		l := strconv.Itoa(d)
		m.instances.WithLabelValues(l)
		m.queue.WithLabelValues(l)
		m.invocations.WithLabelValues(l)
		m.refused.WithLabelValues(l)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.instances, m.queue, m.invocations, m.refused, m.coldStarts, m.startFails, m.crashes, m.coldStart} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("platform: registering the local platform's metrics: %w", err)
			}
		}
	}
	return m, nil
}
