package cache

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchTree caches "/", dirs directories and files files in each, and
// returns the files' keys.
func benchTree(b *testing.B, cfg Config, dirs, files int) (*Cache, []Inode) {
	c := newCache(b, cfg)
	c.Put(c.Begin(), root())
	var keys []Inode
	id := uint64(2)
	for d := range dirs {
		did := id
		id++
		c.Put(c.Begin(), dir(1, did, fmt.Sprintf("dir-%04d", d)))
		for f := range files {
			n := file(did, id, fmt.Sprintf("file-%06d", f))
			id++
			c.Put(c.Begin(), n)
			keys = append(keys, n)
		}
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return c, keys
}

func bigConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxBytes = 1 << 40
	return cfg
}

// BenchmarkGetHit looks up cached rows in random order, in a cache of 64K
// and of 1M entries (where most lookups miss the CPU's caches).
func BenchmarkGetHit(b *testing.B) {
	for _, size := range []struct{ dirs, files int }{{64, 1024}, {1000, 1000}} {
		b.Run(fmt.Sprintf("entries=%d", size.dirs*size.files), func(b *testing.B) {
			c, keys := benchTree(b, bigConfig(), size.dirs, size.files)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := &keys[i%len(keys)]
				if _, ok := c.Get(k.Parent, k.Name); !ok {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}

// BenchmarkResolve resolves a path of four components and a file, all cached.
func BenchmarkResolve(b *testing.B) {
	c := newCache(b, bigConfig())
	rows := []Inode{root(), dir(1, 2, "user"), dir(2, 3, "alice"), dir(3, 4, "data"), dir(4, 5, "2026"), file(5, 6, "part-00000")}
	if c.PutPath(c.Begin(), rows...) != len(rows) {
		b.Fatal("PutPath")
	}
	path := []string{"user", "alice", "data", "2026", "part-00000"}
	dst := make([]Inode, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		if dst = c.Resolve(path, dst[:0]); len(dst) != 6 {
			b.Fatal("miss")
		}
	}
}

// BenchmarkMissFill is a miss followed by the fill of a new row, in a cache
// at its budget (every fill evicts).
func BenchmarkMissFill(b *testing.B) {
	cfg := DefaultConfig()
	cfg.MaxBytes = 65536 * (EntryOverhead + 12)
	c, _ := benchTree(b, cfg, 64, 1024)
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = "new-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := names[i%len(names)]
		if _, ok := c.Get(1, name); ok {
			c.Invalidate(Key(1, name)) // it was filled a lap ago
		}
		c.Put(c.Begin(), file(1, uint64(1<<32+i), name))
		i++
	}
}

// BenchmarkInvalidate: a key that is cached (and is filled again, off the
// clock... on it: the pair is what a write costs an instance that reads the
// row), a key that is not cached (most instances, for most writes), and a
// subtree of 1,024 cached files.
func BenchmarkInvalidate(b *testing.B) {
	b.Run("key/cached+refill", func(b *testing.B) {
		c, keys := benchTree(b, bigConfig(), 64, 1024)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := keys[i%len(keys)]
			c.Invalidate(Key(k.Parent, k.Name))
			c.Put(c.Begin(), k)
			i++
		}
	})
	b.Run("key/absent", func(b *testing.B) {
		c, _ := benchTree(b, bigConfig(), 64, 1024)
		b.ReportAllocs()
		for b.Loop() {
			c.Invalidate(Key(2, "absent"))
		}
	})
	b.Run("hold+release", func(b *testing.B) {
		c, _ := benchTree(b, bigConfig(), 64, 1024)
		b.ReportAllocs()
		for b.Loop() {
			c.Hold(Key(2, "absent"), ListingOf(2)).Release()
		}
	})
	b.Run("subtree/1024", func(b *testing.B) {
		c, keys := benchTree(b, bigConfig(), 1, 1024)
		d, _ := c.Get(1, "dir-0000")
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			c.Put(c.Begin(), d)
			for _, k := range keys {
				c.Put(c.Begin(), k)
			}
			b.StartTimer()
			c.Invalidate(Subtree(d.ID))
		}
	})
}

// BenchmarkGetParallel looks up cached rows from every P (run with -cpu 1,2).
func BenchmarkGetParallel(b *testing.B) {
	c, keys := benchTree(b, bigConfig(), 64, 1024)
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			k := &keys[i%len(keys)]
			if _, ok := c.Get(k.Parent, k.Name); !ok {
				b.Error("miss")
				return
			}
			i++
		}
	})
}
