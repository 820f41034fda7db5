package namespace

import (
	"context"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// insertStore records which inode rows the engine asks to insert as new
// (store.Inserter) and which it puts over a row; the rows go to the
// Pebble store underneath as puts.
type insertStore struct {
	store.Store
	mu       sync.Mutex
	inserted map[string]bool // key → inserted (true) or put (false), last commit wins
}

type insertTxn struct {
	store.Txn
	s    *insertStore
	seen map[string]bool
}

func (s *insertStore) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &insertTxn{Txn: txn, s: s, seen: map[string]bool{}}, nil
}

func (t *insertTxn) Insert(key, value []byte) {
	t.seen[string(key)] = true
	t.Txn.Put(key, value)
}

func (t *insertTxn) Put(key, value []byte) {
	t.seen[string(key)] = false
	t.Txn.Put(key, value)
}

func (t *insertTxn) Commit(ctx context.Context) error {
	if err := t.Txn.Commit(ctx); err != nil {
		return err
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, ins := range t.seen {
		if _, _, ok := store.DecodeInodeKey([]byte(k)); ok {
			t.s.inserted[k] = ins
		}
	}
	return nil
}

// TestNewInodesAreInserted: every operation that creates an inode where no
// row was (mkdirs with its implicit parents, create, symlink, rename to a
// new name) asks the store to insert it, so that a store whose locks cannot
// exclude a second creator (pgstore) refuses the second instead of letting
// it overwrite the first; a write over an existing row (create with
// overwrite, rename over a file, any change of an inode) is a put.
func TestNewInodesAreInserted(t *testing.T) {
	e0, st0 := newEngine(t)
	e0.Close()
	st := &insertStore{Store: st0, inserted: map[string]bool{}}
	e, err := New(st, e0.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	keyOf := func(p string) string {
		t.Helper()
		dir, name := meta.ParentPath(p)
		fs, err := e.Stat(ctx, root, dir)
		if err != nil {
			t.Fatal(err)
		}
		return string(store.InodeKey(fs.FileID, name))
	}
	want := func(p string, inserted bool) {
		t.Helper()
		k := keyOf(p)
		st.mu.Lock()
		got, ok := st.inserted[k]
		st.mu.Unlock()
		if !ok || got != inserted {
			t.Errorf("%s: written by the last commit as inserted=%v (written: %v), want inserted=%v", p, got, ok, inserted)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.Mkdirs(ctx, root, "/a/b/c", 0o755))
	want("/a", true)
	want("/a/b", true)
	want("/a/b/c", true)
	_, err = e.Create(ctx, root, "/a/f", meta.CreateOptions{Client: "c1"})
	must(err)
	want("/a/f", true)
	want("/a", false) // its entry count
	_, err = e.Complete(ctx, root, "/a/f", "c1")
	must(err)
	want("/a/f", false)
	_, err = e.Create(ctx, root, "/a/f", meta.CreateOptions{Client: "c1", Overwrite: true})
	must(err)
	want("/a/f", false)
	_, err = e.Complete(ctx, root, "/a/f", "c1")
	must(err)
	must(e.CreateSymlink(ctx, root, "/a/f", "/a/l", false))
	want("/a/l", true)
	must(e.Rename(ctx, root, "/a/l", "/a/b/l2", meta.RenameOptions{}))
	want("/a/b/l2", true)
	_, err = e.Create(ctx, root, "/a/g", meta.CreateOptions{Client: "c1"})
	must(err)
	_, err = e.Complete(ctx, root, "/a/g", "c1")
	must(err)
	must(e.Rename(ctx, root, "/a/g", "/a/f", meta.RenameOptions{Overwrite: true}))
	want("/a/f", false)
	_, err = e.Create(ctx, root, "/x/y/z", meta.CreateOptions{Client: "c1", CreateParent: true})
	must(err)
	want("/x", true)
	want("/x/y", true)
	want("/x/y/z", true)
}
