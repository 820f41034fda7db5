package namespace

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// holdStore is a Pebble store (a store.CacheHolder) that counts the holds
// taken and released, and the range deletions made while none was held.
type holdStore struct {
	*pebblestore.Store
	held, taken, released, unheldRanges atomic.Int64
}

func (s *holdStore) HoldCaches() func() {
	s.taken.Add(1)
	s.held.Add(1)
	release := s.Store.HoldCaches()
	return func() {
		s.held.Add(-1)
		s.released.Add(1)
		release()
	}
}

func (s *holdStore) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &holdTxn{txn, s}, nil
}

type holdTxn struct {
	store.Txn
	s *holdStore
}

func (t *holdTxn) DeleteRange(ctx context.Context, start, end []byte) error {
	if t.s.held.Load() == 0 {
		t.s.unheldRanges.Add(1)
	}
	return t.Txn.(store.RangeDeleter).DeleteRange(ctx, start, end)
}

// TestSubtreeWorkHoldsCaches: a recursive delete and a chmod -R hold the
// store's caches, and the memory through Config.HoldMemory, while they work (every range deletion of the delete is
// made under a hold) and release every hold they take; a file's delete
// takes none.
func TestSubtreeWorkHoldsCaches(t *testing.T) {
	opts := pebblestore.DefaultOptions()
	opts.CacheSize, opts.MemTableSize = 8<<20, 4<<20
	pst, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	st := &holdStore{Store: pst}
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	var memTaken, memReleased atomic.Int64
	cfg.HoldMemory = func() func() {
		memTaken.Add(1)
		return func() { memReleased.Add(1) }
	}
	e, err := New(st, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		pst.Close()
	})
	e.cfg.SubtreeDeleteBatch = 300 // several transactions
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/a", 0o755))
	buildTree(t, e, "/a", 6, 90)
	writeFile(t, e, root, "/f", []byte("x"))

	must(t, e.Delete(ctx, root, "/f", false))
	if n := st.taken.Load(); n != 0 {
		t.Fatalf("a file's delete took %d holds", n)
	}
	must(t, e.SetPermissionRecursive(ctx, root, "/a", 0o750))
	if n := st.taken.Load(); n == 0 {
		t.Fatal("chmod -R took no hold")
	}
	must(t, e.Delete(ctx, root, "/a", true))
	if n, r := st.taken.Load(), st.released.Load(); n != r || st.held.Load() != 0 {
		t.Fatalf("%d holds taken, %d released", n, r)
	}
	if n, r := memTaken.Load(), memReleased.Load(); n != st.taken.Load() || r != n {
		t.Fatalf("Config.HoldMemory: %d holds taken, %d released; %d of the caches", n, r, st.taken.Load())
	}
	if n := st.unheldRanges.Load(); n != 0 {
		t.Fatalf("%d range deletions of the recursive delete were made without a hold", n)
	}
	fsckClean(t, e)
}
