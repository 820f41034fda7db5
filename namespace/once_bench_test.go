package namespace

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// recorded gives each operation a request id, as the RPC server does for
// every write: each then reads and writes its record (once.go).
func recorded(n int64) context.Context {
	return meta.WithRequest(context.Background(), meta.Request{Client: "nimbus-0123456789abcdef", ID: 1<<40 | uint64(n)})
}

// BenchmarkCreateDepth7Recorded is BenchmarkCreateDepth7 with a request id
// on every create and complete: the cost of exactly once on the hot path.
func BenchmarkCreateDepth7Recorded(b *testing.B) { benchCreate(b, recorded) }

// BenchmarkMkdirDepth7Recorded is BenchmarkMkdirDepth7 with a request id on
// every mkdirs.
func BenchmarkMkdirDepth7Recorded(b *testing.B) { benchMkdir(b, recorded) }

// BenchmarkMkdirExistingRecorded: mkdirs of directories that exist already,
// each with a request id of its own. The write changes nothing, but its
// record is committed (a late copy of the request must find it), so it
// costs a durable commit where an unrecorded one is a read.
func BenchmarkMkdirExistingRecorded(b *testing.B) {
	e := benchEngine(b)
	ctx := context.Background()
	for w := 0; w < 32; w++ {
		must(b, e.Mkdirs(ctx, root, fmt.Sprintf("%s/w%02d", depth7[:len(depth7)-9], w), 0))
	}
	var ids, next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := fmt.Sprintf("%s/w%02d", depth7[:len(depth7)-9], next.Add(1)%32)
		for pb.Next() {
			if err := e.Mkdirs(recorded(ids.Add(1)), root, p, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
