package namespace

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace/subtree"
	"github.com/nimbus-fs/nimbus/store"
)

// Recursive chmod and chown: one operation of the server under
// the subtree protocol (subtree.go), not a client's walk of SetPermission
// and SetOwner calls, which it changes as that walk would: every file and
// directory, symbolic links below excepted. Its work, owning the flag of the
// directory:
//
//	check  unless the caller is a superuser, every inode of the subtree is
//	       read (unlocked: the flagged subtree does not change) and must
//	       allow the change; the first refusal ends the operation with its
//	       path, nothing changed;
//	change breadth first, each store transaction changes up to attrBatch
//	       inodes below the directory (locked exclusive, in key order),
//	       attrInFlight at a time; the first also turns the operation's row
//	       into a KindChmodR or KindChownR with what it sets, so that a
//	       crash from then on is finished at the next start (resumeAttrs):
//	       the change of an inode is idempotent, so that one starts again
//	       from the top;
//	last   the directory itself changes, and its flag goes, in one
//	       transaction.
//
// Every path into the subtree meets the flag until the last commit and
// waits, so no one sees the subtree half changed: the operation takes
// effect at its last commit. Memory: the ids of the directories not yet
// visited (8 bytes each), and the keys of attrInFlight+1 batches.

var _ meta.RecursiveAttrs = (*Engine)(nil)

// attrBatch bounds the inodes one transaction of a recursive chmod or chown
// reads or changes.
const attrBatch = 1024

// SetPermissionRecursive implements meta.RecursiveAttrs. Locks: the
// directory's subtree flag (subtree.go); each batch's inodes exclusive.
func (e *Engine) SetPermissionRecursive(ctx context.Context, u meta.User, path string, perm meta.Perm) error {
	return e.updateRecursive(ctx, path, u, subtree.KindChmod, chmodChange(perm),
		store.SubtreeOp{Kind: uint8(subtree.KindChmodR), SetPerm: uint32(perm)})
}

// SetOwnerRecursive implements meta.RecursiveAttrs. Locks: as
// SetPermissionRecursive.
func (e *Engine) SetOwnerRecursive(ctx context.Context, u meta.User, path, owner, group string) error {
	return e.updateRecursive(ctx, path, u, subtree.KindChown, chownChange(owner, group),
		store.SubtreeOp{Kind: uint8(subtree.KindChownR), SetUser: owner, SetGroup: group})
}

// updateRecursive runs c on every inode of the subtree at path. A file or
// an empty directory is one plain transaction; a non-empty directory goes
// under the protocol as kind (the plain kind: until its first batch commits
// the operation row says that a restart has nothing to finish), and its
// first batch rewrites the row as args says.
func (e *Engine) updateRecursive(ctx context.Context, path string, u meta.User, kind subtree.Kind, c attrChange, args store.SubtreeOp) error {
	p, err := clean(c.op, path)
	if err != nil {
		return err
	}
	body := func(t *tx) error {
		rs, err := t.resolve(ctx, want{path: p, last: store.Exclusive})
		if err != nil {
			return err
		}
		n, err := t.existing(c.op, rs[0])
		if err != nil {
			return err
		}
		// The directory first: a refusal there needs no walk.
		if err := c.check(t, p, n); err != nil {
			return err
		}
		if n.Type == meta.TypeDir && n.Children > 0 {
			return errNeedSubtree
		}
		c.apply(n)
		t.put(n)
		return nil
	}
	plain := func() error { _, err := e.runOnce(ctx, c.op, p, u, body); return err }
	for {
		err := plain()
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
		work := func(f flagRef) error {
			if err := e.checkAttrs(ctx, p, u, f, c); err != nil {
				return err
			}
			return e.changeAttrs(ctx, p, u, f, c, args)
		}
		err = e.subtreeOp(ctx, c.op, p, u, kind, work, plain)
		if !errors.Is(err, errNeedSubtree) {
			return err
		}
	}
}

// attrWalk is the position of a breadth-first walk of a subtree: the
// directories with entries not yet visited, the first from the entry after
// the name after.
type attrWalk struct {
	queue []uint64
	after string
}

// attrStep is one batch of a walk, taken by scan and applied by advance
// once the batch's transaction committed (a retried one scans again).
type attrStep struct {
	done  int      // directories of the queue finished
	after string   // the position in the next one
	found []uint64 // directories with entries met in the batch
}

// scan visits, unlocked, up to limit entries from w's position; fn gets
// each entry and the id of its directory (the entry is reused: fn copies
// what it keeps).
func (w *attrWalk) scan(ctx context.Context, t *tx, limit int, s *attrStep, fn func(dir uint64, c *store.Inode) error) error {
	s.done, s.after, s.found = 0, w.after, s.found[:0]
	seen := 0
	var last []byte
	for s.done < len(w.queue) && seen < limit {
		dir := w.queue[s.done]
		n := 0
		var ferr error
		err := t.children(ctx, dir, s.after, limit-seen, func(c *store.Inode) bool {
			n++
			last = append(last[:0], c.Name...) // c.Name is a view of the scanned key
			if c.Type == meta.TypeDir && c.Children > 0 {
				s.found = append(s.found, c.ID)
			}
			ferr = fn(dir, c)
			return ferr == nil
		})
		if err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
		seen += n
		if seen < limit {
			s.done++ // fewer than asked: the directory is done
			s.after = ""
		} else {
			s.after = string(last)
		}
	}
	return nil
}

func (w *attrWalk) advance(s *attrStep) {
	w.queue = append(w.queue[s.done:], s.found...)
	w.after = s.after
}

// checkAttrs is the check phase: unless u is a superuser, every inode below
// the flagged directory at root must allow c (the directory itself was
// checked by the plain attempt, and is again in the last transaction).
func (e *Engine) checkAttrs(ctx context.Context, root string, u meta.User, f flagRef, c attrChange) error {
	w := attrWalk{queue: []uint64{f.id}}
	var s attrStep
	for len(w.queue) > 0 {
		var refused *store.Inode
		var refusedIn uint64
		super := false
		err := e.run(ctx, c.op, root, u, func(t *tx) error {
			t.op.own = f.id
			super, refused = t.super, nil
			if t.super {
				return nil
			}
			return w.scan(ctx, t, attrBatch, &s, func(dir uint64, n *store.Inode) error {
				if n.Type == meta.TypeSymlink {
					return nil
				}
				if err := c.check(t, "", n); err != nil {
					cp := *n
					cp.Name = string([]byte(n.Name))
					refused, refusedIn = &cp, dir
					return err
				}
				return nil
			})
		})
		if refused != nil {
			// The error again, with the path: found by a walk from the top
			// (the walk keeps ids, not paths).
			dir, perr := e.pathOf(ctx, c.op, root, u, f, refusedIn)
			if perr != nil {
				return perr
			}
			return e.run(ctx, c.op, root, u, func(t *tx) error {
				if err := c.check(t, meta.JoinPath(dir, refused.Name), refused); err != nil {
					return err
				}
				return meta.Errorf(c.op, root, meta.ErrInternal, "the change refused below was allowed when checked again")
			})
		}
		if err != nil || super {
			return err
		}
		w.advance(&s)
	}
	return nil
}

// pathOf returns the path of directory id in the flagged subtree at root:
// a depth-first search holding one position per level (a refusal's path
// only: the walks keep ids).
func (e *Engine) pathOf(ctx context.Context, op, root string, u meta.User, f flagRef, id uint64) (string, error) {
	type level struct {
		id    uint64
		path  string
		after string
	}
	stack := []level{{f.id, root, ""}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.id == id {
			return top.path, nil
		}
		var next *level
		var last string
		var n int
		err := e.run(ctx, op, root, u, func(t *tx) error {
			t.op.own = f.id
			next, last, n = nil, top.after, 0
			return t.children(ctx, top.id, top.after, attrBatch, func(c *store.Inode) bool {
				n++
				last = string([]byte(c.Name))
				if c.Type == meta.TypeDir && c.Children > 0 {
					next = &level{c.ID, meta.JoinPath(top.path, c.Name), ""}
					return false
				}
				return true
			})
		})
		if err != nil {
			return "", err
		}
		top.after = last
		switch {
		case next != nil:
			stack = append(stack, *next)
		case n == 0:
			stack = stack[:len(stack)-1]
		}
	}
	return "", meta.Errorf(op, root, meta.ErrInternal, "directory %d not found below", id)
}

// attrInFlight bounds the batches of a recursive chmod or chown committing
// at once: while one waits for its log sync, the next is read and changed,
// and their syncs are shared (group commit).
const attrInFlight = 2

// changeAttrs is the change phase: c on every inode below the flagged
// directory at root in batches, then on the directory itself with the
// flag's release. args (the operation row's kind and what c sets) goes into
// the operation row with the first batch; the batches after it commit
// attrInFlight at a time, in any order (the subtree is flagged, the change
// of an inode idempotent). Once the first committed, the operation goes on
// whatever happens to its caller; a failure keeps the flag and the next
// start finishes it.
func (e *Engine) changeAttrs(ctx context.Context, root string, u meta.User, f flagRef, c attrChange, args store.SubtreeOp) error {
	w := attrWalk{queue: []uint64{f.id}}
	first, err := e.scanAttrBatch(ctx, &w)
	if err != nil {
		return err
	}
	if err := e.commitAttrBatch(ctx, first, c, func(txn store.Txn) error { return markAttrsStarted(ctx, txn, f, args) }); err != nil {
		return err
	}
	// From here on the change goes to the end: a half-changed subtree is
	// finished only by the next start otherwise.
	ctx = context.WithoutCancel(ctx)
	batches := make(chan []store.ReadReq)
	var failed error
	var mu sync.Mutex
	var wg sync.WaitGroup
	gone := make(chan struct{}) // closed when a worker ends before the last batch
	var once sync.Once
	for range attrInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer once.Do(func() { close(gone) })
			for b := range batches {
				if err := e.commitAttrBatch(ctx, b, c, nil); err != nil {
					mu.Lock()
					failed = cmp.Or(failed, err)
					mu.Unlock()
				}
			}
		}()
	}
	for len(w.queue) > 0 {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop {
			break
		}
		b, err := e.scanAttrBatch(ctx, &w)
		if err != nil {
			mu.Lock()
			failed = cmp.Or(failed, err)
			mu.Unlock()
			break
		}
		if len(b) == 0 {
			continue
		}
		select {
		case batches <- b:
			continue
		case <-gone:
		}
		mu.Lock()
		failed = cmp.Or(failed, errors.New("a batch worker stopped"))
		mu.Unlock()
		break
	}
	close(batches)
	wg.Wait()
	if failed != nil {
		return &keepFlag{meta.Errorf(c.op, root, meta.ErrInternal, "changing the subtree: %v", failed)}
	}
	var dup *store.RequestRecord
	dup, err = e.runOnce(ctx, c.op, root, u, func(t *tx) error {
		t.op.own = f.id
		rs, err := t.resolve(ctx, want{path: root, last: store.Exclusive})
		if err != nil {
			return err
		}
		n := rs[0].last()
		if n == nil || n.ID != f.id {
			return meta.Errorf(c.op, root, meta.ErrInternal, "the directory under the subtree flag is gone")
		}
		if err := c.check(t, root, n); err != nil {
			return err
		}
		c.apply(n)
		t.put(n)
		return t.dropFlag(f)
	})
	if dup != nil {
		return errPlain // another submission did it: see oneTxn
	}
	if err != nil {
		return &keepFlag{err}
	}
	return nil
}

// scanAttrBatch reads, unlocked, the keys of the next batch of w's walk
// (symbolic links left out: the shell's walk skips them) and advances w.
// The flagged subtree does not change meanwhile, so what it reads stays
// true.
func (e *Engine) scanAttrBatch(ctx context.Context, w *attrWalk) ([]store.ReadReq, error) {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	t := &tx{e: e, st: txn, op: &opState{}}
	var reqs []store.ReadReq
	var s attrStep
	err = w.scan(ctx, t, attrBatch, &s, func(_ uint64, n *store.Inode) error {
		if n.Type != meta.TypeSymlink {
			reqs = append(reqs, store.ReadReq{Key: n.Key(), Mode: store.Exclusive})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.advance(&s)
	// In key order, holding nothing else: no deadlock. Under the flag only
	// an operation backing off from it holds one, briefly.
	slices.SortFunc(reqs, func(a, b store.ReadReq) int { return bytes.Compare(a.Key, b.Key) })
	return reqs, nil
}

// commitAttrBatch changes the inodes of reqs in one store transaction (with
// more, when given), restarted as the engine restarts an operation. The
// rows are written under their exclusive locks, the store's rule; no key or
// id changes, so the hint cache stays true.
func (e *Engine) commitAttrBatch(ctx context.Context, reqs []store.ReadReq, c attrChange, more func(txn store.Txn) error) error {
	var err error
	for attempt := 0; attempt < e.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err = sleepBackoff(ctx, attempt); err != nil {
				return err
			}
		}
		if err = e.changeRows(ctx, reqs, c, more); err == nil || !store.IsRetryable(err) {
			return err
		}
	}
	return err
}

func (e *Engine) changeRows(ctx context.Context, reqs []store.ReadReq, c attrChange, more func(txn store.Txn) error) error {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, reqs)
	if err != nil {
		return err
	}
	var n store.Inode
	var buf []byte
	for i, rq := range reqs {
		if vals[i] == nil {
			return fmt.Errorf("namespace: inode row %s under a subtree flag is gone", store.FormatKey(rq.Key))
		}
		// A view: its strings alias the row, which EncodeInode copies from
		// before the next one is decoded.
		if err := store.DecodeInodeView(rq.Key, vals[i], &n); err != nil {
			return err
		}
		c.apply(&n)
		buf = store.EncodeInode(buf[:0], &n)
		txn.Put(rq.Key, buf)
	}
	if more != nil {
		if err := more(txn); err != nil {
			return err
		}
	}
	if e.testHookCommit != nil {
		e.testHookCommit()
	}
	return e.commitRaw(ctx, txn)
}

// markAttrsStarted rewrites, in txn, the operation row of flag f with
// args: the kind that a restart finishes, and what it sets.
func markAttrsStarted(ctx context.Context, txn store.Txn, f flagRef, args store.SubtreeOp) error {
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.SubtreeOpKey(f.id)}})
	if err != nil {
		return err
	}
	if vals[0] == nil {
		return meta.Errorf("subtree", f.path, meta.ErrInternal, "the subtree operation row is gone")
	}
	var row store.SubtreeOp
	if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[0], &row); err != nil {
		return err
	}
	row.Kind, row.SetPerm, row.SetUser, row.SetGroup = args.Kind, args.SetPerm, args.SetUser, args.SetGroup
	txn.Put(store.SubtreeOpKey(f.id), store.EncodeSubtreeOp(nil, &row))
	return nil
}

// resumeAttrs finishes, at start, a recursive chmod or chown that a previous
// incarnation left half done (the operation row of flag f says so): it
// takes the flag over and changes the whole subtree again, from the top (the
// caller's permission was checked before the first change). ok is false
// when the row is not one.
func (e *Engine) resumeAttrs(ctx context.Context, f flagRef) (ok bool, err error) {
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer txn.Rollback()
	key := store.InodeKey(f.parent, f.name)
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive}, {Key: store.SubtreeOpKey(f.id)}})
	if err != nil {
		return false, err
	}
	var row store.SubtreeOp
	if vals[1] == nil {
		return false, nil
	}
	if err := store.DecodeSubtreeOp(store.SubtreeOpKey(f.id), vals[1], &row); err != nil {
		return false, err
	}
	if row.Owner != f.owner {
		return true, nil // taken over by another NameNode meanwhile
	}
	var c attrChange
	switch subtree.Kind(row.Kind) {
	case subtree.KindChmodR:
		c = chmodChange(meta.Perm(row.SetPerm))
	case subtree.KindChownR:
		c = chownChange(row.SetUser, row.SetGroup)
	default:
		return false, nil
	}
	var n store.Inode
	if vals[0] != nil {
		if err := store.DecodeInode(key, vals[0], &n); err != nil {
			return true, err
		}
	}
	if vals[0] == nil || n.ID != f.id || n.SubtreeOwner == 0 {
		txn.Delete(store.SubtreeOpKey(f.id))
		return true, e.commitRaw(ctx, txn)
	}
	if n.SubtreeOwner != f.owner {
		return true, nil
	}
	n.SubtreeOwner, row.Owner = e.instance, e.instance
	txn.Put(key, store.EncodeInode(nil, &n))
	txn.Put(store.SubtreeOpKey(f.id), store.EncodeSubtreeOp(nil, &row))
	if err := e.commitRaw(ctx, txn, cache.Key(f.parent, f.name)); err != nil {
		return true, err
	}
	e.subtrees.Lock()
	_, err = e.subtrees.t.Begin(subtree.Op{ID: f.id, Kind: subtree.Kind(row.Kind), Path: f.path,
		Age: subtree.Age{Started: row.Started, Owner: e.instance, ID: f.id}})
	e.subtrees.Unlock()
	if err != nil {
		return true, err
	}
	e.log.Info("finishing a recursive "+c.op+" left by a restart", "path", f.path)
	args := store.SubtreeOp{Kind: row.Kind, SetPerm: row.SetPerm, SetUser: row.SetUser, SetGroup: row.SetGroup}
	f.owner = e.instance
	ctx = meta.WithRequest(ctx, meta.Request{Client: row.ReqClient, ID: row.ReqID})
	err = e.changeAttrs(ctx, f.path, meta.User{Name: e.cfg.Superuser}, f, c, args)
	var kf *keepFlag
	if errors.As(err, &kf) {
		err = kf.err
	}
	return true, err
}
