package pgstore

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
)

// The benchmarks run 8 x GOMAXPROCS goroutines (16 clients on two cores)
// over a table of 100,000 inode-shaped rows: 1,000 directories of 100
// entries. docs/STORE.md has a run beside pgbench on the same cluster.

const benchDirs, benchPerDir = 1000, 100

func benchStore(b *testing.B) *Store {
	opts := DefaultOptions()
	opts.PoolSize = 32
	st, err := Open(bg, pgtest.DB(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	val := make([]byte, 120) // about an inode row
	for d := range benchDirs {
		txn, _ := st.Begin(bg)
		for i := range benchPerDir {
			txn.Put(benchKey(d, i), val)
		}
		if err := txn.Commit(bg); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

func benchKey(dir, i int) []byte { return store.InodeKey(uint64(dir+16), fmt.Sprintf("part-%05d", i)) }

func runBench(b *testing.B, fn func(rng *rand.Rand) error) {
	b.ReportAllocs()
	b.SetParallelism(8)
	var seed atomic.Uint64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seed.Add(1), 1))
		for pb.Next() {
			if err := fn(rng); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPointRead: a read-committed read of one key, what a stat of a
// file whose ancestors are cached costs: one autocommit statement.
func BenchmarkPointRead(b *testing.B) {
	st := benchStore(b)
	runBench(b, func(rng *rand.Rand) error {
		txn, _ := st.Begin(bg)
		defer txn.Rollback()
		_, err := txn.Read(bg, []store.ReadReq{{Key: benchKey(rng.IntN(benchDirs), rng.IntN(benchPerDir))}})
		return err
	})
}

// BenchmarkBatchRead7: seven keys read-committed in one statement, a stat
// at depth 7 with no hints.
func BenchmarkBatchRead7(b *testing.B) {
	st := benchStore(b)
	runBench(b, func(rng *rand.Rand) error {
		txn, _ := st.Begin(bg)
		defer txn.Rollback()
		rs := make([]store.ReadReq, 7)
		for i := range rs {
			rs[i].Key = benchKey(rng.IntN(benchDirs), rng.IntN(benchPerDir))
		}
		_, err := txn.Read(bg, rs)
		return err
	})
}

// BenchmarkCreateTxn: a create's shape: the parent directory's row locked
// exclusively with the new name (a key without a row) in one locking read
// (with BEGIN), then the new row, the parent's new entry count and COMMIT in
// one batch: two round trips.
func BenchmarkCreateTxn(b *testing.B) {
	st := benchStore(b)
	var n atomic.Uint64
	runBench(b, func(rng *rand.Rand) error {
		for {
			d := rng.IntN(benchDirs)
			parent := benchKey(d, 0)
			child := store.InodeKey(uint64(d+16), fmt.Sprintf("new-%d", n.Add(1)))
			txn, _ := st.Begin(bg)
			vals, err := txn.Read(bg, []store.ReadReq{{Key: parent, Mode: store.Exclusive}, {Key: child, Mode: store.Exclusive}})
			if err == nil {
				txn.Put(child, make([]byte, 120))
				txn.Put(parent, binary.BigEndian.AppendUint64(vals[0][:0:0], uint64(len(vals[0]))))
				err = txn.Commit(bg)
			}
			txn.Rollback()
			if !store.IsRetryable(err) {
				return err
			}
		}
	})
}

// BenchmarkNamespaceCachedReads is namespace's BenchmarkCachedReads over
// PostgreSQL: stat of a file at depth 7 and a listing of 100 entries, from
// 2×GOMAXPROCS goroutines, without and with the engine's metadata cache.
func BenchmarkNamespaceCachedReads(b *testing.B) {
	root := meta.User{Name: "root"}
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[cached]
		dir := "/user/alice/warehouse/sales/year=2026/" + name
		opts := DefaultOptions()
		st, err := Open(bg, pgtest.DB(b), opts)
		if err != nil {
			b.Fatal(err)
		}
		cfg := namespace.DefaultConfig()
		cfg.Superuser = "root"
		if cached {
			if cfg.Cache, err = cache.New(cache.Config{MaxBytes: 64 << 20}); err != nil {
				b.Fatal(err)
			}
		}
		e, err := namespace.New(st, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close(); st.Close() })
		for i := range 100 {
			if _, err := e.CreateFile(bg, root, fmt.Sprintf("%s/part-%05d", dir, i), meta.CreateOptions{CreateParent: true}, []byte("x")); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("stat/cache="+name, func(b *testing.B) {
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Stat(bg, root, dir+"/part-00000"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("list100/cache="+name, func(b *testing.B) {
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if l, err := e.List(bg, root, dir, "", 1000); err != nil || len(l.Entries) != 100 {
						b.Fatalf("%v, %d entries", err, len(l.Entries))
					}
				}
			})
		})
	}
}
