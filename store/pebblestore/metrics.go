package pebblestore

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics: the store's own commit latency, and a collector that reads
// Pebble's counters at scrape time.
type metrics struct {
	reg           prometheus.Registerer
	commitSeconds prometheus.Histogram
	pebble        *pebbleCollector

	rowCacheHits, rowCacheMisses prometheus.Counter
	durableWaits                 prometheus.Counter
	scanSkipped, scanFlushes     prometheus.Counter
	scanCacheHits, scanCacheMiss prometheus.Counter
	failed                       prometheus.Gauge   // failstop.go
	backgroundErrors             prometheus.Counter // events.go
	rangeDeletes                 prometheus.Counter // txn.go DeleteRange
	cacheHeld                    prometheus.Gauge   // cachehold.go
}

func newMetrics(s *Store) *metrics {
	return &metrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "commit_seconds",
			Help:    "Latency of durable commits (batch apply and WAL fsync).",
			Buckets: prometheus.ExponentialBuckets(1e-5, 2.5, 14),
		}),
		pebble: newPebbleCollector(s),
		rowCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "row_cache_hits_total",
			Help: "Rows read from the row cache.",
		}),
		rowCacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "row_cache_misses_total",
			Help: "Rows read from Pebble because the row cache did not have them.",
		}),
		durableWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "durable_waits_total",
			Help: "Transactions that wrote nothing but waited for a WAL sync, because a commit they may have read from was not synced yet.",
		}),
		scanSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "scan_skipped_entries_total",
			Help: "Entries scans stepped over without returning them (tombstones, overwritten versions).",
		}),
		scanFlushes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "scan_flushes_total",
			Help: "Memtable flushes started because a scan stepped over too many dead entries.",
		}),
		scanCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "scan_cache_hits_total",
			Help: "Scans answered from the cached rows of a partition (a directory's entries, a file's chunks).",
		}),
		scanCacheMiss: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "scan_cache_misses_total",
			Help: "Scans inside one partition that read Pebble because the partition was not cached.",
		}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "failed",
			Help: "1 once the store has failed on a storage error it cannot recover from (a failed write or sync of its log, its directory removed) and refuses every operation; the server stops then.",
		}),
		backgroundErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "background_errors_total",
			Help: "Errors of Pebble's flushes and compactions (retried by Pebble; a full disk shows here first).",
		}),
		rangeDeletes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "range_deletes_total",
			Help: "Key ranges deleted with one range tombstone (a directory's entries in a recursive delete).",
		}),
		cacheHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nimbus", Subsystem: "pebblestore", Name: "block_cache_held_bytes",
			Help: "Capacity of the block cache withheld while subtree operations run, so that what they read once does not grow it (0 when none runs).",
		}),
	}
}

// register registers the metrics on reg (nil: none).
func (m *metrics) register(reg prometheus.Registerer) error {
	if err := promreg.RegisterAll(reg, m.collectors()...); err != nil {
		return err
	}
	m.reg = reg
	return nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.commitSeconds, m.pebble, m.rowCacheHits, m.rowCacheMisses, m.durableWaits, m.scanSkipped, m.scanFlushes, m.scanCacheHits, m.scanCacheMiss, m.failed, m.backgroundErrors, m.rangeDeletes, m.cacheHeld}
}

func (m *metrics) unregister() { promreg.UnregisterAll(m.reg, m.collectors()...) }

type pebbleCollector struct {
	s                                             *Store
	commits, walSyncs, walBytes, compactions      *prometheus.Desc
	cacheHits, cacheMisses, diskUsage, flushCount *prometheus.Desc
	cacheBytes, memtableBytes                     *prometheus.Desc
}

func newPebbleCollector(s *Store) *pebbleCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("nimbus", "pebblestore", name), help, nil, nil)
	}
	return &pebbleCollector{
		s:           s,
		commits:     d("commits_total", "Transactions that wrote and were synced."),
		walSyncs:    d("wal_syncs_total", "fsyncs of Pebble's write-ahead log (fewer than commits under group commit)."),
		walBytes:    d("wal_bytes_written_total", "Bytes written to the write-ahead log."),
		compactions: d("compactions_total", "Pebble compactions."),
		flushCount:  d("flushes_total", "Pebble memtable flushes."),
		cacheHits:   d("block_cache_hits_total", "Block cache hits."),
		cacheMisses: d("block_cache_misses_total", "Block cache misses."),
		diskUsage:   d("disk_usage_bytes", "Bytes of every file of the database."),
		cacheBytes:  d("block_cache_bytes", "Bytes held by the block cache (outside the Go heap)."),
		memtableBytes: d("memtable_bytes",
			"Bytes of the memtables, the one being written and those waiting for their flush (outside the Go heap)."),
	}
}

func (c *pebbleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.commits, c.walSyncs, c.walBytes, c.compactions, c.flushCount, c.cacheHits, c.cacheMisses, c.diskUsage, c.cacheBytes, c.memtableBytes} {
		ch <- d
	}
}

func (c *pebbleCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.acquire() != nil {
		return
	}
	m := c.s.db.Metrics()
	c.s.release()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	counter(c.commits, float64(c.s.commits.Load()))
	counter(c.walSyncs, float64(c.s.walSyncs.Load()))
	counter(c.walBytes, float64(m.WAL.BytesWritten))
	counter(c.compactions, float64(m.Compact.Count))
	counter(c.flushCount, float64(m.Flush.Count))
	counter(c.cacheHits, float64(m.BlockCache.Hits))
	counter(c.cacheMisses, float64(m.BlockCache.Misses))
	ch <- prometheus.MustNewConstMetric(c.diskUsage, prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
	ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(m.BlockCache.Size))
	ch <- prometheus.MustNewConstMetric(c.memtableBytes, prometheus.GaugeValue, float64(m.MemTable.Size))
}

// metricsRowCacheHits reads the row cache hit counter (for tests).
func (s *Store) metricsRowCacheHits() float64 {
	var m dto.Metric
	_ = s.metrics.rowCacheHits.Write(&m)
	return m.GetCounter().GetValue()
}

// metricsRowCacheMisses reads the row cache miss counter (for tests).
func (s *Store) metricsRowCacheMisses() float64 {
	var m dto.Metric
	_ = s.metrics.rowCacheMisses.Write(&m)
	return m.GetCounter().GetValue()
}
