package namespace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// newBlockEngine opens an engine with block storage, an inline threshold of
// 1000 bytes and syncs every 3000 bytes, so that small test files exercise
// the move to blocks, several blocks per file and recovery.
func newBlockEngine(t *testing.T, dir string) (*Engine, *local.Store) {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(dir, "meta"), pebblestore.DefaultOptions())
	must(t, err)
	bs, err := local.Open(filepath.Join(dir, "blocks"), local.DefaultConfig())
	must(t, err)
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	cfg.InlineThreshold = 1000
	cfg.SyncEvery = 3000
	cfg.MinBlockSize = 0 // the tests' 4 KB blocks make files of many blocks cheaply, as HDFS's test configurations do
	cfg.Blocks = bs
	e, err := New(st, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		bs.Close()
		st.Close()
	})
	return e, bs
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeChunks writes data to an open file in pieces of step bytes.
func writeChunks(t *testing.T, e *Engine, path, client string, off int64, data []byte, step int) {
	t.Helper()
	for i := 0; i < len(data); i += step {
		j := min(len(data), i+step)
		must(t, e.Write(context.Background(), root, path, client, off+int64(i), data[i:j]))
	}
}

func readAll(t *testing.T, e *Engine, path string) []byte {
	t.Helper()
	got, err := e.Read(context.Background(), root, path, 0, 1<<30)
	must(t, err)
	return got
}

func TestBlockFileSizes(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	const bs = 4096
	for i, size := range []int{0, 1, 999, 1000, 1001, bs, bs + 1, 3*bs + 511, 5 * bs} {
		p := "/f" + string(rune('a'+i))
		data := randomBytes(size, uint64(size))
		_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: bs})
		must(t, err)
		writeChunks(t, e, p, "w", 0, data, 777)
		s, err := e.Complete(ctx, root, p, "w")
		must(t, err)
		if s.Length != int64(size) {
			t.Fatalf("size %d: length %d", size, s.Length)
		}
		if got := readAll(t, e, p); !bytes.Equal(got, data) {
			t.Fatalf("size %d: read back %d bytes that differ", size, len(got))
		}
		// Ranged reads across block boundaries.
		for _, off := range []int64{0, 1, bs - 1, bs, int64(size) - 3} {
			if off < 0 || off >= int64(size) {
				continue
			}
			got, err := e.Read(ctx, root, p, off, 2*bs)
			must(t, err)
			if !bytes.Equal(got, data[off:min(int64(size), off+2*bs)]) {
				t.Fatalf("size %d: range at %d differs", size, off)
			}
		}
	}
	fsckClean(t, e)
}

func TestBlockAppendTruncateDelete(t *testing.T) {
	e, bs := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	data := randomBytes(10000, 1)
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	writeChunks(t, e, "/f", "w", 0, data[:6000], 1000)
	_, err = e.Complete(ctx, root, "/f", "w")
	must(t, err)
	// Append fills the partial block, then starts new ones.
	_, err = e.Append(ctx, root, "/f", "w2")
	must(t, err)
	if s, _ := e.Stat(ctx, root, "/f"); s.Length != 6000 {
		t.Fatalf("readers see %d bytes during the append", s.Length)
	}
	writeChunks(t, e, "/f", "w2", 6000, data[6000:], 1500)
	_, err = e.Complete(ctx, root, "/f", "w2")
	must(t, err)
	if got := readAll(t, e, "/f"); !bytes.Equal(got, data) {
		t.Fatal("after append: bytes differ")
	}
	fsckClean(t, e)
	// Truncate inside a block, then to an inline size.
	must(t, e.Truncate(ctx, root, "/f", 5000))
	if got := readAll(t, e, "/f"); !bytes.Equal(got, data[:5000]) {
		t.Fatal("after truncate: bytes differ")
	}
	fsckClean(t, e)
	must(t, e.Truncate(ctx, root, "/f", 700))
	if got := readAll(t, e, "/f"); !bytes.Equal(got, data[:700]) {
		t.Fatal("after truncate to inline: bytes differ")
	}
	fsckClean(t, e)
	// Delete frees the blocks.
	_, err = e.Create(ctx, root, "/g", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	writeChunks(t, e, "/g", "w", 0, data, 4000)
	_, err = e.Complete(ctx, root, "/g", "w")
	must(t, err)
	must(t, e.Delete(ctx, root, "/g", false))
	count := 0
	must(t, bs.Report(ctx, func(blocks.Replica) error { count++; return nil }))
	if count != 0 {
		t.Fatalf("%d replicas left after deleting every block file", count)
	}
	fsckClean(t, e)
}

func TestBlockCorruptionIsAnError(t *testing.T) {
	e, bs := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	data := randomBytes(5000, 2)
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	writeChunks(t, e, "/f", "w", 0, data, 5000)
	_, err = e.Complete(ctx, root, "/f", "w")
	must(t, err)
	var first blocks.Replica
	must(t, bs.Report(ctx, func(r blocks.Replica) error {
		if first.ID.Block == 0 {
			first = r
		}
		return nil
	}))
	must(t, bs.Corrupt(ctx, first.ID, 100))
	_, err = e.Read(ctx, root, "/f", 0, 1000)
	if err == nil || !errors.Is(err, meta.ErrInternal) || !bytes.Contains([]byte(err.Error()), []byte("/f")) {
		t.Fatalf("read of a corrupt block: %v", err)
	}
	// The other block still reads.
	got, err := e.Read(ctx, root, "/f", 4096, 1000)
	must(t, err)
	if !bytes.Equal(got, data[4096:]) {
		t.Fatal("second block differs")
	}
}

// TestBlockLeaseRecoveryAfterRestart: a writer disappears with a server
// restart; after the hard limit, recovery closes the file at what the blocks
// hold durably (at least every synced byte), and fsck is clean.
func TestBlockLeaseRecoveryAfterRestart(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(9000, 3)
	ctx := context.Background()
	func() {
		st, err := pebblestore.Open(filepath.Join(dir, "meta"), pebblestore.DefaultOptions())
		must(t, err)
		bs, err := local.Open(filepath.Join(dir, "blocks"), local.DefaultConfig())
		must(t, err)
		cfg := DefaultConfig()
		cfg.Superuser, cfg.InlineThreshold, cfg.SyncEvery, cfg.Blocks, cfg.MinBlockSize = "root", 1000, 3000, bs, 0
		e, err := New(st, cfg)
		must(t, err)
		_, err = e.Create(ctx, root, "/f", meta.CreateOptions{Client: "gone", BlockSize: 4096})
		must(t, err)
		writeChunks(t, e, "/f", "gone", 0, data, 1000)
		e.Close() // the stream stops without Complete
		bs.Close()
		st.Close()
	}()
	e, _ := newBlockEngine(t, dir)
	wantKind(t, e.Write(ctx, root, "/f", "gone", 9000, []byte("x")), meta.ErrLease)
	if s, _ := e.Stat(ctx, root, "/f"); !s.UnderConstruction || s.Length != 0 {
		t.Fatalf("before recovery: %+v", s)
	}
	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	must(t, e.RecoverExpiredLeases(ctx))
	s, err := e.Stat(ctx, root, "/f")
	must(t, err)
	// Every write synced (the last one crossed SyncEvery): all 9000 bytes are durable.
	if s.UnderConstruction || s.Length != 9000 {
		t.Fatalf("after recovery: %+v", s)
	}
	if got := readAll(t, e, "/f"); !bytes.Equal(got, data) {
		t.Fatal("recovered bytes differ")
	}
	fsckClean(t, e)
}

// TestFsckFindsBlockProblems: a corrupt replica, an orphaned one and a
// missing one are each reported.
func TestFsckFindsBlockProblems(t *testing.T) {
	e, bs := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	for _, p := range []string{"/a", "/b"} {
		_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: 4096})
		must(t, err)
		writeChunks(t, e, p, "w", 0, randomBytes(3000, 9), 3000)
		_, err = e.Complete(ctx, root, p, "w")
		must(t, err)
	}
	fsckClean(t, e)
	var reps []blocks.Replica
	must(t, bs.Report(ctx, func(r blocks.Replica) error { reps = append(reps, r); return nil }))
	if len(reps) != 2 {
		t.Fatalf("%d replicas, want 2", len(reps))
	}
	must(t, bs.Corrupt(ctx, reps[0].ID, 10))
	must(t, bs.Delete(ctx, reps[1].ID))
	w, err := bs.Create(ctx, blocks.ID{Block: 1 << 40, GenStamp: 1})
	must(t, err)
	_, err = w.Finalize(ctx)
	must(t, err)
	rep, err := e.Fsck(ctx)
	must(t, err)
	text := fmt.Sprint(rep.Problems)
	for _, want := range []string{"corrupt", "missing", "orphaned"} {
		if !strings.Contains(text, want) {
			t.Errorf("fsck did not report a %s block: %v", want, rep.Problems)
		}
	}
	// The orphan goes at the next start.
	n, err := e.RemoveOrphanBlocks(ctx, nil)
	must(t, err)
	if n != 1 {
		t.Fatalf("removed %d orphans, want 1", n)
	}
}

// TestBlockConcat: concat moves the sources' blocks to the target when every
// file but the last source ends on a block boundary, and refuses otherwise.
func TestBlockConcat(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	const bsz = 4096
	parts := [][]byte{randomBytes(2*bsz, 10), randomBytes(bsz, 11), randomBytes(1500, 12)}
	for i, d := range parts {
		p := fmt.Sprintf("/d/p%d", i)
		_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: bsz, CreateParent: true})
		must(t, err)
		writeChunks(t, e, p, "w", 0, d, 1000)
		_, err = e.Complete(ctx, root, p, "w")
		must(t, err)
	}
	must(t, e.Concat(ctx, root, "/d/p0", []string{"/d/p1", "/d/p2"}))
	want := append(append(append([]byte{}, parts[0]...), parts[1]...), parts[2]...)
	if got := readAll(t, e, "/d/p0"); !bytes.Equal(got, want) {
		t.Fatalf("concat result: %d bytes, want %d identical", len(got), len(want))
	}
	for _, p := range []string{"/d/p1", "/d/p2"} {
		_, err := e.Stat(ctx, root, p)
		wantKind(t, err, meta.ErrNotFound)
	}
	fsckClean(t, e)
	// The target now ends in a partial block: appending more is refused.
	_, err := e.Create(ctx, root, "/d/q", meta.CreateOptions{Client: "w", BlockSize: bsz})
	must(t, err)
	writeChunks(t, e, "/d/q", "w", 0, randomBytes(2000, 13), 2000)
	_, err = e.Complete(ctx, root, "/d/q", "w")
	must(t, err)
	wantKind(t, e.Concat(ctx, root, "/d/p0", []string{"/d/q"}), meta.ErrInvalidArgument)
	fsckClean(t, e)
}

// gatedBlocks holds Create back while armed: entered receives when one
// waits, and closing open lets it go on.
type gatedBlocks struct {
	blocks.Store
	armed   atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedBlocks) Create(ctx context.Context, id blocks.ID) (blocks.Writer, error) {
	if g.armed.CompareAndSwap(true, false) {
		g.entered <- struct{}{}
		<-g.open
	}
	return g.Store.Create(ctx, id)
}

// TestWriteAndRecoveryDoNotStallEachOther: a write whose block fills up
// holds the file's stream while its next block's transaction waits for the
// file's lock; lease recovery holds that lock and must stop the stream. The
// write is held just before that transaction (creating its next block)
// while recovery takes the lock. Recovery used to wait for the stream while
// holding the lock, and the write for the lock while holding the stream,
// until the write gave up on lock timeouts. Now the stream is always taken
// before the lock: recovery lets the lock go and waits for the write.
func TestWriteAndRecoveryDoNotStallEachOther(t *testing.T) {
	dir := t.TempDir()
	opts := pebblestore.DefaultOptions()
	opts.LockWaitMax = 250 * time.Millisecond // a stall fails in about 2 s instead of minutes
	st, err := pebblestore.Open(filepath.Join(dir, "meta"), opts)
	must(t, err)
	bs, err := local.Open(filepath.Join(dir, "blocks"), local.DefaultConfig())
	must(t, err)
	gate := &gatedBlocks{Store: bs, entered: make(chan struct{}, 1), open: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Superuser, cfg.InlineThreshold, cfg.SyncEvery, cfg.Blocks, cfg.MinBlockSize = "root", 1000, 3000, gate, 0
	cfg.MaxAttempts = 8
	e, err := New(st, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		bs.Close()
		st.Close()
	})
	ctx := context.Background()
	data := randomBytes(6000, 11)
	_, err = e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	must(t, e.Write(ctx, root, "/f", "w", 0, data[:3000])) // into blocks: the stream is open
	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }

	gate.armed.Store(true)
	wrote := make(chan error, 1)
	go func() { wrote <- e.Write(ctx, root, "/f", "w", 3000, data[3000:]) }()
	<-gate.entered // the write holds the stream, block 0 is full, its transaction is next
	recovered := make(chan error, 1)
	go func() { recovered <- e.RecoverExpiredLeases(ctx) }()
	time.Sleep(50 * time.Millisecond) // recovery takes /f's lock and meets the stream
	start := time.Now()
	close(gate.open)

	var errs [2]error
	within(t, 30*time.Second, func() { errs = [2]error{<-wrote, <-recovered} })
	for i, what := range []string{"write", "recovery"} {
		if errs[i] != nil {
			t.Errorf("%s: %v", what, errs[i])
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("write and recovery took %v: they waited for each other's locks", d)
	}
	// The write renewed the lease after the monitor listed the file, so
	// the recovery, judging the lease again under the file's lock, may have
	// found it live (recoverLease); past the hard limit from that renewal
	// the next round closes the file.
	now = now.Add(e.cfg.LeaseHardLimit + time.Minute)
	must(t, e.RecoverExpiredLeases(ctx))
	s, err := e.Stat(ctx, root, "/f")
	must(t, err)
	if s.UnderConstruction || s.Length < 4096 || s.Length > 6000 {
		t.Fatalf("after recovery: %+v, want closed with 4096..6000 bytes", s)
	}
	if got := readAll(t, e, "/f"); !bytes.Equal(got, data[:s.Length]) {
		t.Fatal("recovered bytes differ")
	}
	fsckClean(t, e)
}

func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("did not finish within %v", d)
	}
}

// TestRecoverExpiredLeasesGoesOn: a file whose recovery fails (its block row
// is corrupt) does not keep the other expired files open: they are closed,
// and the failure is returned, naming the file.
func TestRecoverExpiredLeasesGoesOn(t *testing.T) {
	e, _ := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	var ids []uint64
	for _, p := range []string{"/a", "/b"} { // /a has the lower id: its lease comes first
		s, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "gone", BlockSize: 4096})
		must(t, err)
		ids = append(ids, s.FileID)
		writeChunks(t, e, p, "gone", 0, randomBytes(3000, 5), 3000)
	}
	txn, err := e.st.Begin(ctx)
	must(t, err)
	txn.Put(store.BlockKey(ids[0], 0), []byte("not a block row"))
	must(t, txn.Commit(ctx))

	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	err = e.RecoverExpiredLeases(ctx)
	if err == nil || !strings.Contains(err.Error(), "/a") {
		t.Fatalf("recovery with /a's block row corrupt: %v, want an error naming /a", err)
	}
	s, err := e.Stat(ctx, root, "/b")
	must(t, err)
	if s.UnderConstruction || s.Length != 3000 {
		t.Fatalf("/b after recovery: %+v, want closed at 3000 bytes", s)
	}
	if s, _ := e.Stat(ctx, root, "/a"); !s.UnderConstruction {
		t.Fatalf("/a closed although its recovery failed: %+v", s)
	}
}

// TestLeaseRecoveryKeepsQuotaUsage: recovery changes a file's length to what
// its blocks hold, and the space usage of the quota directory above follows:
// a file whose appended-to replica is gone shrinks and gives its space back;
// one whose last block was written past the last block boundary (charged up
// to there) is charged for its synced tail. The usage recorded must equal
// what the content summary and fsck count.
func TestLeaseRecoveryKeepsQuotaUsage(t *testing.T) {
	e, bs := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q", 0o755))
	must(t, e.SetQuota(ctx, root, "/q", -1, 1<<30))

	// /q/shrink: 3000 bytes closed, then reopened by an appender whose
	// replica is lost: its bytes are all in that last block.
	_, err := e.Create(ctx, root, "/q/shrink", meta.CreateOptions{Client: "c", BlockSize: 4096})
	must(t, err)
	writeChunks(t, e, "/q/shrink", "c", 0, randomBytes(3000, 7), 3000)
	_, err = e.Complete(ctx, root, "/q/shrink", "c")
	must(t, err)
	s, err := e.Append(ctx, root, "/q/shrink", "gone")
	must(t, err)
	fw := e.writers.get(s.FileID)
	must(t, bs.Delete(ctx, blocks.ID{Block: fw.block.ID, GenStamp: fw.block.GenStamp}))

	// /q/grow: 9000 bytes in 4096-byte blocks, all synced, never closed.
	_, err = e.Create(ctx, root, "/q/grow", meta.CreateOptions{Client: "gone", BlockSize: 4096})
	must(t, err)
	writeChunks(t, e, "/q/grow", "gone", 0, randomBytes(9000, 8), 1000)

	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	must(t, e.RecoverExpiredLeases(ctx))
	for p, want := range map[string]int64{"/q/shrink": 0, "/q/grow": 9000} {
		s, err := e.Stat(ctx, root, p)
		must(t, err)
		if s.UnderConstruction || s.Length != want {
			t.Fatalf("%s after recovery: %+v, want closed at %d bytes", p, s, want)
		}
	}
	sum, err := e.ContentSummary(ctx, root, "/q")
	must(t, err)
	txn, err := e.st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.InodeKey(store.RootID, "q")}})
	must(t, err)
	var q store.Inode
	must(t, store.DecodeInode(store.InodeKey(store.RootID, "q"), vals[0], &q))
	if q.SpaceUsed != sum.SpaceConsumed {
		t.Errorf("/q's space usage after recovery = %d, content summary counts %d", q.SpaceUsed, sum.SpaceConsumed)
	}
	rep, err := e.Fsck(ctx)
	must(t, err)
	for _, p := range rep.Problems {
		if strings.Contains(p, "quota") {
			t.Errorf("fsck: %s", p)
		}
	}
}

// TestRecursiveDeleteFreesBlocks: a recursive delete under the subtree
// protocol frees the replicas of the block files it removes, a closed one
// and one being written, in every batch.
func TestRecursiveDeleteFreesBlocks(t *testing.T) {
	e, bs := newBlockEngine(t, t.TempDir())
	ctx := context.Background()
	data := randomBytes(9000, 2)
	for i, p := range []string{"/t/a/f", "/t/a/b/g", "/t/h"} {
		_, err := e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: 4096, CreateParent: true})
		must(t, err)
		writeChunks(t, e, p, "w", 0, data, 3000)
		if i < 2 {
			_, err = e.Complete(ctx, root, p, "w")
			must(t, err)
		}
	}
	fsckClean(t, e)
	must(t, e.Delete(ctx, root, "/t", true))
	count := 0
	must(t, bs.Report(ctx, func(blocks.Replica) error { count++; return nil }))
	if count != 0 {
		t.Fatalf("%d replicas left after a recursive delete of every block file", count)
	}
	fsckClean(t, e)
}
