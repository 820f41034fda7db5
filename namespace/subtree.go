package namespace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/internal/backoff"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// The subtree operations protocol (HopsFS section 6; the phases
// are namespace/subtree's Machine, driven here). A move, chmod or chown of
// a non-empty directory first runs as a plain operation, which finds it has
// a subtree and answers errNeedSubtree; subtreeOp then sets the flag on the
// directory's row, quiesces the subtree, and runs the same operation again
// owning the flag, which its commit clears.

var (
	// errNeedSubtree: the operation met a non-empty directory it must not
	// change without owning its subtree flag.
	errNeedSubtree = errors.New("namespace: needs the subtree protocol")
	// errPlain: the flag phase found no subtree to protect (a file, an
	// empty or vanished directory): the plain operation will do.
	errPlain = errors.New("namespace: not a subtree operation")
	// errFlagBusy: resolution met the flag of an operation under way
	// (opState.busy says which); run waits and retries, to SubtreeWait.
	errFlagBusy = fmt.Errorf("%w: a subtree operation is under way", errRetry)
	// errFlagStale: resolution met the flag of a previous incarnation
	// (opState.stale says where); run clears it and retries.
	errFlagStale = fmt.Errorf("%w: a stale subtree flag", errRetry)
	// errOverlap: the subtree operation overlaps another under way.
	errOverlap = errors.New("namespace: overlaps a subtree operation under way")
)

// keepFlag wraps the error of a work phase that must not clear its flag: a
// recursive delete that removed some of the tree (its directory's row and
// the quotas above wait for its last transaction). The tree below stays
// flagged, so busy, until the next start finishes the delete.
type keepFlag struct{ err error }

func (k *keepFlag) Error() string { return k.err.Error() }
func (k *keepFlag) Unwrap() error { return k.err }

// flagRef is a flagged directory: its row key's parts and id, the path it
// was met at, and the engine instance whose flag it is.
type flagRef struct {
	parent uint64
	name   string
	id     uint64
	path   string
	owner  uint64
}

// checkFlag judges the subtree flag of the row of the directory at path.
func (t *tx) checkFlag(ctx context.Context, row *store.Inode, path string) error {
	v, err := t.e.verdict(ctx, t.st, row.SubtreeOwner, row.ID, t.op.own)
	if err != nil {
		return err
	}
	switch v {
	case subtree.Free, subtree.Own:
		return nil
	case subtree.Stale:
		t.op.needs().flag = flagRef{row.Parent, row.Name, row.ID, path, row.SubtreeOwner}
		if !t.e.alone {
			// Another NameNode's, gone: the reaper takes over its
			// operation (a recursive delete is finished, not dropped);
			// wait for it as for one under way.
			t.e.members.wake()
			return errFlagBusy
		}
		return errFlagStale
	}
	t.op.needs().flag = flagRef{row.Parent, row.Name, row.ID, path, row.SubtreeOwner}
	return errFlagBusy
}

// busyError is run's answer once a flag stayed past SubtreeWait.
func (e *Engine) busyError(opName, path string, f flagRef) error {
	e.subtrees.Lock()
	o, ok := e.subtrees.t.Get(f.id)
	e.subtrees.Unlock()
	what := "a subtree operation"
	if ok {
		what = fmt.Sprintf("a %s of %s", o.Kind, o.Path)
	}
	return meta.Errorf(opName, path, meta.ErrBusy, "%s is locked by %s; still locked after %v, retry later",
		f.path, what, e.cfg.SubtreeWait)
}

// flagWait sleeps before the next attempt of an operation that met a live
// flag: short at first (a small subtree's operation takes a few
// milliseconds), growing to 20ms.
func flagWait(ctx context.Context, n int) error {
	return flagWaitBackoff.Sleep(ctx, n)
}

var flagWaitBackoff = backoff.Policy{Initial: 100 * time.Microsecond, Max: 20 * time.Millisecond, Jitter: backoff.Equal}

// subtreeOp runs work, an operation on the directory at path, under the
// protocol. work runs the work phase owning the flag f (its transactions
// set opState.own to f.id) and clears the flag and its row with its last
// commit; it may answer errPlain when the directory turned out empty or
// gone, and then plain runs (the plain operation) after the flag is
// cleared.
func (e *Engine) subtreeOp(ctx context.Context, opName, path string, u meta.User, kind subtree.Kind,
	work func(f flagRef) error, plain func() error) error {
	m := subtree.NewMachine(e.cfg.SubtreeWait)
	// The age is taken once: a restart after giving way keeps it, so that
	// an operation gets older, not younger, each time it gives way.
	started := e.cfg.Now().UnixNano()
	clock := time.Now()
	now := func() time.Duration { return time.Since(clock) }
	var f flagRef
	var failed error
	var phase subtree.Do // the phase this operation counts in (metrics)
	defer e.metrics.subtreeIn(&phase, 0)
	for a := m.Start(now()); ; {
		e.metrics.subtreeIn(&phase, a.Do)
		var ev subtree.Event
		switch a.Do {
		case subtree.DoSetFlag:
			var err error
			if e.testHookFlag != nil {
				e.testHookFlag(false)
			}
			f, err = e.setFlag(ctx, opName, path, u, kind, started)
			if err == nil && e.testHookFlag != nil {
				e.testHookFlag(true)
			}
			ev, failed = stepEvent(err, subtree.Flagged, failed)
		case subtree.DoQuiesce:
			err := e.quiesce(ctx, f.id)
			switch {
			case err == nil:
				ev = subtree.Quiesced
			case errors.Is(err, errFlagBusy), errors.Is(err, errOverlap), store.IsRetryable(err):
				ev = subtree.Contended
			default:
				ev, failed = subtree.Failed, e.finish(opName, path, err)
			}
		case subtree.DoWork:
			release := e.holdCaches()
			err := work(f)
			release()
			var kf *keepFlag
			if errors.As(err, &kf) {
				e.log.Error("a subtree operation stopped half done (a recursive delete, chmod or chown); the next start finishes it, or on a shared store another NameNode once this one is gone",
					"op", opName, "path", f.path, "err", kf.err)
				return e.finish(opName, path, kf.err)
			}
			ev, failed = stepEvent(err, subtree.Worked, failed)
		case subtree.DoClear:
			// Not with ctx: a cancelled caller must not leave the flag.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			err := e.clearFlagRetrying(cctx, f)
			cancel()
			if err != nil {
				e.log.Error("cannot clear a subtree flag; it is cleared when met after a restart",
					"op", opName, "path", f.path, "err", err)
				ev = subtree.Failed
				if failed == nil {
					failed = e.finish(opName, path, err)
				}
			} else {
				ev = subtree.Cleared
			}
		case subtree.DoWait:
			if err := sleepCtx(ctx, a.Wait); err != nil {
				return &meta.OpError{Op: opName, Path: path, Err: err}
			}
			ev = subtree.Waited
		case subtree.DoFinish:
			switch a.Outcome {
			case subtree.Done:
				return nil
			case subtree.Plain:
				return plain()
			case subtree.GaveUp:
				return meta.Errorf(opName, path, meta.ErrBusy,
					"overlaps a subtree operation under way; still overlapping after %v, retry later", e.cfg.SubtreeWait)
			}
			// A failure of the flag's transaction or of the work's checks
			// (a recursive delete's sub-access check) comes from outside
			// runOnce: recorded here as runOnce records its own. (One
			// that runOnce recorded already is read again: a transaction
			// more, on a failure only.)
			return e.recordOutside(ctx, opName, path, failed)
		}
		a = m.Step(ev, now())
	}
}

// holdCaches keeps the store's caches, where it can (store.CacheHolder),
// from growing with what a subtree operation's work reads once: the rows of
// a tree it deletes or rewrites; and the server's memory with its garbage,
// where the server asked (Config.HoldMemory). Call the result when the work
// ends.
func (e *Engine) holdCaches() (release func()) {
	var caches, heap func()
	if h, ok := e.st.(store.CacheHolder); ok {
		caches = h.HoldCaches()
	}
	if e.cfg.HoldMemory != nil {
		heap = e.cfg.HoldMemory()
	}
	return func() {
		if caches != nil {
			caches()
		}
		if heap != nil {
			heap()
		}
	}
}

// stepEvent maps the outcome of the flag or the work phase to the Machine's
// event: done on success, NotNeeded when the directory turned out not to
// need the protocol, Contended on an overlap, else Failed with err kept as
// the operation's error (failed, the error so far, otherwise).
func stepEvent(err error, done subtree.Event, failed error) (subtree.Event, error) {
	switch {
	case err == nil:
		return done, failed
	case errors.Is(err, errPlain):
		return subtree.NotNeeded, failed
	case errors.Is(err, errOverlap):
		return subtree.Contended, failed
	}
	return subtree.Failed, err
}

// oneTxn is the work of a subtree operation done in one transaction, body,
// whose commit clears the flag.
func (e *Engine) oneTxn(ctx context.Context, opName, path string, u meta.User, body func(t *tx) error) func(f flagRef) error {
	return func(f flagRef) error {
		dup, err := e.runOnce(ctx, opName, path, u, func(t *tx) error {
			t.op.own = f.id
			if err := body(t); err != nil {
				return err
			}
			return t.dropFlag(f)
		})
		if dup != nil {
			// Another submission of the same request did it: clear the
			// flag, and the plain operation answers from the record.
			return errPlain
		}
		return err
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// setFlag is the first phase: one transaction sets the flag on the row of
// the directory at path, with its row in the subtree operation table, and
// registers the operation in the table of those under way (which refuses an
// overlapping one). Path resolution waits for flags on the way, as any
// operation's does.
func (e *Engine) setFlag(ctx context.Context, opName, path string, u meta.User, kind subtree.Kind, started int64) (flagRef, error) {
	var f flagRef
	err := e.run(ctx, opName, path, u, func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: path, last: store.Exclusive})
		if err != nil {
			return err
		}
		n, err := t.existing(opName, rs[0])
		if err != nil {
			return err
		}
		if n.Type != meta.TypeDir || n.Children == 0 {
			return errPlain
		}
		e.subtrees.Lock()
		_, err = e.subtrees.t.Begin(subtree.Op{ID: n.ID, Kind: kind, Path: path,
			Age: subtree.Age{Started: started, Owner: e.instance, ID: n.ID}})
		e.subtrees.Unlock()
		if err != nil {
			return errOverlap
		}
		id := n.ID
		t.undo = append(t.undo, func() { e.endSubtree(id) })
		flagged := *n
		flagged.SubtreeOwner = e.instance
		t.put(&flagged)
		row := store.SubtreeOp{Owner: e.instance, Kind: uint8(kind), Parent: n.Parent, Name: n.Name, Path: path, Started: started}
		if kind == subtree.KindDelete || kind == subtree.KindChmod || kind == subtree.KindChown {
			// The kinds a restart finishes (a recursive chmod or chown
			// starts as its plain kind): whoever finishes writes the
			// request's record (once.go).
			if r, ok := meta.RequestFrom(ctx); ok && e.cfg.RequestTTL > 0 {
				row.ReqClient, row.ReqID = r.Client, r.ID
			}
		}
		t.putRaw(store.SubtreeOpKey(n.ID), store.EncodeSubtreeOp(nil, &row))
		f = flagRef{n.Parent, n.Name, n.ID, path, e.instance}
		return nil
	})
	if errors.Is(err, errPlain) || errors.Is(err, errOverlap) {
		return f, err
	}
	return f, err
}

// yields reports whether the subtree operation on directory own, whose work
// met flag other, gives way to it (subtree.Table.Yields). The other
// operation's age comes from the table when it is this engine's, else from
// its row in the store: on a shared store it may be another NameNode's, and
// both must judge the pair alike, or each waits for the other.
func (e *Engine) yields(ctx context.Context, own uint64, other flagRef) bool {
	e.subtrees.Lock()
	o, ok := e.subtrees.t.Get(other.id)
	e.subtrees.Unlock()
	age := o.Age
	if !ok {
		row, found, err := e.subtreeRow(ctx, other.id)
		if err != nil || !found || row.Owner != other.owner {
			return false // gone or taken over: wait, the flag is met again
		}
		age = subtree.Age{Started: row.Started, Owner: row.Owner, ID: other.id}
	}
	e.subtrees.Lock()
	defer e.subtrees.Unlock()
	return e.subtrees.t.Yields(own, age)
}

// subtreeRow reads the operation row of directory id, unlocked.
func (e *Engine) subtreeRow(ctx context.Context, id uint64) (store.SubtreeOp, bool, error) {
	var row store.SubtreeOp
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return row, false, err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.SubtreeOpKey(id)}})
	if err != nil || vals[0] == nil {
		return row, false, err
	}
	err = store.DecodeSubtreeOp(store.SubtreeOpKey(id), vals[0], &row)
	return row, err == nil, err
}

func (e *Engine) endSubtree(id uint64) {
	e.subtrees.Lock()
	e.subtrees.t.End(id)
	e.subtrees.Unlock()
}

// dropFlag clears the operation's flag in the transaction of its work: on
// the row it wrote (a move writes it under its new key), or on the row as it
// was read, and deletes its table row; the operation leaves the table once
// this commits.
func (t *tx) dropFlag(f flagRef) error {
	done := false
	for _, n := range t.dirty {
		if n != nil && n.ID == f.id {
			if n.SubtreeOwner != t.e.instance {
				return t.lostFlag(f)
			}
			n.SubtreeOwner = 0
			done = true
		}
	}
	if !done {
		n := t.rows.get(hintKey{f.parent, f.name})
		if n == nil || n.ID != f.id {
			return meta.Errorf("subtree", f.path, meta.ErrInternal, "the flagged directory's row is gone")
		}
		if n.SubtreeOwner != t.e.instance {
			return t.lostFlag(f)
		}
		if n.SubtreeOwner != 0 {
			if t.mode(n) != store.Exclusive {
				return t.needExclusive(n.Key())
			}
			c := *n
			c.SubtreeOwner = 0
			t.put(&c)
		}
	}
	t.delRaw(store.SubtreeOpKey(f.id))
	t.after = append(t.after, func() { t.e.endSubtree(f.id) })
	return nil
}

// lostFlag is the error of a subtree operation whose flag is not its own any
// more: another NameNode judged this one gone (it did not beat for
// GoneAfter) and cleared it. Nothing of the operation's last transaction is
// committed.
func (t *tx) lostFlag(f flagRef) error {
	return meta.Errorf("subtree", f.path, meta.ErrBusy,
		"this NameNode lost the subtree flag of %s: another judged it gone after %v without a heartbeat; retry", f.path, t.e.cfg.GoneAfter)
}

// clearFlag clears the flag of directory f.id, and its table row, in a
// transaction of its own, if they are still f.owner's: after a failed or
// overlapping operation (this engine's flag), or a flag whose owner is gone.
// markChecked records in a recursive delete's operation row that its
// permission check passed (store.SubtreeOp.Checked), retried like a flag's
// clear on a passing failure.
func (e *Engine) markChecked(ctx context.Context, f flagRef) error {
	mark := func(ctx context.Context) error {
		txn, err := e.st.Begin(ctx)
		if err != nil {
			return err
		}
		defer txn.Rollback()
		k := store.SubtreeOpKey(f.id)
		vals, err := txn.Read(ctx, []store.ReadReq{{Key: k, Mode: store.Exclusive}})
		if err != nil {
			return err
		}
		var row store.SubtreeOp
		if vals[0] != nil {
			if err := store.DecodeSubtreeOp(k, vals[0], &row); err != nil {
				return err
			}
		}
		if vals[0] == nil || row.Owner != f.owner {
			// Cancelled or taken over by another NameNode that judged this
			// one gone: nothing was deleted, the caller may send it again.
			return meta.Errorf("delete", f.path, meta.ErrBusy, "the recursive delete was cancelled by another NameNode before it began")
		}
		if row.Checked {
			return nil
		}
		row.Checked = true
		txn.Put(k, store.EncodeSubtreeOp(nil, &row))
		return e.commitRaw(ctx, txn)
	}
	for try := 0; ; try++ {
		err := mark(ctx)
		if err == nil || !store.IsRetryable(err) || try == 20 {
			return err
		}
		if serr := flagRetry.Sleep(ctx, try); serr != nil {
			return err
		}
	}
}

// flagRetry is the backoff of the small transactions of the subtree
// protocol that are tried again after a failure that may pass: from 5 ms,
// doubling to 500 ms.
var flagRetry = backoff.Policy{Initial: 5 * time.Millisecond, Max: 500 * time.Millisecond}

// clearFlagRetrying is clearFlag, tried again after a failure that may
// pass (a lock held a moment, a write floor raised meanwhile, a coherence
// session being joined again) with a backoff from 5 ms doubling to 500 ms,
// until ctx ends. A flag left on a directory by a live NameNode is waited
// out by every operation below it until that NameNode stops: giving up at
// the first transient failure stalled a namespace under churn
// (tests/linearizability, TestLinearizableUnderChurn).
func (e *Engine) clearFlagRetrying(ctx context.Context, f flagRef) error {
	for try := 0; ; try++ {
		err := e.clearFlag(ctx, f)
		if err == nil || !store.IsRetryable(err) {
			return err
		}
		if try == 0 {
			e.log.Warn("clearing a subtree flag failed; trying again", "path", f.path, "err", err)
		}
		if serr := flagRetry.Sleep(ctx, try); serr != nil {
			return err
		}
	}
}

func (e *Engine) clearFlag(ctx context.Context, f flagRef) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.InodeKey(f.parent, f.name)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}, {Key: store.SubtreeOpKey(f.id)}})
	if err != nil {
		return err
	}
	if vals[0] != nil {
		var n store.Inode
		if err := store.DecodeInode(key, vals[0], &n); err != nil {
			return err
		}
		if n.ID == f.id && n.SubtreeOwner == f.owner {
			n.SubtreeOwner = 0
			txn.Put(key, store.EncodeInode(nil, &n))
		}
	}
	if vals[1] != nil {
		var row store.SubtreeOp
		if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[1], &row); err != nil || row.Owner == f.owner {
			txn.Delete(store.SubtreeOpKey(f.id))
		}
	}
	// The flagged row is not cached (the engine does not fill one), but a
	// fill that read it before the flag was set may be in flight.
	if err := e.commitRaw(ctx, txn, cache.Key(f.parent, f.name)); err != nil {
		return err
	}
	if f.owner == e.instance {
		e.endSubtree(f.id)
	}
	return nil
}

// quiesceBatch bounds the locks one quiesce transaction takes at a time.
const quiesceBatch = 512

// quiesce is the second phase: it returns once every operation that may have
// resolved its path into the subtree before the flag was set has finished.
//
// The operations of this process: it waits for every attempt in flight when
// it began (grace.go); an attempt that began later read the flagged row
// after the flag's commit. Over a store that is this process's alone that is
// all, and costs the same for a subtree of ten inodes or a million: the
// operations under way elsewhere in the namespace, not the subtree's size.
// (Another subtree operation below is this process's too, and the table of
// operations under way refused the overlap when the flag was set.)
//
// Over a shared store the operations of other NameNodes are not counted
// here: quiesce then also takes and releases, shared and in the global key
// order, the lock of every inode below directory root (lockWalk).
func (e *Engine) quiesce(ctx context.Context, root uint64) error {
	start := time.Now()
	if err := e.grace.wait(ctx); err != nil {
		return err
	}
	e.metrics.quiesceSeconds.Observe(time.Since(start).Seconds())
	if e.alone {
		return nil
	}
	return e.lockWalk(ctx, root)
}

// lockWalk takes and releases, shared and in the global key order, the lock
// of every inode below directory root, level by level, so that every
// operation that resolved its path into the subtree before the flag was
// set, and still holds locks there, has finished. (An operation that locks
// a row after the walk passed it reads the path after that, and meets the
// flag.) It holds the ids of the directories not yet visited, nothing more.
// A live flag below is another subtree operation under way: errFlagBusy.
func (e *Engine) lockWalk(ctx context.Context, root uint64) error {
	queue := []uint64{root}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		var after string
		for {
			reqs, last, err := e.childKeys(ctx, dir, after)
			if err != nil {
				return err
			}
			if len(reqs) == 0 {
				break
			}
			txn, err := e.st.Begin(ctx)
			if err != nil {
				return err
			}
			subdirs, err := e.walkBatch(ctx, txn, reqs, root)
			txn.Rollback()
			if err != nil {
				return err
			}
			queue = append(queue, subdirs...)
			if len(reqs) < quiesceBatch {
				break
			}
			after = last
		}
	}
	return nil
}

// walkBatch takes the locks of reqs, children of one directory in the
// subtree of root, in txn, and returns the ids of those that are non-empty
// directories; a live flag on one is errFlagBusy.
func (e *Engine) walkBatch(ctx context.Context, txn store.Txn, reqs []store.ReadReq, root uint64) ([]uint64, error) {
	vals, err := txn.Read(ctx, reqs)
	if err != nil {
		return nil, err
	}
	var subdirs []uint64
	var n store.Inode
	for i, v := range vals {
		if v == nil {
			continue // deleted meanwhile, by an operation that finished
		}
		if err := store.DecodeInode(reqs[i].Key, v, &n); err != nil {
			return nil, err
		}
		if n.Type != meta.TypeDir {
			continue
		}
		if n.SubtreeOwner != 0 {
			v, err := e.verdict(ctx, txn, n.SubtreeOwner, n.ID, root)
			if err != nil {
				return nil, err
			}
			if v == subtree.Busy {
				return nil, errFlagBusy
			}
		}
		if n.Children > 0 {
			subdirs = append(subdirs, n.ID)
		}
	}
	return subdirs, nil
}

// childKeys lists, unlocked, up to quiesceBatch entries of dir after the
// name after, as shared lock requests in key order, and the last name.
func (e *Engine) childKeys(ctx context.Context, dir uint64, after string) ([]store.ReadReq, string, error) {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return nil, "", err
	}
	defer txn.Rollback()
	start, end := store.ChildrenRange(dir, after)
	var reqs []store.ReadReq
	last := after
	err = txn.Scan(ctx, start, end, quiesceBatch, func(k, _ []byte) bool {
		reqs = append(reqs, store.ReadReq{Key: append([]byte(nil), k...), Mode: store.Shared})
		return true
	})
	if err != nil {
		return nil, "", err
	}
	if len(reqs) > 0 {
		_, last, _ = store.DecodeInodeKey(reqs[len(reqs)-1].Key)
	}
	return reqs, last, nil
}

// recoverSubtreeOps clears, at start, the flags that the operations of
// previous incarnations left (a move, chmod, chown or set quota that did
// not commit its work did nothing; its flag only goes), and finishes the
// recursive deletes they left half done (the caller's permission was
// checked before the first entry went). On a shared store only those whose
// owner has no instance row are (the reaper's first pass, members.go): the
// others may be another NameNode's under way.
func (e *Engine) recoverSubtreeOps(ctx context.Context) error {
	if !e.alone {
		return e.reapGone(ctx)
	}
	return e.recoverSubtreeOpsOf(ctx, func(uint64) bool { return true })
}

// recoverSubtreeOpsOf clears the flags, or finishes the recursive deletes,
// of the subtree operations whose owner gone says is gone.
func (e *Engine) recoverSubtreeOpsOf(ctx context.Context, gone func(owner uint64) bool) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	start, end := store.AllSubtreeOpsRange()
	var left []flagRef
	var deletes []bool
	var decErr error
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var row store.SubtreeOp
		if decErr = store.DecodeSubtreeOp(k, v, &row); decErr != nil {
			return false
		}
		if !gone(row.Owner) {
			return true
		}
		id, _ := store.DecodeSubtreeOpKey(k)
		left = append(left, flagRef{row.Parent, row.Name, id, row.Path, row.Owner})
		deletes = append(deletes, subtree.Kind(row.Kind) == subtree.KindDelete)
		return true
	})
	txn.Rollback()
	if err == nil {
		err = decErr
	}
	if err != nil {
		return fmt.Errorf("namespace: subtree operations: %w", err)
	}
	if len(left) > 0 {
		defer e.holdCaches()() // the deletes, chmods and chowns it finishes
	}
	for i, f := range left {
		if deletes[i] {
			if err := e.resumeDelete(ctx, f); err != nil {
				return fmt.Errorf("namespace: finishing the recursive delete of %s: %w", f.path, err)
			}
			continue
		}
		if ok, err := e.resumeAttrs(ctx, f); ok || err != nil { // ops_attr_recursive.go
			if err != nil {
				return fmt.Errorf("namespace: finishing the recursive change of %s: %w", f.path, err)
			}
			continue
		}
		if err := e.clearFlag(ctx, f); err != nil {
			return fmt.Errorf("namespace: clearing the subtree flag of %s: %w", f.path, err)
		}
		e.log.Info("cleared the subtree flag of an operation that did not finish before a restart", "path", f.path)
	}
	return nil
}

// resumeDelete takes over the flag of a recursive delete that a previous
// incarnation, or a NameNode that is gone, left half done and finishes it.
// (A flag whose row is gone, or whose directory is, only has its row
// removed; one that another engine took over first is left to it.)
func (e *Engine) resumeDelete(ctx context.Context, f flagRef) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	key := store.InodeKey(f.parent, f.name)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}, {Key: store.SubtreeOpKey(f.id)}})
	if err != nil {
		return err
	}
	var n store.Inode
	if vals[0] != nil {
		if err := store.DecodeInode(key, vals[0], &n); err != nil {
			return err
		}
	}
	var row store.SubtreeOp // what the batches so far removed stays in it
	if vals[1] != nil {
		if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[1], &row); err != nil {
			return err
		}
		if row.Owner != f.owner {
			return nil // taken over by another engine meanwhile
		}
	}
	if vals[0] == nil || vals[1] == nil || n.ID != f.id || n.SubtreeOwner == 0 {
		txn.Delete(store.SubtreeOpKey(f.id))
		return e.commitRaw(ctx, txn)
	}
	if n.SubtreeOwner != f.owner {
		return nil
	}
	if !row.Checked && row.PendingInodes == 0 && row.PendingEntries == 0 && row.PendingSpace == 0 {
		// Its NameNode died before the permission check over the subtree
		// passed, and nothing went: finishing it would delete what its
		// caller may not have been allowed to (it did, found by
		// TestLinearizableOnPlatform). Cancelled: the flag goes, and the
		// caller's resubmission runs it again, checks and all.
		n.SubtreeOwner = 0
		txn.Put(key, store.EncodeInode(nil, &n))
		txn.Delete(store.SubtreeOpKey(f.id))
		e.log.Info("cancelled a recursive delete left before its permission check", "path", f.path)
		return e.commitRaw(ctx, txn, cache.Key(f.parent, f.name))
	}
	n.SubtreeOwner, row.Owner = e.instance, e.instance
	txn.Put(key, store.EncodeInode(nil, &n))
	txn.Put(store.SubtreeOpKey(f.id), store.EncodeSubtreeOp(nil, &row))
	if err := e.commitRaw(ctx, txn, cache.Key(f.parent, f.name)); err != nil {
		return err
	}
	e.subtrees.Lock()
	_, err = e.subtrees.t.Begin(subtree.Op{ID: f.id, Kind: subtree.KindDelete, Path: f.path,
		Age: subtree.Age{Started: row.Started, Owner: e.instance, ID: f.id}})
	e.subtrees.Unlock()
	if err != nil {
		return err
	}
	e.log.Info("finishing a recursive delete left by a restart", "path", f.path)
	f.owner = e.instance
	ctx = meta.WithRequest(ctx, meta.Request{Client: row.ReqClient, ID: row.ReqID})
	return e.deleteSubtree(ctx, "delete", f.path, meta.User{Name: e.cfg.Superuser}, f, false)
}
