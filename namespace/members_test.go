package namespace

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// sharedStore hides store.SingleProcess: the engines over it behave as
// NameNodes on a store that several share (a PostgreSQL database), which
// one Pebble store in one process stands for here, its locks and rows
// shared by all.
type sharedStore struct{ store.Store }

// twoEngines opens engines a and b over one Pebble store, as two NameNodes
// sharing it, beating every 20ms and judging another gone after 200ms.
func twoEngines(t *testing.T) (a, b *Engine, st store.Store) {
	t.Helper()
	return twoEnginesWith(t, func(*Config) {})
}

// twoEnginesWith is twoEngines with each engine's Config changed by set.
func twoEnginesWith(t *testing.T, set func(*Config)) (a, b *Engine, st store.Store) {
	t.Helper()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize = 8 << 20
	opts.MemTableSize = 4 << 20
	ps, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	st = sharedStore{ps}
	open := func() *Engine {
		cfg := DefaultConfig()
		cfg.Superuser = "root"
		cfg.Groups = func(string) []string { return nil }
		cfg.Beat = 20 * time.Millisecond
		cfg.GoneAfter = 200 * time.Millisecond
		set(&cfg)
		e, err := New(st, cfg)
		must(t, err)
		return e
	}
	a, b = open(), open()
	t.Cleanup(func() {
		a.Close()
		b.Close()
		ps.Close()
	})
	if a.alone || b.alone {
		t.Fatal("the engines take the wrapped store for theirs alone")
	}
	return a, b, st
}

// crash stops e's heartbeat as a killed process would: its instance row
// stays, and stops moving.
func crash(e *Engine) {
	e.once.Do(func() { close(e.stop) })
	<-e.done
	<-e.members.done
}

func instanceRow(t *testing.T, st store.Store, id uint64) bool {
	t.Helper()
	ctx := context.Background()
	txn, err := st.Begin(ctx)
	must(t, err)
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.InstanceKey(id)}})
	must(t, err)
	return vals[0] != nil
}

// TestAnotherNameNodesFlagIsBusy: the flag of a subtree operation under way
// on another live NameNode makes this one's operations below wait, and give
// up busy past SubtreeWait; it is not taken for a stale flag and cleared,
// as a flag of a previous incarnation of a lone engine is.
func TestAnotherNameNodesFlagIsBusy(t *testing.T) {
	// GoneAfter 600ms, not twoEngines' 200: a beat of a's stalled 200ms
	// on a loaded machine under -race made b judge a gone and clear its
	// flag (the test then saw the create succeed).
	a, b, st := twoEnginesWith(t, func(cfg *Config) { cfg.GoneAfter = 600 * time.Millisecond })
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/d/e", 0o755))
	id := plantFlag(t, a, st, "/d", a.instance)
	b.cfg.SubtreeWait = 1800 * time.Millisecond // three times GoneAfter: a stays alive throughout
	start := time.Now()
	_, err := b.Create(ctx, root, "/d/e/f", meta.CreateOptions{Client: "c"})
	wantKind(t, err, meta.ErrBusy)
	if d := time.Since(start); d < b.cfg.SubtreeWait {
		t.Errorf("gave up after %v, before SubtreeWait %v", d, b.cfg.SubtreeWait)
	}
	if flag, row := flagOf(t, st, store.RootID, "d", id); flag != a.instance || !row {
		t.Fatalf("a's live flag became %x (row %v): b cleared another NameNode's operation", flag, row)
	}
	if _, err := b.Stat(ctx, root, "/d/e/f"); err == nil || meta.KindOf(err) != meta.KindBusy {
		t.Fatalf("stat below the flag: %v, want busy", err)
	}
	// a's own lock walk (the quiesce over a shared store) and b's both see
	// a live flag below.
	if err := b.lockWalk(ctx, store.RootID); err != errFlagBusy {
		t.Fatalf("b's walk of / over a's live flag: %v, want errFlagBusy", err)
	}
}

// TestGoneNameNodesFlagIsCleared: a NameNode that dies with a flag set (its
// instance row left, no longer beating) is judged gone after GoneAfter by
// the other, which clears its flag, removes its row and lets the operation
// waiting below go on.
func TestGoneNameNodesFlagIsCleared(t *testing.T) {
	a, b, st := twoEngines(t)
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/d/e", 0o755))
	id := plantFlag(t, a, st, "/d", a.instance)
	crash(a)
	start := time.Now()
	if _, err := b.Create(ctx, root, "/d/e/f", meta.CreateOptions{Client: "c"}); err != nil {
		t.Fatalf("create below a gone NameNode's flag: %v", err)
	}
	if d := time.Since(start); d < b.cfg.GoneAfter/2 {
		t.Errorf("went on after %v: the flag was cleared before its owner could be judged gone (%v)", d, b.cfg.GoneAfter)
	}
	if flag, row := flagOf(t, st, store.RootID, "d", id); flag != 0 || row {
		t.Fatalf("the gone NameNode's flag %x (row %v) is still there", flag, row)
	}
	deadline := time.Now().Add(5 * time.Second)
	for instanceRow(t, st, a.instance) {
		if time.Now().After(deadline) {
			t.Fatal("the gone NameNode's instance row was not removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !instanceRow(t, st, b.instance) {
		t.Fatal("the live NameNode's instance row is gone")
	}
	fsckClean(t, b)
}

// TestGoneNameNodesDeleteIsFinished: a recursive delete that a NameNode
// left half done when it died is finished by the other once it is judged
// gone, with the quotas above right, not dropped with its flag.
func TestGoneNameNodesDeleteIsFinished(t *testing.T) {
	a, b, _ := twoEnginesWith(t, func(c *Config) { c.SubtreeDeleteBatch = 200 })
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/q/top", 0o755))
	must(t, a.SetQuota(ctx, root, "/q", 100000, 1<<30))
	buildTree(t, a, "/q/top", 8, 150)
	var commits atomic.Int32
	a.testHookCommit = func() {
		if commits.Add(1) == 4 { // the flag, then three batches
			runtime.Goexit()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Delete(ctx, root, "/q/top", true)
		t.Error("the delete returned")
	}()
	<-done
	crash(a)
	// b waits below the flag until a is judged gone and the delete is
	// finished; then /q/top is gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := b.Stat(ctx, root, "/q/top")
		if meta.KindOf(err) == meta.KindNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stat /q/top: %v; the gone NameNode's delete was not finished", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	q, err := b.Stat(ctx, root, "/q")
	must(t, err)
	if q.ChildrenNum != 0 {
		t.Errorf("/q has %d entries after the delete finished", q.ChildrenNum)
	}
	fsckClean(t, b)
}

// TestGoneNameNodesUncheckedDeleteIsCancelled: a NameNode that dies after
// flagging a recursive delete, before its permission check over the
// subtree passed, leaves a delete that no one may finish (its caller may
// not have been allowed it): the NameNode that judges it gone cancels it,
// and the tree stays whole.
func TestGoneNameNodesUncheckedDeleteIsCancelled(t *testing.T) {
	a, b, st := twoEnginesWith(t, func(c *Config) { c.SubtreeDeleteBatch = 200 })
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/q/top", 0o755))
	must(t, a.SetPermission(ctx, root, "/q", 0o777))
	buildTree(t, a, "/q/top", 8, 150) // root's: alice may not delete it
	before, err := a.ContentSummary(ctx, root, "/q/top")
	must(t, err)
	st0, err := a.Stat(ctx, root, "/q/top")
	must(t, err)
	id := st0.FileID
	a.testHookFlag = func(set bool) {
		if set { // the flag committed: dead before the permission check
			runtime.Goexit()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Delete(ctx, meta.User{Name: "alice"}, "/q/top", true)
		t.Error("the delete returned")
	}()
	<-done
	crash(a)
	// Wait until b has judged a gone and dealt with its flag.
	ps, err := b.Stat(ctx, root, "/q")
	must(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.Stat(ctx, root, "/q/top"); meta.KindOf(err) == meta.KindNotFound {
			t.Fatal("the gone NameNode's unchecked delete was finished: alice deleted root's tree")
		}
		flag, row := flagOf(t, st, ps.FileID, "top", id)
		if flag == 0 && !row {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gone NameNode's flag stayed (flag %x, row %v)", flag, row)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cs, err := b.ContentSummary(ctx, root, "/q/top")
	if meta.KindOf(err) == meta.KindNotFound {
		t.Fatal("the gone NameNode's unchecked delete was finished")
	}
	must(t, err)
	if cs.FileCount != before.FileCount || cs.DirectoryCount != before.DirectoryCount {
		t.Fatalf("after the cancel: %+v, before the delete %+v", cs, before)
	}
	fsckClean(t, b)
}

// TestNameNodesOnOneStore: two NameNodes over one store serve one namespace,
// and a subtree operation on one waits for the other's operations below
// (the quiesce's lock walk: neither engine counts the other's attempts).
func TestNameNodesOnOneStore(t *testing.T) {
	a, b, _ := twoEngines(t)
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/x/y", 0o777))
	if _, err := b.Create(ctx, root, "/x/y/f", meta.CreateOptions{Client: "c"}); err != nil {
		t.Fatal(err)
	}
	must(t, a.Rename(ctx, root, "/x", "/z", meta.RenameOptions{}))
	if _, err := b.Stat(ctx, root, "/z/y/f"); err != nil {
		t.Fatalf("b after a's move: %v", err)
	}
	must(t, b.Delete(ctx, root, "/z", true))
	if _, err := a.Stat(ctx, root, "/z"); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("a after b's delete: %v, want not found", err)
	}
	fsckClean(t, a)
}

// TestLeaseRenewedThroughAnotherNameNode: a writer that renews its lease
// through one NameNode keeps it at the other: no takeover after the soft
// limit, no recovery after the hard limit, while it renews; once it stops,
// the other recovers the file.
func TestLeaseRenewedThroughAnotherNameNode(t *testing.T) {
	a, b, _ := twoEnginesWith(t, func(c *Config) {
		c.LeaseSoftLimit = 200 * time.Millisecond
		c.LeaseHardLimit = 600 * time.Millisecond
		c.LeaseCheckInterval = 50 * time.Millisecond
	})
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/w", 0o777))
	alice := meta.User{Name: "alice"}
	if _, err := a.Create(ctx, alice, "/w/f", meta.CreateOptions{Client: "writer"}); err != nil {
		t.Fatal(err)
	}
	// The writer renews through a for twice the hard limit.
	until := time.Now().Add(2 * a.cfg.LeaseHardLimit)
	for time.Now().Before(until) {
		must(t, a.RenewLease(ctx, alice, "writer"))
		time.Sleep(30 * time.Millisecond)
	}
	st, err := b.Stat(ctx, root, "/w/f")
	must(t, err)
	if !st.UnderConstruction {
		t.Fatal("b's lease monitor recovered a file whose writer renews through a")
	}
	_, err = b.Create(ctx, meta.User{Name: "bob"}, "/w/f", meta.CreateOptions{Client: "taker", Overwrite: true})
	wantKind(t, err, meta.ErrLease)
	// The writer goes silent: past the hard limit one of them recovers it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := b.Stat(ctx, root, "/w/f")
		must(t, err)
		if !st.UnderConstruction {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the silent writer's file was never recovered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	fsckClean(t, b)
}

// TestCrossingMovesOnTwoNameNodes: two NameNodes each flag a directory and
// move it into the other's (mv /x /y/x1 on a, mv /y /x/y1 on b), both flags
// set before either work phase, so that each meets the other's flag. The
// younger gives way on both sides alike (the age is in the operation's
// row): one move is done, the other refused (its destination's parent
// has moved away), both well before SubtreeWait. Judged from each NameNode's own
// table alone (the other's operation is not in it), each would wait for
// the other until SubtreeWait.
func TestCrossingMovesOnTwoNameNodes(t *testing.T) {
	const wait = 10 * time.Second
	a, b, _ := twoEnginesWith(t, func(c *Config) { c.SubtreeWait = wait })
	ctx := context.Background()
	must(t, a.Mkdirs(ctx, root, "/x/in", 0o755))
	must(t, a.Mkdirs(ctx, root, "/y/in", 0o755))
	// Each stops before its flag until the other is there too (both plain
	// attempts found a non-empty directory, so neither has met a flag),
	// then after its flag until the other's flag is set too, so that each
	// work phase meets the other's flag.
	var at [2][2]chan struct{}
	for i := range at {
		at[i] = [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	}
	barrier := func(me int) func(set bool) {
		var passed [2]atomic.Bool
		return func(set bool) {
			step := 0
			if set {
				step = 1
			}
			if passed[step].Swap(true) {
				return
			}
			close(at[me][step])
			select {
			case <-at[1-me][step]:
			case <-time.After(wait):
			}
		}
	}
	a.testHookFlag, b.testHookFlag = barrier(0), barrier(1)
	errs := make(chan error, 2)
	start := time.Now()
	go func() { errs <- a.Rename(ctx, root, "/x", "/y/x1", meta.RenameOptions{}) }()
	go func() { errs <- b.Rename(ctx, root, "/y", "/x/y1", meta.RenameOptions{}) }()
	var ok, refused int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case meta.KindOf(err) == meta.KindNotFound:
			refused++
		default:
			t.Errorf("a crossing move: %v", err)
		}
	}
	if d := time.Since(start); d > wait/2 {
		t.Errorf("the crossing moves took %v: they waited for each other (SubtreeWait %v)", d, wait)
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d moves done, %d refused; want one of each", ok, refused)
	}
}
