package pebblestore

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// footprintRows is the number of inode rows of the footprint measurement.
const footprintRows = 100_000

// writeNamespace commits rows empty-file inodes, 16 per directory, with
// realistic names (~34 bytes), owners and times, plus their directories,
// in batches of 1000 rows; it returns the number of rows written.
// With randomNames, file names are 34 random base-32 characters instead
// (the worst case for prefix sharing and compression).
func writeNamespace(t testing.TB, st *Store, rows int, randomNames bool) int {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	ctx := context.Background()
	const perDir = 16
	now := int64(1_760_000_000_000)
	n, id := 0, uint64(FirstID)
	txn, _ := st.Begin(ctx)
	var buf []byte
	put := func(in *store.Inode) {
		buf = store.EncodeInode(buf[:0], in)
		txn.Put(in.Key(), buf)
		n++
		if n%1000 == 0 {
			if err := txn.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			txn, _ = st.Begin(ctx)
		}
	}
	for d := 0; n < rows; d++ {
		dirID := id
		id++
		put(&store.Inode{Parent: store.RootID, Name: fmt.Sprintf("job-%07d", d), ID: dirID, Type: meta.TypeDir,
			Perm: 0o755, Owner: "alice", Group: "supergroup", Mtime: now + int64(d), Atime: now + int64(d),
			Children: perDir, NsQuota: -1, SpaceQuota: -1})
		for f := 0; f < perDir && n < rows; f++ {
			name := fmt.Sprintf("part-%05d-%08x-c000.snappy.pq", f, uint32(d*perDir+f)*2654435761)
			if randomNames {
				b := make([]byte, 34)
				for i := range b {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
				name = string(b)
			}
			put(&store.Inode{Parent: dirID, Name: name,
				ID: id, Type: meta.TypeFile, Perm: 0o644, Owner: "alice", Group: "supergroup",
				Mtime: now + int64(n), Atime: now + int64(n), Replication: 3, BlockSize: 128 << 20,
				NsQuota: -1, SpaceQuota: -1})
			id++
		}
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// dirUsage sums the sizes of the files in dir; tables counts .sst files only.
func dirUsage(t testing.TB, dir string) (all, tables int64) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		all += info.Size()
		if strings.HasSuffix(p, ".sst") {
			tables += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all, tables
}

// TestFootprint measures bytes on disk per empty-file inode row after a
// full compaction; the target is at most 200 bytes.
func TestFootprint(t *testing.T) {
	t.Run("parquet-names", func(t *testing.T) { testFootprint(t, false) })
	t.Run("random-names", func(t *testing.T) { testFootprint(t, true) })
}

func testFootprint(t *testing.T, randomNames bool) {
	dir := t.TempDir()
	st, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	n := writeNamespace(t, st, footprintRows, randomNames)
	if err := st.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen so that WAL files of the closed memtables are gone or recycled.
	st, err = Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	all, tables := dirUsage(t, dir)
	var sample []byte
	sample = store.EncodeInode(sample, &store.Inode{Type: meta.TypeFile, ID: 123456, Perm: 0o644, Owner: "alice", Group: "supergroup",
		Mtime: 1_760_000_000_000, Atime: 1_760_000_000_000, Replication: 3, BlockSize: 128 << 20, NsQuota: -1, SpaceQuota: -1})
	t.Logf("footprint: %d rows (key ~43 B + value %d B); tables %d B = %.1f B/row; whole directory %d B = %.1f B/row",
		n, len(sample), tables, float64(tables)/float64(n), all, float64(all)/float64(n))
	if per := float64(tables) / float64(n); per > 200 {
		t.Errorf("%.1f bytes of tables per inode row, want <= 200", per)
	}
}
