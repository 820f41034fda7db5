package cache

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/internal/promreg"
)

// metrics are the cache's Prometheus metrics (namespace nimbus, subsystem
// cache). Counters are safe for concurrent use; the gauges read fields the
// cache keeps under its lock.
type metrics struct {
	// Hits and misses are counted on every lookup, from every core: on
	// stripes of their own cache lines rather than on one Prometheus
	// counter, whose one line every lookup would write
	// (BenchmarkGetParallel).
	hitEntry, missEntry, hitListing, missListing, hitAttrs, missAttrs striped
	hitContent, missContent                                           striped

	evictions     *prometheus.CounterVec
	invalidations *prometheus.CounterVec // kind: key, inode, listing, prefix
	fillsDropped  prometheus.Counter

	evictEntry, evictListing                prometheus.Counter
	invKey, invInode, invListing, invPrefix prometheus.Counter
	invAttrs                                prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, c *Cache) (*metrics, error) {
	const ns, sub = "nimbus", "cache"
	m := &metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "evictions_total",
			Help: "Entries and pages evicted to stay within the byte budget (an evicted directory takes its cached subtree with it), by kind."}, []string{"kind"}),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "invalidations_total",
			Help: "Invalidation targets received, by kind (key: parent id and name; inode: an inode id; listing: a directory's pages; attrs: an inode's hot attributes; prefix: a subtree)."}, []string{"kind"}),
		fillsDropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fills_dropped_total",
			Help: "Fills not installed because an invalidation that could cover them arrived after they began (the fill-race rule)."}),
	}
	m.evictEntry, m.evictListing = m.evictions.WithLabelValues("entry"), m.evictions.WithLabelValues("listing")
	m.invKey, m.invInode = m.invalidations.WithLabelValues("key"), m.invalidations.WithLabelValues("inode")
	m.invListing, m.invPrefix = m.invalidations.WithLabelValues("listing"), m.invalidations.WithLabelValues("prefix")
	m.invAttrs = m.invalidations.WithLabelValues("attrs")
	if reg == nil {
		return m, nil
	}
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "bytes",
		Help: "Bytes the cache holds, as counted against its budget."}, func() float64 { return float64(c.Stats().Bytes) })
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "entries",
		Help: "Resolution entries (inodes) the cache holds."}, func() float64 { return float64(c.Stats().Entries) })
	pages := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "listing_pages",
		Help: "Listing pages the cache holds."}, func() float64 { return float64(c.Stats().Pages) })
	lookups := func(name, help, kind string, s *striped) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help,
			ConstLabels: prometheus.Labels{"kind": kind}}, func() float64 { return float64(s.sum()) })
	}
	const hitHelp = "Lookups answered from the cache, by kind (entry: one path component; listing: one page; attrs: an inode's hot attributes; content: a small file's bytes)."
	const missHelp = "Lookups the cache could not answer, by kind (entry: a path's first uncached component; listing: a page; attrs: an inode's hot attributes; content: a small file's bytes)."
	if err := promreg.RegisterAll(reg,
		lookups("hits_total", hitHelp, "entry", &m.hitEntry), lookups("hits_total", hitHelp, "listing", &m.hitListing),
		lookups("misses_total", missHelp, "entry", &m.missEntry), lookups("misses_total", missHelp, "listing", &m.missListing),
		lookups("hits_total", hitHelp, "attrs", &m.hitAttrs), lookups("misses_total", missHelp, "attrs", &m.missAttrs),
		lookups("hits_total", hitHelp, "content", &m.hitContent), lookups("misses_total", missHelp, "content", &m.missContent),
		m.evictions, m.invalidations, m.fillsDropped, bytes, entries, pages); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, errors.New("cache: metrics already registered (one cache per registerer)")
		}
		return nil, err
	}
	return m, nil
}

const stripes = 16

// striped is a counter spread over cache lines; add picks a line by a hash
// the caller has at hand.
type striped [stripes]struct {
	n atomic.Uint64
	_ [56]byte
}

func (s *striped) add(h, n uint64) { s[h%stripes].n.Add(n) }

func (s *striped) sum() uint64 {
	var t uint64
	for i := range s {
		t += s[i].n.Load()
	}
	return t
}
