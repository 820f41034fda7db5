package statuspage

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The status page's charts (statuspage.go) plot a ring of samples, one a
// second, of what the server's own Prometheus collectors count: requests
// and latency histograms per operation (RPC method or WebHDFS op), the
// metadata cache's hits and misses, and instances per deployment. The ring
// is a pure part in the style of the protocol cores: it holds no goroutine
// and reads no clock; the server's ticker reads the counters and hands
// them to Sample with the time.

// seriesCapacity is how many samples the ring keeps: 15 minutes, one a
// second. GET /status/series answers up to that much.
const Capacity = 15 * 60

// seriesTopOps is how many operations the page's per-operation charts show
// by name; the rest are summed as "other" in the throughput chart.
const seriesTopOps = 6

// histBucket is one cumulative bucket of a latency histogram: Count
// observations took at most Upper seconds (+Inf for the last).
type Bucket struct {
	Upper float64
	Count uint64
}

// opCounts are one operation's cumulative counts: its latency histogram's
// buckets (Count of the last, +Inf, is the operation's requests).
type OpCounts struct {
	Buckets []Bucket
}

// requests is the number of observations the histogram holds.
func (o OpCounts) requests() uint64 {
	if len(o.Buckets) == 0 {
		return 0
	}
	return o.Buckets[len(o.Buckets)-1].Count
}

// metricsSnapshot is what one tick reads: cumulative counters (Sample
// takes their difference from the previous tick's) and gauges.
type Snapshot struct {
	Ops         map[string]OpCounts // by "rpc stat", "webhdfs GETFILESTATUS", ...
	Cache       bool                // a metadata cache is on
	CacheHits   uint64
	CacheMisses uint64
	// Instances counts live instances per deployment (a gauge).
	Instances map[int]int
}

// seriesPoint is one sample: what happened over the interval that ended
// at At.
type Point struct {
	At       time.Time
	Interval time.Duration
	Requests map[string]uint64  // per operation, in the interval
	P99      map[string]float64 // seconds, per operation with requests in the interval
	// Cache hits and misses in the interval (both 0 without a cache or
	// without lookups: no ratio).
	Hits, Misses uint64
	Instances    map[int]int
}

// seriesRing keeps the last seriesCapacity samples. Safe for concurrent
// use: one goroutine samples, HTTP handlers read.
type Ring struct {
	mu struct {
		sync.Mutex
		points []Point // oldest first, at most seriesCapacity
		prev   Snapshot
		prevAt time.Time
		cache  bool
	}
}

// Sample records the counters read at now. The first call only remembers
// them: a point is the difference between two reads. A counter that went
// down (a collector was replaced) counts as no change.
func (r *Ring) Sample(now time.Time, s Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, prevAt := r.mu.prev, r.mu.prevAt
	r.mu.prev, r.mu.prevAt, r.mu.cache = s, now, s.Cache
	if prevAt.IsZero() || !now.After(prevAt) {
		return
	}
	p := Point{At: now, Interval: now.Sub(prevAt), Requests: map[string]uint64{}, P99: map[string]float64{},
		Hits: counterDelta(s.CacheHits, prev.CacheHits), Misses: counterDelta(s.CacheMisses, prev.CacheMisses), Instances: s.Instances}
	for op, c := range s.Ops {
		d := deltaBuckets(c.Buckets, prev.Ops[op].Buckets)
		if n := d[len(d)-1].Count; n > 0 {
			p.Requests[op] = n
			p.P99[op] = bucketQuantile(0.99, d)
		}
	}
	if len(r.mu.points) == Capacity {
		r.mu.points = slices.Delete(r.mu.points, 0, 1)
	}
	r.mu.points = append(r.mu.points, p)
}

func counterDelta(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// deltaBuckets returns cur minus prev bucket by bucket; prev may be empty
// (an operation seen for the first time) or of another layout (taken as
// empty).
func deltaBuckets(cur, prev []Bucket) []Bucket {
	d := make([]Bucket, len(cur))
	same := len(prev) == len(cur)
	for i, b := range cur {
		d[i] = b
		if same && prev[i].Upper == b.Upper {
			d[i].Count = counterDelta(b.Count, prev[i].Count)
		}
	}
	return d
}

// bucketQuantile estimates the q-quantile of cumulative buckets as Prometheus's
// histogram_quantile does: linear within the bucket the rank falls in,
// the first bucket starting at 0, and the highest finite bound when the
// rank falls in the +Inf bucket.
func bucketQuantile(q float64, b []Bucket) float64 {
	n := b[len(b)-1].Count
	if n == 0 {
		return math.NaN()
	}
	rank := q * float64(n)
	lower, below := 0.0, uint64(0)
	for i, x := range b {
		if float64(x.Count) >= rank {
			if math.IsInf(x.Upper, 1) {
				if i == 0 {
					return math.NaN()
				}
				return b[i-1].Upper
			}
			in := x.Count - below
			if in == 0 {
				return x.Upper
			}
			return lower + (x.Upper-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = x.Upper, x.Count
	}
	return lower
}

// jsonNum is a float that encodes NaN as JSON null (no value: no requests, no
// lookups).
type Num float64

func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 4, 64), nil
}

// seriesJSON is GET /status/series's answer (docs/OPERATIONS.md, "The
// status page"): arrays aligned with T, oldest first.
type Series struct {
	IntervalS float64 `json:"interval_s"`
	Minutes   int     `json:"minutes"`
	T         []int64 `json:"t"` // sample times, Unix milliseconds
	// Ops are the busiest operations of the window, busiest first; Rate
	// and P99MS have one array for each, Rate also "other" (the rest
	// together) when there are more.
	Ops   []string         `json:"ops"`
	Rate  map[string][]Num `json:"rate"`   // requests per second
	P99MS map[string][]Num `json:"p99_ms"` // null: no requests in the interval
	// Cache: whether a metadata cache is on; CacheHitRatio per interval,
	// null without lookups.
	Cache               bool  `json:"cache"`
	CacheHitRatio       []Num `json:"cache_hit_ratio"`
	CacheHitRatioWindow Num   `json:"cache_hit_ratio_window"`
	// Instances per deployment (the key is the deployment number).
	Instances map[string][]Num `json:"instances"`
	Requests  uint64           `json:"requests"` // in the window, all operations
}

// Series returns the samples taken after since, at most seriesCapacity.
func (r *Ring) Series(since time.Time, minutes int) Series {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := sort.Search(len(r.mu.points), func(i int) bool { return r.mu.points[i].At.After(since) })
	pts := r.mu.points[i:]
	out := Series{IntervalS: 1, Minutes: minutes, T: make([]int64, len(pts)), Rate: map[string][]Num{}, P99MS: map[string][]Num{},
		Cache: r.mu.cache, CacheHitRatio: make([]Num, len(pts)), Instances: map[string][]Num{}}
	total := map[string]uint64{}
	deps := map[int]bool{}
	var hits, misses uint64
	for _, p := range pts {
		for op, n := range p.Requests {
			total[op] += n
			out.Requests += n
		}
		for d := range p.Instances {
			deps[d] = true
		}
		hits, misses = hits+p.Hits, misses+p.Misses
	}
	out.CacheHitRatioWindow = hitRatio(hits, misses)
	for op := range total {
		out.Ops = append(out.Ops, op)
	}
	sort.Slice(out.Ops, func(i, j int) bool {
		a, b := out.Ops[i], out.Ops[j]
		return total[a] > total[b] || total[a] == total[b] && a < b
	})
	rest := len(out.Ops) > seriesTopOps
	if rest {
		out.Ops = out.Ops[:seriesTopOps]
	}
	named := map[string]bool{}
	for _, op := range out.Ops {
		named[op] = true
		out.Rate[op] = make([]Num, len(pts))
		out.P99MS[op] = make([]Num, len(pts))
	}
	if rest {
		out.Rate["other"] = make([]Num, len(pts))
	}
	for d := range deps {
		out.Instances[strconv.Itoa(d)] = make([]Num, len(pts))
	}
	for k, p := range pts {
		out.T[k] = p.At.UnixMilli()
		secs := p.Interval.Seconds()
		for _, op := range out.Ops {
			out.Rate[op][k] = Num(float64(p.Requests[op]) / secs)
			out.P99MS[op][k] = Num(math.NaN())
			if q, ok := p.P99[op]; ok {
				out.P99MS[op][k] = Num(q * 1000)
			}
		}
		if rest {
			var n uint64
			for op, c := range p.Requests {
				if !named[op] {
					n += c
				}
			}
			out.Rate["other"][k] = Num(float64(n) / secs)
		}
		out.CacheHitRatio[k] = hitRatio(p.Hits, p.Misses)
		for d := range deps {
			out.Instances[strconv.Itoa(d)][k] = Num(p.Instances[d])
		}
	}
	return out
}

// Last returns the newest sample, false before the second Sample.
func (r *Ring) Last() (Point, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mu.points) == 0 {
		return Point{}, false
	}
	return r.mu.points[len(r.mu.points)-1], true
}

func hitRatio(hits, misses uint64) Num {
	if hits+misses == 0 {
		return Num(math.NaN())
	}
	return Num(float64(hits) / float64(hits+misses))
}

var _ json.Marshaler = Num(0)
