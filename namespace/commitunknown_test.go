package namespace

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// lostAnswer commits the first armed transaction that writes a block row,
// then answers store.ErrCommitUnknown, as a database connection that broke
// after COMMIT was sent does (pgstore): the transaction did commit.
type lostAnswer struct {
	store.Store
	armed atomic.Bool
}

func (s *lostAnswer) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &lostAnswerTxn{Txn: txn, s: s}, nil
}

type lostAnswerTxn struct {
	store.Txn
	s     *lostAnswer
	block bool
}

func (t *lostAnswerTxn) Put(k, v []byte) {
	if _, _, ok := store.DecodeBlockKey(k); ok {
		t.block = true
	}
	t.Txn.Put(k, v)
}

func (t *lostAnswerTxn) Commit(ctx context.Context) error {
	if err := t.Txn.Commit(ctx); err != nil {
		return err
	}
	if t.block && t.s.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("test: %w: the answer to COMMIT was lost", store.ErrCommitUnknown)
	}
	return nil
}

// TestCommitUnknownKeepsBlock: a write that moves a file to blocks, whose
// commit happened but whose answer was lost, fails with outcome unknown (it carried no request id whose record could settle it)
// and leaves the new block's replica in place: the committed rows point at
// it, and the file reads back what they say (an undo that aborted the
// replica would leave a committed file pointing at nothing).
func TestCommitUnknownKeepsBlock(t *testing.T) {
	dir := t.TempDir()
	ps, err := pebblestore.Open(filepath.Join(dir, "meta"), pebblestore.DefaultOptions())
	must(t, err)
	bs, err := local.Open(filepath.Join(dir, "blocks"), local.DefaultConfig())
	must(t, err)
	st := &lostAnswer{Store: ps}
	cfg := DefaultConfig()
	cfg.Superuser = "root"
	cfg.InlineThreshold = 1000
	cfg.MinBlockSize = 0
	cfg.Blocks = bs
	e, err := New(st, cfg)
	must(t, err)
	t.Cleanup(func() {
		e.Close()
		bs.Close()
		ps.Close()
	})
	ctx := context.Background()
	_, err = e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	head := randomBytes(800, 1)
	must(t, e.Write(ctx, root, "/f", "w", 0, head))
	st.armed.Store(true)
	err = e.Write(ctx, root, "/f", "w", 800, randomBytes(700, 2)) // past the inline threshold: to blocks
	if err == nil || meta.KindOf(err) != meta.KindOutcomeUnknown {
		t.Fatalf("write whose commit answer was lost: %v, want outcome unknown", err)
	}
	if st.armed.Load() {
		t.Fatal("the write never committed a block row: the test did not reach the case")
	}
	// The committed rows say the file is in blocks holding at least what was
	// inline; its block must be readable.
	got, err := e.Read(ctx, root, "/f", 0, 1<<20)
	if err != nil {
		t.Fatalf("read after the lost answer: %v (the block's replica was removed under a committed row)", err)
	}
	if !bytes.HasPrefix(got, head) && !bytes.Equal(got, nil) {
		t.Fatalf("read %d bytes that do not start with what was written", len(got))
	}
	fsckClean(t, e)
}
