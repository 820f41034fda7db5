package candidates

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// The preloaded namespace: dirs directories of perDir files each.
const dirs, perDir = 2000, 16

func fileName(d, f int) string {
	return fmt.Sprintf("part-%05d-%08x-c000.snappy.pq", f, uint32(d*perDir+f)*2654435761)
}

func inodeValue(id uint64) []byte {
	return store.EncodeInode(nil, &store.Inode{Type: meta.TypeFile, ID: id, Perm: 0o644, Owner: "alice", Group: "supergroup",
		Mtime: 1_760_000_000_000, Atime: 1_760_000_000_000, Replication: 3, BlockSize: 128 << 20, NsQuota: -1, SpaceQuota: -1})
}

// allKeys are the preloaded keys, in dir-major order.
var allKeys = func() [][]byte {
	var ks [][]byte
	for d := range dirs {
		for f := range perDir {
			ks = append(ks, store.InodeKey(uint64(d+100), fileName(d, f)))
		}
	}
	return ks
}()

func preload(b *testing.B, e engine) {
	var kvs [][2][]byte
	for d := range dirs {
		for f := range perDir {
			kvs = append(kvs, [2][]byte{store.InodeKey(uint64(d+100), fileName(d, f)), inodeValue(uint64(d*perDir + f))})
		}
		if len(kvs) >= 1000 {
			if err := e.write(kvs); err != nil {
				b.Fatal(err)
			}
			kvs = kvs[:0]
		}
	}
	if err := e.write(kvs); err != nil {
		b.Fatal(err)
	}
}

var engines = []string{"pebble", "bbolt", "sqlite"}

func parallel(b *testing.B, goroutines int, body func(rng *rand.Rand, seq uint64)) {
	var seed atomic.Uint64
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		s := seed.Add(1)
		rng := rand.New(rand.NewPCG(s, 99))
		i := uint64(0)
		for pb.Next() {
			i++
			body(rng, s<<32|i)
		}
	})
}

// BenchmarkRead7: resolve a depth-7 path with one batched read of 7 rows.
func BenchmarkRead7(b *testing.B) {
	for _, name := range engines {
		for _, g := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				e, err := openEngine(name, b.TempDir(), g)
				if err != nil {
					b.Fatal(err)
				}
				defer e.close()
				preload(b, e)
				b.ResetTimer()
				parallel(b, g, func(rng *rand.Rand, _ uint64) {
					// 7 distinct rows, one per level of the path.
					keys := make([][]byte, 7)
					base := rng.IntN(dirs - 7)
					for i := range keys {
						keys[i] = allKeys[(base+i)*perDir+rng.IntN(perDir)]
					}
					if n, err := e.read(keys); err != nil || n != 7 {
						b.Errorf("read7: %d rows, %v", n, err)
					}
				})
			})
		}
	}
}

// BenchmarkWrite3: a durable transaction of 3 row writes (a create).
func BenchmarkWrite3(b *testing.B) {
	for _, name := range engines {
		for _, g := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				e, err := openEngine(name, b.TempDir(), g)
				if err != nil {
					b.Fatal(err)
				}
				defer e.close()
				preload(b, e)
				b.ResetTimer()
				parallel(b, g, func(rng *rand.Rand, seq uint64) {
					d := rng.IntN(dirs)
					kvs := [][2][]byte{
						{store.InodeKey(uint64(d+100), fmt.Sprintf("new-%016x.tmp", seq)), inodeValue(seq)},
						{store.InodeKey(1, fmt.Sprintf("dir-%d", d)), inodeValue(uint64(d))},
						{store.InodeKey(uint64(d+100), fileName(d, rng.IntN(perDir))), inodeValue(seq + 1)},
					}
					if err := e.write(kvs); err != nil {
						b.Errorf("write3: %v", err)
					}
				})
			})
		}
	}
}
