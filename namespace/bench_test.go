package namespace

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/cost"
	"github.com/nimbus-fs/nimbus/meta"
)

// depth7 is a directory of depth 6, so that its entries have depth 7 (the
// average path depth of Spotify's namespace in the HopsFS paper).
const depth7 = "/user/alice/warehouse/sales/year=2026/month=11"

func benchEngine(b *testing.B) *Engine {
	e, _ := newEngine(b)
	must(b, e.Mkdirs(context.Background(), root, depth7, 0))
	return e
}

// BenchmarkStatDepth7 measures stat of a file at depth 7, in process, with
// GOMAXPROCS goroutines.
func BenchmarkStatDepth7(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	writeFile(b, e, root, depth7+"/part-00000", []byte("x"))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Stat(ctx, root, depth7+"/part-00000"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreateDepth7 measures durable creates of empty files at depth 7
// (create + complete, each a committed transaction), 32 concurrent creators
// in their own directories so that group commit can share fsyncs.
func BenchmarkCreateDepth7(b *testing.B) {
	benchCreate(b, func(int64) context.Context { return context.Background() })
}

// benchCreate is BenchmarkCreateDepth7 with each create and complete run
// under the context ctxFor gives for a fresh number.
func benchCreate(b *testing.B, ctxFor func(int64) context.Context) {
	e := benchEngine(b)
	ctx := context.Background()
	var ids atomic.Int64
	for w := 0; w < 32; w++ {
		must(b, e.Mkdirs(ctx, root, fmt.Sprintf("%s/w%02d", depth7[:len(depth7)-9], w), 0))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 16 x GOMAXPROCS goroutines
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { reportCPU(b, processCPU(b)-cpu0) }()
	b.RunParallel(func(pb *testing.PB) {
		w := next.Add(1) % 32
		i := 0
		for pb.Next() {
			p := fmt.Sprintf("%s/w%02d/f%d-%d", depth7[:len(depth7)-9], w, next.Add(1), i)
			i++
			if _, err := e.Create(ctxFor(ids.Add(1)), root, p, meta.CreateOptions{Client: "bench"}); err != nil {
				b.Fatal(err)
			}
			if _, err := e.Complete(ctxFor(ids.Add(1)), root, p, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMkdirDepth7 measures durable mkdirs of new directories at depth
// 7, as BenchmarkCreateDepth7 creates files.
func BenchmarkMkdirDepth7(b *testing.B) {
	benchMkdir(b, func(int64) context.Context { return context.Background() })
}

func benchMkdir(b *testing.B, ctxFor func(int64) context.Context) {
	e := benchEngine(b)
	ctx := context.Background()
	var ids atomic.Int64
	for w := 0; w < 32; w++ {
		must(b, e.Mkdirs(ctx, root, fmt.Sprintf("%s/w%02d", depth7[:len(depth7)-9], w), 0))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { reportCPU(b, processCPU(b)-cpu0) }()
	b.RunParallel(func(pb *testing.PB) {
		w := next.Add(1) % 32
		for pb.Next() {
			p := fmt.Sprintf("%s/w%02d/d%d", depth7[:len(depth7)-9], w, next.Add(1))
			if err := e.Mkdirs(ctxFor(ids.Add(1)), root, p, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkList1000 measures listing a directory of 1,000 entries (one page).
func BenchmarkList1000(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		must(b, e.Mkdirs(ctx, root, fmt.Sprintf("%s/d%04d", depth7, i), 0))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := e.List(ctx, root, depth7, "", 1000)
		if err != nil || len(l.Entries) != 1000 {
			b.Fatalf("%v, %d entries", err, len(l.Entries))
		}
	}
}

// BenchmarkSerialWrite measures one client's durable metadata writes at
// depth 7, one at a time: each is a transaction committed with an fsync, so
// this is the single-client latency floor of the engine (no RPC).
func BenchmarkSerialWrite(b *testing.B) {
	ctx := context.Background()
	for _, op := range []string{"chmod", "rename", "delete", "mkdir"} {
		b.Run(op, func(b *testing.B) {
			e := benchEngine(b)
			if op != "mkdir" {
				for i := 0; i < b.N; i++ {
					writeFile(b, e, root, fmt.Sprintf("%s/f%d", depth7, i), []byte("0123456789abcdef"))
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := fmt.Sprintf("%s/f%d", depth7, i)
				var err error
				switch op {
				case "chmod":
					err = e.SetPermission(ctx, root, p, 0o600)
				case "rename":
					err = e.Rename(ctx, root, p, p+".renamed", meta.RenameOptions{})
				case "delete":
					err = e.Delete(ctx, root, p, false)
				case "mkdir":
					err = e.Mkdirs(ctx, root, p, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRenameParallel measures durable renames of files at depth 7 by
// 32 x GOMAXPROCS concurrent clients over 64 directories of 16 files, each
// file renamed back and forth (f to f.r, f.r to f): the rename workload of
// `nimbus bench micro`, in process and without the RPC, so that a profile
// shows the engine's and the store's own costs.
func BenchmarkRenameParallel(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	const dirs, files = 64, 16
	paths := make([]string, 0, dirs*files)
	for d := 0; d < dirs; d++ {
		dir := fmt.Sprintf("%s/d%02d", depth7, d)
		must(b, e.Mkdirs(ctx, root, dir, 0))
		for f := 0; f < files; f++ {
			p := fmt.Sprintf("%s/part-%05d-3f2a9c1e-77b4-4d0e", dir, f)
			writeFile(b, e, root, p, []byte("x"))
			paths = append(paths, p)
		}
	}
	// Each goroutine owns the files i, i+n, i+2n... of the permuted list, as
	// the bench's clients do, so no two rename one file.
	var next atomic.Int64
	const par = 32
	b.ReportAllocs()
	b.SetParallelism(par)
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { reportCPU(b, processCPU(b)-cpu0) }()
	b.RunParallel(func(pb *testing.PB) {
		me := int(next.Add(1) - 1)
		var mine []string
		for i := me; i < len(paths); i += par * runtime.GOMAXPROCS(0) {
			mine = append(mine, paths[i])
		}
		renamed := make([]bool, len(mine))
		for i := 0; pb.Next(); i++ {
			if len(mine) == 0 {
				continue
			}
			k := i % len(mine)
			src, dst := mine[k], mine[k]+".r"
			if renamed[k] {
				src, dst = dst, src
			}
			if err := e.Rename(ctx, root, src, dst, meta.RenameOptions{}); err != nil {
				b.Fatal(err)
			}
			renamed[k] = !renamed[k]
		}
	})
}

// processCPU is cost.ProcessCPU for a benchmark. Wall time per operation
// of a workload that waits for fsyncs says little about its cost on a noisy
// machine; CPU time per operation says more.
func processCPU(b *testing.B) time.Duration {
	d, err := cost.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// reportCPU reports cpu, spent over b.N operations, as cpu-µs/op.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkCachedReads measures stat of a file at depth 7 and a listing of
// a directory of 100 entries (List, and ListShared), over Pebble, without and with the metadata
// cache (Config.Cache), from 2×GOMAXPROCS goroutines: with the cache, both
// are answered without a store transaction (docs/ELASTIC.md, "The cache in
// the engine").
func BenchmarkCachedReads(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[cached]
		var e *Engine
		if cached {
			e, _ = newCachedEngine(b, 64<<20)
		} else {
			e, _ = newEngine(b)
		}
		ctx := context.Background()
		must(b, e.Mkdirs(ctx, root, depth7, 0))
		for i := range 100 {
			writeFile(b, e, root, fmt.Sprintf("%s/part-%05d", depth7, i), []byte("x"))
		}
		b.Run("stat/cache="+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Stat(ctx, root, depth7+"/part-00000"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("read/cache="+name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := e.Read(ctx, root, depth7+"/part-00000", 0, 1<<20); err != nil || len(d) != 1 {
						b.Fatalf("%v, %d bytes", err, len(d))
					}
				}
			})
		})
		for _, shared := range []bool{false, true} {
			// ListShared is what the RPC server and WebHDFS call: they only
			// encode the page, and a cached one needs no copy.
			list, lname := e.List, "list100"
			if shared {
				list, lname = e.ListShared, "list100shared"
			}
			b.Run(lname+"/cache="+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(2)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if l, err := list(ctx, root, depth7, "", 1000); err != nil || len(l.Entries) != 100 {
							b.Fatalf("%v, %d entries", err, len(l.Entries))
						}
					}
				})
			})
		}
	}
}
