package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc/rpctest"
)

// 32 concurrent callers on a 2-core machine: parallelism 16 x GOMAXPROCS 2.
func parallel32(b *testing.B) { b.SetParallelism(max(1, 32/max(1, testingProcs()))) }

func BenchmarkEchoParallel(b *testing.B) {
	c := dial(b, serve(b, rpctest.NewMemFS(), nil), client.Options{})
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
	c := dial(b, serve(b, rpctest.NewMemFS(), nil), client.Options{})
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
	c := dial(b, serve(b, rpctest.NewMemFS(), nil), client.Options{})
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

var _ = fmt.Sprint
