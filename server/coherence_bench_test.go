package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
)

// BenchmarkSharedCreates: creates through two servers on one PostgreSQL
// database and one etcd, 8 goroutines alternating between them, with
// caches (cached) and without (uncached): what coherence costs a write
// (docs/ELASTIC.md, "Servers without a cache").
func BenchmarkSharedCreates(b *testing.B) {
	for _, tc := range []struct {
		name  string
		bytes int64
	}{{"uncached", 0}, {"cached", 4 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			eps := etcdtest.Endpoints(b)
			db := pgtest.DB(b)
			coord := fmt.Sprintf("etcd://%s/bench-creates-%d", strings.Join(eps, ","), time.Now().UnixNano())
			var fs [2]*Server
			for i := range fs {
				cfg := DefaultConfig()
				cfg.DataDir = b.TempDir()
				cfg.Listen = "127.0.0.1:0"
				cfg.StoreURL = db
				cfg.Coordinator = coord
				cfg.Namespace.Superuser = "root"
				cfg.CacheBytes = tc.bytes
				s, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Stop(context.Background()) })
				fs[i] = s
			}
			ctx := context.Background()
			root := meta.User{Name: "root"}
			if err := fs[0].Engine().Mkdirs(ctx, root, "/d", 0o755); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := fs[i%2].Engine().CreateFile(ctx, root, fmt.Sprintf("/d/f%d", i), meta.CreateOptions{Client: "c"}, nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
