package statuspage

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func testBuckets(uppers []float64, counts ...uint64) []Bucket {
	b := make([]Bucket, len(counts))
	for i, c := range counts {
		u := math.Inf(1)
		if i < len(uppers) {
			u = uppers[i]
		}
		b[i] = Bucket{Upper: u, Count: c}
	}
	return b
}

func TestQuantile(t *testing.T) {
	up := []float64{0.001, 0.01, 0.1}
	for _, c := range []struct {
		name string
		b    []Bucket
		want float64 // NaN: none
	}{
		{"empty", testBuckets(up, 0, 0, 0, 0), math.NaN()},
		{"all in the first bucket", testBuckets(up, 100, 100, 100, 100), 0.00099},
		{"rank in the second bucket", testBuckets(up, 50, 100, 100, 100), 0.001 + 0.009*(99-50)/50},
		{"rank in +Inf: the highest finite bound", testBuckets(up, 0, 0, 98, 100), 0.1},
		{"one observation", testBuckets(up, 0, 1, 1, 1), 0.001 + 0.009*0.99},
	} {
		got := bucketQuantile(0.99, c.b)
		if math.IsNaN(c.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: p99 = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSeriesRing: points are differences between reads; the p99 is of the
// interval's observations only; a counter that goes down counts as no
// change; the ring keeps seriesCapacity points; Series picks the window,
// the busiest operations and "other".
func TestSeriesRing(t *testing.T) {
	up := []float64{0.001, 0.01, 0.1}
	t0 := time.Unix(1_700_000_000, 0)
	var r Ring
	snap := func(stat, list []Bucket, hits, misses uint64) Snapshot {
		return Snapshot{Ops: map[string]OpCounts{"rpc stat": {stat}, "rpc list": {list}}, Cache: true,
			CacheHits: hits, CacheMisses: misses, Instances: map[int]int{0: 1, 2: 3}}
	}
	r.Sample(t0, snap(testBuckets(up, 10, 10, 10, 10), testBuckets(up, 0, 0, 0, 0), 5, 5))
	if _, ok := r.Last(); ok {
		t.Fatal("a point after one read")
	}
	// 100 stats in the next second, all slow (0.01..0.1 s); 2 lists.
	r.Sample(t0.Add(time.Second), snap(testBuckets(up, 10, 10, 110, 110), testBuckets(up, 2, 2, 2, 2), 35, 15))
	p, ok := r.Last()
	if !ok || p.Requests["rpc stat"] != 100 || p.Requests["rpc list"] != 2 || p.Hits != 30 || p.Misses != 10 {
		t.Fatalf("point %+v", p)
	}
	if q := p.P99["rpc stat"]; q < 0.01 || q > 0.1 {
		t.Errorf("p99 of the interval's stats = %v, want within (0.01, 0.1]: the earlier fast ones are not in it", q)
	}
	// The counters reset (went down): no requests, no negative rate.
	r.Sample(t0.Add(2*time.Second), snap(testBuckets(up, 1, 1, 1, 1), testBuckets(up, 2, 2, 2, 2), 0, 0))
	if p, _ := r.Last(); len(p.Requests) != 0 || p.Hits != 0 || p.Misses != 0 {
		t.Errorf("after a reset: %+v", p)
	}
	s := r.Series(t0, 1)
	if len(s.T) != 2 || s.Rate["rpc stat"][0] != 100 || s.Rate["rpc list"][0] != 2 || s.Ops[0] != "rpc stat" || s.Requests != 102 {
		t.Errorf("series %+v", s)
	}
	if !math.IsNaN(float64(s.P99MS["rpc stat"][1])) || !math.IsNaN(float64(s.CacheHitRatio[1])) {
		t.Errorf("an interval without requests or lookups has a p99 or ratio: %+v", s)
	}
	if s.CacheHitRatio[0] != 0.75 || s.CacheHitRatioWindow != 0.75 || s.Instances["2"][1] != 3 {
		t.Errorf("series %+v", s)
	}
	if got := r.Series(t0.Add(time.Second), 1); len(got.T) != 1 {
		t.Errorf("Series after the first point: %d points", len(got.T))
	}
	js, err := json.Marshal(s)
	if err != nil || !strings.Contains(string(js), `"p99_ms":{"rpc list":[0.99,null]`) {
		t.Errorf("JSON %s, %v", js, err)
	}

	// Many operations: the busiest by name, the rest as "other"; the ring
	// is bounded.
	var r2 Ring
	ops := func(n uint64) Snapshot {
		m := Snapshot{Ops: map[string]OpCounts{}}
		for i := range seriesTopOps + 3 {
			m.Ops[fmt.Sprintf("op%d", i)] = OpCounts{testBuckets(up, 0, 0, 0, n*uint64(i+1))}
		}
		return m
	}
	for i := range Capacity + 10 {
		r2.Sample(t0.Add(time.Duration(i)*time.Second), ops(uint64(i)))
	}
	s = r2.Series(time.Time{}, 15)
	if len(s.T) != Capacity || len(s.Ops) != seriesTopOps || s.Ops[0] != fmt.Sprintf("op%d", seriesTopOps+2) {
		t.Errorf("%d points, ops %v", len(s.T), s.Ops)
	}
	if got, want := float64(s.Rate["other"][0]), float64(1+2+3); got != want {
		t.Errorf("other = %v, want %v", got, want)
	}
}
