package pebblestore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// benchCommit runs create-like transactions (lock the parent and the new
// name exclusively, write both rows, commit with sync) from `goroutines`
// goroutines, and reports how many commits shared one WAL fsync.
func benchCommit(b *testing.B, goroutines int) {
	st := openTest(b, b.TempDir(), DefaultOptions())
	val := store.EncodeInode(nil, &store.Inode{Type: meta.TypeFile, ID: 1234, Perm: 0o644, Owner: "alice",
		Group: "supergroup", Mtime: 1_760_000_000_000, Replication: 3, BlockSize: 128 << 20, NsQuota: -1, SpaceQuota: -1})
	var next atomic.Uint64
	before := st.Stats()
	b.ReportAllocs()
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		dir := next.Add(1)
		i := 0
		for pb.Next() {
			i++
			parent, file := store.InodeKey(1, fmt.Sprint(dir)), store.InodeKey(dir, fmt.Sprintf("f%08d", i))
			txn, _ := st.Begin(bg)
			if _, err := txn.Read(bg, []store.ReadReq{{Key: parent, Mode: store.Exclusive}, {Key: file, Mode: store.Exclusive}}); err != nil {
				b.Error(err)
				return
			}
			txn.Put(parent, val)
			txn.Put(file, val)
			if err := txn.Commit(bg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	after := st.Stats()
	if syncs := after.WALSyncs - before.WALSyncs; syncs > 0 {
		b.ReportMetric(float64(after.Commits-before.Commits)/float64(syncs), "commits/sync")
	}
}

func BenchmarkCommit(b *testing.B) {
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) { benchCommit(b, g) })
	}
}

// BenchmarkReadPath7: resolving a depth-7 path: six ancestors read
// committed, the last component locked shared, in one Read.
func BenchmarkReadPath7(b *testing.B) {
	st := openTest(b, b.TempDir(), DefaultOptions())
	val := store.EncodeInode(nil, &store.Inode{Type: meta.TypeDir, ID: 1234, Perm: 0o755, Owner: "alice",
		Group: "supergroup", Mtime: 1_760_000_000_000, NsQuota: -1, SpaceQuota: -1})
	reqs := make([]store.ReadReq, 7)
	txn, _ := st.Begin(bg)
	for i := range reqs {
		reqs[i] = store.ReadReq{Key: store.InodeKey(uint64(100+i), fmt.Sprintf("component-%d", i)), Mode: store.ReadCommitted}
		txn.Put(reqs[i].Key, val)
	}
	reqs[6].Mode = store.Shared
	if err := txn.Commit(bg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			txn, _ := st.Begin(bg)
			vals, err := txn.Read(bg, reqs)
			if err != nil || vals[6] == nil {
				b.Error(err)
			}
			txn.Rollback()
		}
	})
}

// BenchmarkDirWatchAfterSync: what the directory watch adds to every sync of
// the log (identity_linux.go): a read of the watch that finds no event.
func BenchmarkDirWatchAfterSync(b *testing.B) {
	st := openTest(b, b.TempDir(), DefaultOptions())
	if st.dirWatch == nil {
		b.Skip("no directory watch here")
	}
	for b.Loop() {
		st.dirWatch.afterSync()
	}
}

// BenchmarkCommitDirWatch: one committer's create-like commits with the
// directory watch (the operating system's file system, watched) and without
// it (the same file system given as Options.FS, which is not watched).
func BenchmarkCommitDirWatch(b *testing.B) {
	for _, watched := range []bool{true, false} {
		b.Run(fmt.Sprintf("watch=%v", watched), func(b *testing.B) {
			opts := DefaultOptions()
			if !watched {
				opts.FS = vfs.Default
			}
			st := openTest(b, b.TempDir(), opts)
			if (st.dirWatch != nil) != watched {
				b.Fatalf("watch = %v, want %v", st.dirWatch != nil, watched)
			}
			val := []byte("0123456789abcdef0123456789abcdef0123456789abcdef")
			for i := 0; b.Loop(); i++ {
				if err := putRow(st, fmt.Sprintf("f%08d", i), val); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
