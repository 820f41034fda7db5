package cache

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cache's Prometheus metrics (namespace nimbus, subsystem
// cache). Counters are safe for concurrent use; the gauges read fields the
// cache keeps under its lock.
type metrics struct {
	hits          *prometheus.CounterVec // kind: entry, listing
	misses        *prometheus.CounterVec
	evictions     *prometheus.CounterVec
	invalidations *prometheus.CounterVec // kind: key, inode, listing, prefix
	fillsDropped  prometheus.Counter

	hitEntry, missEntry, hitListing, missListing prometheus.Counter
	evictEntry, evictListing                     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, c *Cache) (*metrics, error) {
	const ns, sub = "nimbus", "cache"
	m := &metrics{
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hits_total",
			Help: "Lookups answered from the cache, by kind (entry: one path component; listing: one page)."}, []string{"kind"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "misses_total",
			Help: "Lookups the cache could not answer, by kind (entry, listing)."}, []string{"kind"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "evictions_total",
			Help: "Entries and pages evicted to stay within the byte budget (an evicted directory takes its cached subtree with it), by kind."}, []string{"kind"}),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "invalidations_total",
			Help: "Invalidation targets received, by kind (key: parent id and name; inode: an inode id; listing: a directory's pages; prefix: a subtree)."}, []string{"kind"}),
		fillsDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fills_dropped_total",
			Help: "Fills not installed because an invalidation that could cover them arrived after they began (the fill-race rule)."}),
	}
	m.hitEntry, m.hitListing = m.hits.WithLabelValues("entry"), m.hits.WithLabelValues("listing")
	m.missEntry, m.missListing = m.misses.WithLabelValues("entry"), m.misses.WithLabelValues("listing")
	m.evictEntry, m.evictListing = m.evictions.WithLabelValues("entry"), m.evictions.WithLabelValues("listing")
	for _, k := range []string{"key", "inode", "listing", "prefix"} {
		m.invalidations.WithLabelValues(k)
	}
	if reg == nil {
		return m, nil
	}
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "bytes",
		Help: "Bytes the cache holds, as counted against its budget."}, func() float64 { return float64(c.Stats().Bytes) })
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "entries",
		Help: "Resolution entries (inodes) the cache holds."}, func() float64 { return float64(c.Stats().Entries) })
	pages := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "listing_pages",
		Help: "Listing pages the cache holds."}, func() float64 { return float64(c.Stats().Pages) })
	for _, col := range []prometheus.Collector{m.hits, m.misses, m.evictions, m.invalidations, m.fillsDropped, bytes, entries, pages} {
		if err := reg.Register(col); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("cache: metrics already registered (one cache per registerer)")
			}
			return nil, err
		}
	}
	return m, nil
}
