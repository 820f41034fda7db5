package namespace

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
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

// buildTree makes dirs directories under top, each with files small files
// (with content, one with an xattr) and an empty directory, /top having a
// quota and /q above it another.
func buildTree(t *testing.T, e *Engine, top string, dirs, files int) {
	t.Helper()
	ctx := context.Background()
	for d := range dirs {
		dir := fmt.Sprintf("%s/d%d/e%d", top, d%7, d)
		must(t, e.Mkdirs(ctx, root, dir+"/empty", 0o755))
		for f := range files {
			writeFile(t, e, root, fmt.Sprintf("%s/f%d", dir, f), []byte("content"))
		}
		must(t, e.SetXAttr(ctx, root, dir+"/f0", meta.XAttr{Name: "user.k", Value: []byte("v")}, meta.XAttrCreate))
	}
	_, err := e.Create(ctx, root, top+"/open", meta.CreateOptions{Client: "writer"})
	must(t, err)
}

// TestRecursiveDeleteInBatches deletes a tree bigger than one batch under
// the protocol: the whole tree goes, the quotas above are charged, and the
// tree is clean; a caller without write permission on a directory below
// deletes nothing.
func TestRecursiveDeleteInBatches(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q/top", 0o777))
	must(t, e.SetQuota(ctx, root, "/q", 100000, 1<<30))
	must(t, e.SetQuota(ctx, root, "/q/top", 100000, 1<<30))
	buildTree(t, e, "/q/top", 12, 200) // 2400 files, a directory of 1700 entries at most
	e.cfg.SubtreeDeleteBatch = 500     // several transactions, some ending inside a directory
	must(t, e.SetOwner(ctx, root, "/q/top", "alice", ""))
	must(t, e.SetPermission(ctx, root, "/q", 0o777))
	_, err := e.Stat(ctx, root, "/q/top/d1/e1")
	must(t, err)
	wantKind(t, e.Delete(ctx, alice, "/q/top", true), meta.ErrPermission)
	if st, err := e.Stat(ctx, root, "/q/top/d1/e1/f3"); err != nil || st.Type != meta.TypeFile {
		t.Fatalf("a refused delete removed /q/top/d1/e1/f3: %v", err)
	}
	fsckClean(t, e)
	must(t, e.Delete(ctx, root, "/q/top", true))
	if _, err := e.Stat(ctx, root, "/q/top"); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("stat /q/top after its delete: %v", err)
	}
	q, err := e.Stat(ctx, root, "/q")
	must(t, err)
	if q.ChildrenNum != 0 {
		t.Errorf("/q has %d entries", q.ChildrenNum)
	}
	fsckClean(t, e)
	if n := e.subtrees.t.Len(); n != 0 {
		t.Errorf("%d subtree operations still under way", n)
	}
}

// TestRecursiveDeleteResumesAfterCrash stops a recursive delete dead (its
// goroutine exits in the middle of a commit, as a crash would, without
// clearing its flag) after a few batches: the smaller tree it leaves is
// clean, and the next start finishes the delete.
func TestRecursiveDeleteResumesAfterCrash(t *testing.T) {
	dir := t.TempDir()
	e, st, err := openEngineDir(dir)
	must(t, err)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q/top", 0o755))
	must(t, e.SetQuota(ctx, root, "/q", 100000, 1<<30))
	buildTree(t, e, "/q/top", 8, 150)
	e.cfg.SubtreeDeleteBatch = 200 // the crash comes after three of several transactions
	before, err := e.Stat(ctx, root, "/q")
	must(t, err)
	var commits atomic.Int32
	e.testHookCommit = func() {
		if commits.Add(1) == 4 { // the flag, then three batches
			runtime.Goexit()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Delete(ctx, root, "/q/top", true)
		t.Error("the delete returned")
	}()
	<-done
	e.testHookCommit = nil
	fsckClean(t, e)
	// Under the live flag of the dead operation (this incarnation's): busy.
	e.cfg.SubtreeWait = 50 * time.Millisecond
	_, err = e.Stat(ctx, root, "/q/top")
	wantKind(t, err, meta.ErrBusy)
	must(t, e.Close())
	must(t, st.Close())

	e, _ = openEngine(t, dir)
	if _, err := e.Stat(ctx, root, "/q/top"); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("stat /q/top after the restart: %v, want not found (the delete finished)", err)
	}
	q, err := e.Stat(ctx, root, "/q")
	must(t, err)
	if q.ChildrenNum != 0 || before.ChildrenNum != 1 {
		t.Errorf("/q has %d entries (%d before)", q.ChildrenNum, before.ChildrenNum)
	}
	fsckClean(t, e)
}
