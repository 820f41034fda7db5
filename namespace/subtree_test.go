package namespace

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// TestSubtreeFlagMakesPathsWait pauses a chmod of a non-empty directory at
// the commit of its work (its flag set, its quiesce done): an operation on
// a path below waits for it, and past SubtreeWait fails busy, naming the
// flagged directory and the operation; once the chmod commits, the flag is
// gone and the tree is clean.
func TestSubtreeFlagMakesPathsWait(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/a/b/c", 0o755))
	e.cfg.SubtreeWait = 200 * time.Millisecond
	paused, release := pauseCommit(e, 2)
	chmod := make(chan error, 1)
	go func() { chmod <- e.SetPermission(ctx, root, "/a", 0o700) }()
	<-paused
	start := time.Now()
	_, err := e.Stat(ctx, root, "/a/b/c")
	wantKind(t, err, meta.ErrBusy)
	if waited := time.Since(start); waited < e.cfg.SubtreeWait {
		t.Errorf("stat gave up after %v, before SubtreeWait %v", waited, e.cfg.SubtreeWait)
	}
	if msg := err.Error(); !strings.Contains(msg, "/a is locked by a set permission of /a") || !strings.Contains(msg, "/a/b/c") {
		t.Errorf("the busy error does not name the path, the flag and the operation: %s", msg)
	}
	// Outside the subtree nothing waits.
	must(t, e.Mkdirs(ctx, root, "/x", 0o755))
	stat := make(chan error, 1)
	e.cfg.SubtreeWait = 30 * time.Second
	go func() { _, err := e.Stat(ctx, root, "/a/b/c"); stat <- err }()
	select {
	case err := <-stat:
		t.Fatalf("stat /a/b/c returned (%v) while the chmod of /a was under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	must(t, <-chmod)
	must(t, <-stat)
	st, err := e.Stat(ctx, root, "/a")
	must(t, err)
	if st.Perm != 0o700 {
		t.Errorf("mode of /a is %o", st.Perm)
	}
	fsckClean(t, e)
	if n := e.subtrees.t.Len(); n != 0 {
		t.Errorf("%d subtree operations still under way", n)
	}
}

// plantFlag writes what a subtree operation of another engine instance
// leaves when it dies after its first phase: the flag on dir's row and its
// operation row.
func plantFlag(t *testing.T, e *Engine, st store.Store, dir string, owner uint64) uint64 {
	t.Helper()
	ctx := context.Background()
	parent, name := meta.ParentPath(dir)
	ps, err := e.Stat(ctx, root, parent)
	must(t, err)
	key := store.InodeKey(ps.FileID, name)
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}})
	must(t, err)
	var n store.Inode
	must(t, store.DecodeInode(key, vals[0], &n))
	n.SubtreeOwner = owner
	txn.Put(key, store.EncodeInode(nil, &n))
	txn.Put(store.SubtreeOpKey(n.ID), store.EncodeSubtreeOp(nil, &store.SubtreeOp{
		Owner: owner, Kind: uint8(subtree.KindRename), Parent: ps.FileID, Name: name, Path: dir}))
	must(t, txn.Commit(ctx))
	return n.ID
}

func flagOf(t *testing.T, st store.Store, parent uint64, name string, id uint64) (flag uint64, row bool) {
	t.Helper()
	ctx := context.Background()
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	key := store.InodeKey(parent, name)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key}, {Key: store.SubtreeOpKey(id)}})
	must(t, err)
	var n store.Inode
	must(t, store.DecodeInode(key, vals[0], &n))
	return n.SubtreeOwner, vals[1] != nil
}

// TestStaleSubtreeFlag: a flag left by a previous incarnation (a crash
// after the first phase) is cleared by the first operation that meets it,
// and at start.
func TestStaleSubtreeFlag(t *testing.T) {
	dir := t.TempDir()
	e, st, err := openEngineDir(dir)
	must(t, err)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/a/b", 0o755))
	a, err := e.Stat(ctx, root, "/a")
	must(t, err)
	// Met: the create clears it and goes on.
	plantFlag(t, e, st, "/a", e.instance+1)
	if _, err := e.Create(ctx, root, "/a/b/f", meta.CreateOptions{Client: "c"}); err != nil {
		t.Fatalf("create below a stale flag: %v", err)
	}
	if flag, row := flagOf(t, st, store.RootID, "a", a.FileID); flag != 0 || row {
		t.Fatalf("stale flag %d (row %v) not cleared when met", flag, row)
	}
	fsckClean(t, e)
	// At start: a restart clears it before any operation.
	plantFlag(t, e, st, "/a", e.instance)
	rep, err := e.Fsck(ctx)
	must(t, err)
	if !rep.Clean() {
		t.Fatalf("fsck finds a planted flag with its row unclean: %v", rep.Problems)
	}
	must(t, e.Close())
	must(t, st.Close())
	e, st = openEngine(t, dir)
	if flag, row := flagOf(t, st, store.RootID, "a", a.FileID); flag != 0 || row {
		t.Fatalf("stale flag %d (row %v) not cleared at start", flag, row)
	}
	must(t, e.Rename(ctx, root, "/a", "/z", meta.RenameOptions{}))
	if _, err := e.Stat(ctx, root, "/z/b/f"); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, e)
}

// TestSubtreeOperationsDoNotDeadlock runs directory moves that cross each
// other's subtrees (each one's target is below the other's source) and
// chmods of their parents: when each meets the others' flags, the younger
// gives way, and all finish well within SubtreeWait. (TestConcurrentMutations
// meets the crossing more often: without the rule it waits out SubtreeWait.)
func TestSubtreeOperationsDoNotDeadlock(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	e.cfg.SubtreeWait = 20 * time.Second
	for round := 0; round < 20; round++ {
		must(t, e.Mkdirs(ctx, root, "/p/a/d", 0o755))
		must(t, e.Mkdirs(ctx, root, "/q/b/c", 0o755))
		errs := make(chan error, 4)
		start := time.Now()
		go func() { errs <- e.Rename(ctx, root, "/p/a", "/q/b/c/x", meta.RenameOptions{}) }()
		go func() { errs <- e.Rename(ctx, root, "/q/b", "/p/a/d/y", meta.RenameOptions{}) }()
		go func() { errs <- e.SetPermission(ctx, root, "/p", 0o755) }()
		go func() { errs <- e.SetOwner(ctx, root, "/q", "", "staff") }()
		for range 4 {
			if err := <-errs; err != nil && meta.KindOf(err) != meta.KindNotFound && meta.KindOf(err) != meta.KindInvalidArgument {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("round %d took %v", round, d)
		}
		fsckClean(t, e)
		must(t, e.Delete(ctx, root, "/p", true))
		must(t, e.Delete(ctx, root, "/q", true))
	}
}
