package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// 32 concurrent callers on a 2-core machine: parallelism 16 x GOMAXPROCS 2.
func parallel32(b *testing.B) { b.SetParallelism(max(1, 32/max(1, testingProcs()))) }

func BenchmarkEchoParallel(b *testing.B) {
	c := dial(b, serve(b, metatest.NewMemFS(), nil), client.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	parallel32(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Echo(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEchoHTTPParallel(b *testing.B) {
	c := dial(b, serve(b, metatest.NewMemFS(), nil), client.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	parallel32(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.EchoHTTP(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkEchoSerial(b *testing.B) {
	c := dial(b, serve(b, metatest.NewMemFS(), nil), client.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Echo(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatParallel: stat of a depth-7 path on the real engine over the
// RPC, 32 callers.
func BenchmarkStatParallel(b *testing.B) {
	e := engine(b)
	c := dial(b, serve(b, e, nil), client.Options{})
	ctx := context.Background()
	u := meta.User{Name: "root"}
	p := "/a/b/c/d/e/f/g"
	if err := c.Mkdirs(ctx, u, p, 0o755); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	parallel32(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Stat(ctx, u, p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCreateParallel: durable creates of empty files at depth 7 over the
// RPC (create + complete, as a client closing an empty file does), 32
// callers each in its own directory.
func BenchmarkCreateParallel(b *testing.B) {
	e := engine(b)
	c := dial(b, serve(b, e, nil), client.Options{})
	ctx := context.Background()
	u := meta.User{Name: "root"}
	const dir = "/a/b/c/d/e/f"
	for w := 0; w < 64; w++ {
		if err := c.Mkdirs(ctx, u, fmt.Sprintf("%s/w%02d", dir, w), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var worker atomic.Int64
	b.ReportAllocs()
	parallel32(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		for i := 0; pb.Next(); i++ {
			p := fmt.Sprintf("%s/w%02d/f%d", dir, w%64, i)
			if _, err := c.Create(ctx, u, p, meta.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Complete(ctx, u, p, c.ClientName()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkList1000: one page of a 1,000-entry directory over the RPC.
func BenchmarkList1000(b *testing.B) {
	e := engine(b)
	c := dial(b, serve(b, e, nil), client.Options{})
	ctx := context.Background()
	u := meta.User{Name: "root"}
	const dir = "/a/b/c/d/e/f"
	for i := 0; i < 1000; i++ {
		if err := c.Mkdirs(ctx, u, fmt.Sprintf("%s/d%04d", dir, i), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := c.List(ctx, u, dir, "", 1000)
		if err != nil || len(l.Entries) != 1000 {
			b.Fatalf("%v (%d entries)", err, len(l.Entries))
		}
	}
}

// BenchmarkStatRoute: the stat of BenchmarkStatParallel, serial and with
// 32 callers, with Options.Route off and on, against a server of one
// deployment (what routing costs where it cannot help: docs/ELASTIC.md,
// "Request routing").
func BenchmarkStatRoute(b *testing.B) {
	e := engine(b)
	addr := serve(b, e, nil)
	ctx := context.Background()
	u := meta.User{Name: "root"}
	p := "/a/b/c/d/e/f/g"
	for _, route := range []bool{false, true} {
		c := dial(b, addr, client.Options{Route: route})
		if err := c.Mkdirs(ctx, u, p, 0o755); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("serial/route=%v", route), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Stat(ctx, u, p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("parallel/route=%v", route), func(b *testing.B) {
			b.ReportAllocs()
			parallel32(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Stat(ctx, u, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
