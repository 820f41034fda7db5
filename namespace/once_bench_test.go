package namespace

import (
	"context"
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
