package lockmgr

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// BenchmarkStat is a stat's locking: the root shared (read-committed
// ancestors take nothing), the file shared.
func BenchmarkStat(b *testing.B) {
	m := newManager(b, time.Minute)
	root, file := store.InodeKey(0, ""), store.InodeKey(42, "part-00000-of-00016.parquet")
	b.ReportAllocs()
	for b.Loop() {
		o := m.Owner()
		_ = o.Lock(ctx, root, store.Shared, false)
		_ = o.Lock(ctx, file, store.Shared, false)
		o.Release()
	}
}

// BenchmarkCreate is a create's locking: root shared, parent exclusive, new
// name exclusive.
func BenchmarkCreate(b *testing.B) {
	m := newManager(b, time.Minute)
	root, dir := store.InodeKey(0, ""), store.InodeKey(1, "dir")
	file := store.InodeKey(42, "part-00000-of-00016.parquet")
	b.ReportAllocs()
	for b.Loop() {
		o := m.Owner()
		_ = o.Lock(ctx, root, store.Shared, false)
		_ = o.Lock(ctx, dir, store.Exclusive, false)
		_ = o.Lock(ctx, file, store.Exclusive, false)
		o.Release()
	}
}

// BenchmarkParallelStatHotRoot: every goroutine takes the root shared and a
// distinct file shared, the root being the hottest key of a namespace.
func BenchmarkParallelStatHotRoot(b *testing.B) {
	m := newManager(b, time.Minute)
	root := store.InodeKey(0, "")
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		file := store.InodeKey(next.Add(1), "f")
		i := uint64(0)
		for pb.Next() {
			binary.BigEndian.PutUint64(file[1:], i<<8|uint64(file[8]))
			i++
			o := m.Owner()
			_ = o.Lock(ctx, root, store.Shared, false)
			_ = o.Lock(ctx, file, store.Shared, false)
			o.Release()
		}
	})
}
