package registry

import (
	"context"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// BenchmarkFullReport measures full reports of 10,000 replicas with the
// default batch (1,000): one that replaces every recorded row (10,000
// writes and 10,000 deletes) and the same report repeated, which writes
// nothing; it reports both rates and their ratio, from one run.
func BenchmarkFullReport(b *testing.B) {
	const n = 10000
	open := map[string]func(b *testing.B) store.Store{
		"pebble": func(b *testing.B) store.Store {
			st, err := pebblestore.Open(b.TempDir(), pebblestore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
		"postgres": func(b *testing.B) store.Store {
			st, err := pgstore.Open(context.Background(), pgtest.DB(b), pgstore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"pebble", "postgres"} {
		b.Run(name, func(b *testing.B) {
			st := open[name](b)
			defer st.Close()
			ctx := context.Background()
			r, err := New(st, DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			id, err := r.Register(ctx, hb("bench", "z"))
			if err != nil {
				b.Fatal(err)
			}
			report := func(base uint64) time.Duration {
				start := time.Now()
				f := r.FullReport(id)
				for i := range uint64(n) {
					if err := f.Add(ctx, Reported{Block: base + i, GenStamp: 1, Length: 1 << 27, State: store.ReplicaFinalized}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := f.Finish(ctx); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			report(0)
			var changed, same time.Duration
			round := uint64(0)
			for b.Loop() {
				round++
				changed += report(round * 2 * n) // disjoint from the last: every row replaced
				same += report(round * 2 * n)    // unchanged
			}
			b.ReportMetric(float64(n*b.N)/changed.Seconds(), "replaced-replicas/s")
			b.ReportMetric(float64(n*b.N)/same.Seconds(), "unchanged-replicas/s")
			b.ReportMetric(changed.Seconds()/same.Seconds(), "replaced/unchanged-time")
		})
	}
}
