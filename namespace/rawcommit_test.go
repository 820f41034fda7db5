package namespace

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// guardStore keeps, for every committed transaction that writes an inode
// row or a subtree operation row, whether a Guarded invalidator's check
// ran on it before the commit (guardInvalidator marks it).
type guardStore struct {
	store.Store
	mu        sync.Mutex
	guarded   int
	unguarded []string // a key of each commit that ran no check
}

// SingleProcess: the store is a Pebble store, the engine's alone, so that
// the start finishes what a previous incarnation left.
func (s *guardStore) SingleProcess() {}

func (s *guardStore) Begin(ctx context.Context) (store.Txn, error) {
	txn, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &guardTxn{Txn: txn, s: s}, nil
}

type guardTxn struct {
	store.Txn
	s       *guardStore
	watched []byte // the first inode or subtree operation key written
	checked atomic.Bool
}

func (t *guardTxn) note(k []byte) {
	if t.watched != nil {
		return
	}
	if _, _, ok := store.DecodeInodeKey(k); ok {
		t.watched = slices.Clone(k)
	} else if _, ok := store.DecodeSubtreeOpKey(k); ok {
		t.watched = slices.Clone(k)
	}
}

func (t *guardTxn) Put(k, v []byte) { t.note(k); t.Txn.Put(k, v) }
func (t *guardTxn) Delete(k []byte) { t.note(k); t.Txn.Delete(k) }

func (t *guardTxn) Commit(ctx context.Context) error {
	err := t.Txn.Commit(ctx)
	if err == nil && t.watched != nil {
		t.s.mu.Lock()
		if t.checked.Load() {
			t.s.guarded++
		} else {
			t.s.unguarded = append(t.s.unguarded, store.FormatKey(t.watched))
		}
		t.s.mu.Unlock()
	}
	return err
}

// guardInvalidator is a Guarded invalidator over one cache whose check
// marks the transaction it ran on, and which keeps every target it held.
type guardInvalidator struct {
	c  *cache.Cache
	mu sync.Mutex
	ts []cache.Target
}

func (g *guardInvalidator) Invalidate(ctx context.Context, ts []cache.Target) (func(bool), error) {
	h := g.c.Hold(ts...)
	return func(bool) { h.Release() }, nil
}

func (g *guardInvalidator) InvalidateGuarded(ctx context.Context, ts []Target) (func(context.Context, store.Txn) error, func(bool), error) {
	g.mu.Lock()
	g.ts = append(g.ts, cacheTargets(ts)...)
	g.mu.Unlock()
	h := g.c.Hold(cacheTargets(ts)...)
	check := func(_ context.Context, txn store.Txn) error {
		if gt, ok := txn.(*guardTxn); ok {
			gt.checked.Store(true)
		}
		return nil
	}
	return check, func(bool) { h.Release() }, nil
}

func (g *guardInvalidator) held(t cache.Target) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, x := range g.ts {
		if x == t {
			n++
		}
	}
	return n
}

// TestRecoveryCommitsAreGuarded: a recursive chmod and a recursive delete
// that died half done are finished by the next start, outside the
// transaction template (the flag taken over, the rest of the work, the
// flag cleared); every one of those commits runs the Guarded invalidator's
// check (the fence: an instance that lost its session commits nothing)
// and the flagged directory's row is invalidated around the commits that
// change it (its flag taken over, then cleared or the row deleted).
func TestRecoveryCommitsAreGuarded(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, e *Engine) error
	}{
		{"chmod -R", func(ctx context.Context, e *Engine) error {
			return e.SetPermissionRecursive(ctx, root, "/q/top", 0o700)
		}},
		{"rm -r", func(ctx context.Context, e *Engine) error {
			e.cfg.SubtreeDeleteBatch = 200
			return e.Delete(ctx, root, "/q/top", true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e, st, err := openEngineDir(dir)
			must(t, err)
			ctx := context.Background()
			must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
			quickTree(t, e, "/q/top", 8, 400)
			top, err := e.Stat(ctx, root, "/q")
			must(t, err)
			var commits atomic.Int32
			// The flag, two batches, then the process is gone.
			e.testHookCommit = func() {
				if commits.Add(1) >= 4 {
					runtime.Goexit()
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = tc.run(ctx, e)
			}()
			<-done
			e.testHookCommit = nil
			must(t, e.Close())
			must(t, st.Close())

			c, err := cache.New(cache.Config{MaxBytes: 1 << 20})
			must(t, err)
			inv := &guardInvalidator{c: c}
			var gs *guardStore
			e2, st2, err := openEngineDirWithStore(dir, func(s store.Store) store.Store {
				gs = &guardStore{Store: s}
				return gs
			}, func(cfg *Config) { cfg.Cache, cfg.Invalidator = c, inv })
			must(t, err)
			defer func() { e2.Close(); st2.Close() }()
			e2.cfg.SubtreeWait = 10 * time.Second
			if n := subtreeRows(t, st2); n != 0 {
				t.Fatalf("%d subtree operation rows left after the start", n)
			}
			gs.mu.Lock()
			unguarded, guarded := gs.unguarded, gs.guarded
			gs.mu.Unlock()
			if len(unguarded) > 0 {
				t.Errorf("the start committed %d writes of inode or subtree rows without the Guarded check: %v", len(unguarded), unguarded)
			}
			// At least the flag's takeover and the rest of the work (whose
			// last transaction clears the flag, or deletes the directory).
			if guarded < 2 {
				t.Errorf("the start committed %d guarded writes of inode or subtree rows, want 2 or more", guarded)
			}
			held := inv.held(cache.Key(top.FileID, "top"))
			if held < 2 {
				t.Errorf("the flagged directory's row was held around %d commits, want 2 or more (its flag taken over, then cleared or the row deleted)", held)
			}
			t.Logf("the start committed %d guarded writes of inode or subtree rows; the directory's row was held around %d", guarded, held)
			if _, err := e2.Stat(ctx, root, "/q/top"); err != nil && meta.KindOf(err) != meta.KindNotFound {
				t.Fatalf("stat after the finished operation: %v", err)
			}
			fsckClean(t, e2)
		})
	}
}
