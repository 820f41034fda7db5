package namespace

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// errRetry makes the run loop roll the attempt back and start the operation
// again: a hint was stale, or the operation learnt that it needs more locks.
var errRetry = errors.New("namespace: retry")

// opState survives the attempts of one operation.
type opState struct {
	noHints bool       // resolve from the store, not the hint cache
	late    *lateNeeds // nil until an attempt finds it needs more
	movedTo string     // where a file being written is now (see writerFile)
	own     uint64     // the directory whose subtree flag this operation owns (subtree.go)
	rec     *recState  // nil unless a write recorded for its request id (once.go)
}

// lateNeeds are what an attempt learnt too late, for the next attempts to
// take from their start. Rare, so behind one pointer: opState stays in its
// allocation size class on every operation.
type lateNeeds struct {
	extraX  map[string]bool // keys to lock exclusive
	streams []*fileWriter   // block streams to take before the first lock (see stopStream)
	flag    flagRef         // the subtree flag the last attempt met (errFlagBusy, errFlagStale)
}

// needs returns op's late needs, made on first use.
func (op *opState) needs() *lateNeeds {
	if op.late == nil {
		op.late = &lateNeeds{}
	}
	return op.late
}

// tx is one attempt of one operation: a store transaction with its
// per-transaction cache of inode rows.
type tx struct {
	e      *Engine
	st     store.Txn
	op     *opState
	user   string
	groups []string
	// The flags share one word (tx is allocated per attempt; its size
	// class is the allocation).
	super bool
	raw   bool // rows other than inodes were written (putRaw, delRaw)
	// commitUnknown: the commit's outcome is unknown (store.ErrCommitUnknown):
	// an undo must not destroy what the commit may have kept.
	commitUnknown bool
	// partial: a recorded write's transaction that does not finish it
	// (once.go); status, below: what the record of one that does keeps.
	// recPending: its record's lock is still to be taken.
	partial    bool
	recPending bool
	now        int64 // ms, one clock reading per attempt

	rows   rowTable                // every row read or written, and its lock mode
	dirty  map[string]*store.Inode // rows to write at commit (nil: delete)
	fresh  map[string]bool         // keys of dirty rows that create an inode where no row was (create)
	chunks map[string][]byte       // content chunks written by this transaction
	// rawDeleted: inode rows deleted with delRaw, not through dirty, kept
	// for the invalidation targets (invalidate.go) when those are computed.
	rawDeleted []string
	inodes     []store.Inode // slab of decoded rows (newInode)
	after      []func()      // run once the transaction committed
	undo       []func()      // run if it did not
	status     *meta.FileStatus
}

// run executes fn as one transaction, restarting it when it asks for a retry
// or a lock could not be had, and commits when fn returns nil.
func (e *Engine) run(ctx context.Context, opName, path string, u meta.User, fn func(t *tx) error) error {
	return e.runOp(ctx, opName, path, u, nil, fn)
}

// runOp is run, for a write recorded under its request id when rec is not
// nil (once.go): each attempt first reads the record, and the attempt
// that commits the write writes it. An attempt whose commit carried the
// record and has an unknown outcome is run again: the record says whether
// it committed.
func (e *Engine) runOp(ctx context.Context, opName, path string, u meta.User, rec *recState, fn func(t *tx) error) error {
	start := time.Now()
	if err := checkUser(opName, path, u); err != nil {
		e.metrics.observe(opName, err, time.Since(start))
		return err
	}
	groups, super := e.identity(u.Name)
	op := &opState{rec: rec}
	var err error
	var flagSince time.Time // the first meeting of a live subtree flag
	flagWaits := 0
	var settleSince time.Time // the first failed attempt to settle a commit in doubt
	settleWaits := 0
	for attempt := 0; attempt < e.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			e.metrics.retries.WithLabelValues(opName).Inc()
			if err = sleepBackoff(ctx, attempt); err != nil {
				break
			}
		}
		err = e.attempt(ctx, op, u.Name, groups, super, fn)
		switch {
		case errors.Is(err, errFlagBusy):
			// A subtree operation is under way above or at a component:
			// wait for it (its quiesce and work), to SubtreeWait, without
			// spending attempts. A subtree operation's own work that meets
			// an older one's flag gives way instead (subtree.Table.Yields).
			if op.own != 0 && e.yields(ctx, op.own, op.late.flag) {
				err = errOverlap
				attempt = e.cfg.MaxAttempts
				continue
			}
			if flagSince.IsZero() {
				flagSince = time.Now()
			} else if time.Since(flagSince) > e.cfg.SubtreeWait {
				err = e.busyError(opName, path, op.late.flag)
				attempt = e.cfg.MaxAttempts
				continue
			}
			if err = flagWait(ctx, flagWaits); err != nil {
				attempt = e.cfg.MaxAttempts
				continue
			}
			flagWaits++
			attempt--
			continue
		case errors.Is(err, errFlagStale):
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			cerr := e.clearFlag(cctx, op.late.flag)
			cancel()
			if cerr != nil {
				err = cerr
				attempt = e.cfg.MaxAttempts
				continue
			}
			e.log.Info("cleared a stale subtree flag", "path", op.late.flag.path)
			continue
		}
		if rec != nil && rec.inDoubt && store.IsRetryable(err) {
			// Settling a commit in doubt, and the store is unreachable
			// (a database restarting or failing over): wait for it
			// longer than attempts allow, since giving up now answers
			// "outcome unknown".
			if settleSince.IsZero() {
				settleSince = time.Now()
			}
			if time.Since(settleSince) < settleWait {
				if err = flagWait(ctx, settleWaits); err != nil {
					attempt = e.cfg.MaxAttempts
					continue
				}
				settleWaits++
				attempt--
				continue
			}
		}
		if errors.Is(err, errRetry) || store.IsRetryable(err) {
			continue
		}
		if rec != nil && rec.inDoubt && errors.Is(err, store.ErrCommitUnknown) {
			e.metrics.requestsInDoubt.Inc()
			continue // the next attempt's read of the record settles it
		}
		break
	}
	if errors.Is(err, errAnswered) {
		e.metrics.requestsAnswered.WithLabelValues(opName).Inc()
		e.metrics.observe(opName, nil, time.Since(start))
		return nil
	}
	if err != nil && rec != nil && rec.inDoubt {
		// The record could not be read again: the write may have happened.
		err = meta.Errorf(opName, path, meta.ErrOutcomeUnknown, "the store lost the answer to the commit, and its record could not be read again: %v", err)
	}
	if errors.Is(err, errRetry) || store.IsRetryable(err) {
		err = meta.Errorf(opName, path, meta.ErrBusy, "gave up after %d attempts: %v", e.cfg.MaxAttempts, err)
	}
	if errors.Is(err, errNeedSubtree) || errors.Is(err, errPlain) || errors.Is(err, errOverlap) {
		return err // the caller's next step, not an answer
	}
	err = e.finish(opName, path, err)
	e.metrics.observe(opName, err, time.Since(start))
	return err
}

// attempt runs fn once in a fresh store transaction. The transaction is
// always rolled back on the way out (a no-op after a commit), even if fn
// panics, so no lock outlives the attempt.
func (e *Engine) attempt(ctx context.Context, op *opState, user string, groups []string, super bool, fn func(t *tx) error) error {
	// Block streams come before row locks (blocks.go): an attempt that
	// learnt it needs one takes it before its transaction begins.
	if op.late != nil {
		for _, fw := range op.late.streams {
			fw.mu.Lock()
			defer fw.mu.Unlock()
		}
	}
	// Counted in flight from before its first read to after its commit or
	// rollback, for the subtree quiesce (grace.go).
	ep := e.grace.enter()
	defer e.grace.exit(ep)
	st, err := e.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer st.Rollback()
	t := &tx{e: e, st: st, op: op, user: user, groups: groups, super: super,
		now: e.cfg.Now().UnixMilli()}
	// The request record's lock (and read) joins the attempt's first
	// resolve (once.go); one that never resolved takes it here.
	t.recPending = op.rec != nil
	err = fn(t)
	if t.recPending && (err == nil || !errors.Is(err, errRetry) && !store.IsRetryable(err)) {
		if cerr := t.checkRecord(ctx); cerr != nil {
			err = cerr
		}
	}
	recorded := false
	switch {
	case errors.Is(err, errAnswered):
		// The answer rests on the record: wait for its durability, as
		// any read's answer does (see the empty commit below).
		if cerr := st.Commit(ctx); cerr != nil {
			err = cerr
		}
	case err == nil && (len(t.dirty) > 0 || t.raw):
		recorded = t.putRecord()
		if err = t.flush(); err == nil {
			// Invalidate with the locks held, before the commit; release
			// after it (invalidate.go).
			var release func(bool)
			if release, err = t.invalidate(ctx); err == nil {
				if e.testHookCommit != nil {
					e.testHookCommit()
				}
				err = st.Commit(ctx)
				release(err == nil)
			}
		}
	case err == nil, !t.raw && !errors.Is(err, errRetry) && !store.IsRetryable(err):
		// Nothing to write, but an answer to give (a stat, or "exists"):
		// the commit of an empty transaction is the store's wait for the
		// durability of what it read, and unlike Rollback it says when that
		// failed, so no answer rests on a row whose sync failed. (A failed
		// attempt that wrote rows itself can only roll back; restarts
		// answer nothing yet.)
		//
		// A recorded write that succeeded without changing anything (mkdirs
		// of a directory that exists) commits its record all the same: a
		// late copy of its request must answer from it, not run the write
		// on what the client's later writes left (re-create the directory
		// the client has renamed away since).
		if err == nil {
			recorded = t.putRecord()
		}
		if cerr := st.Commit(ctx); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		t.commitUnknown = errors.Is(err, store.ErrCommitUnknown)
		for _, f := range t.undo {
			f()
		}
		if t.commitUnknown && recorded {
			op.rec.inDoubt, op.rec.after = true, t.after
		}
		return err
	}
	for _, f := range t.after {
		f()
	}
	return nil
}

// finish gives every error the op and path, and a kind.
func (e *Engine) finish(opName, path string, err error) error {
	if err == nil {
		return nil
	}
	var oe *meta.OpError
	if errors.As(err, &oe) {
		return err
	}
	switch {
	case errors.Is(err, store.ErrCommitUnknown):
		// Before the context errors: a commit cut off by its deadline
		// may have happened all the same.
		return meta.Errorf(opName, path, meta.ErrOutcomeUnknown, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &meta.OpError{Op: opName, Path: path, Err: err}
	case errors.Is(err, store.ErrCorrupt):
		e.log.Error("corrupt metadata", "op", opName, "path", path, "err", err)
		return meta.Errorf(opName, path, meta.ErrInternal, "%v", err)
	case meta.KindOf(err) != meta.KindUnknown:
		return &meta.OpError{Op: opName, Path: path, Err: err}
	}
	e.log.Error("store failure", "op", opName, "path", path, "err", err)
	return meta.Errorf(opName, path, meta.ErrInternal, "%v", err)
}

func sleepBackoff(ctx context.Context, attempt int) error {
	if attempt < 3 {
		return ctx.Err() // the first restarts are usually stale hints: no wait
	}
	d := time.Duration(50<<min(attempt-3, 10)) * time.Microsecond
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// want says how an operation needs one path: the lock mode of its last
// component, of the last component's parent, and of the other ancestors.
type want struct {
	path      string
	last      store.Mode
	parent    store.Mode
	ancestors store.Mode
}

// resolved is a path after the lock phase.
type resolved struct {
	path  string
	comps []string
	// chain[0] is the root; chain[k] is the inode of comps[k-1], or nil when it
	// does not exist. After the first nil every entry is nil.
	chain []*store.Inode
	// end is the index of the last chain entry that was looked up: the first
	// missing or non-directory component, or len(comps).
	end int
}

func (r *resolved) depth() int { return len(r.comps) }

// last returns the inode the path names, or nil when it does not exist.
func (r *resolved) last() *store.Inode { return r.chain[len(r.comps)] }

// parent returns the parent directory's inode, or nil when it does not exist
// (or for the root).
func (r *resolved) parent() *store.Inode {
	if len(r.comps) == 0 {
		return nil
	}
	return r.chain[len(r.comps)-1]
}

// name returns the last component ("" for the root).
func (r *resolved) name() string {
	if len(r.comps) == 0 {
		return ""
	}
	return r.comps[len(r.comps)-1]
}

// prefix returns the path of the first k components: a prefix of path,
// which comps were split from (meta.SplitPath), so nothing is allocated.
func (r *resolved) prefix(k int) string {
	if k == 0 {
		return meta.RootPath
	}
	n := 0
	for _, c := range r.comps[:k] {
		n += len(meta.PathSep) + len(c)
	}
	if n <= len(r.path) && (n == len(r.path) || r.path[n] == '/') {
		return r.path[:n]
	}
	p := meta.RootPath // comps not split from path: build it
	for _, c := range r.comps[:k] {
		p = meta.JoinPath(p, c)
	}
	return p
}

// plan is the lock phase's view of one wanted path.
type plan struct {
	w     want
	comps []string
	keys  [][]byte // keys[k] is the key of chain entry k; len = looked-up entries
	ids   []uint64 // ids[k] is the id expected for chain entry k (0: unknown)
}

// resolve runs the lock phase for the wanted paths: it computes the keys of
// every component from the hint cache (reading the store, unlocked, where a
// hint is missing), locks and reads all of them in one batch in key order,
// and validates what it read against the hints. A stale hint makes it return
// errRetry after dropping the hints it used.
func (t *tx) resolve(ctx context.Context, wants ...want) ([]*resolved, error) {
	sc := resolveScratchPool.Get().(*resolveScratch)
	defer sc.release()
	for len(sc.mem) < len(wants) {
		sc.mem = append(sc.mem, planMem{})
	}
	plans := append(sc.plans[:0], make([]plan, len(wants))...)
	sc.plans = plans
	for i, w := range wants {
		p, err := t.guess(ctx, w, plans[:i], &sc.mem[i])
		if err != nil {
			return nil, err
		}
		plans[i] = p
	}

	// One request per key, at the strongest mode asked, in key order. Each
	// carries its (parent, name), the name taken from the path's components
	// so that no key needs decoding.
	ks := sc.ks[:0]
	for _, p := range plans {
		n := len(p.comps)
		for k, key := range p.keys {
			m := p.w.ancestors
			switch {
			case k == n:
				m = p.w.last
			case k == n-1:
				m = max(m, p.w.parent)
			}
			hk := hintKey{parent: store.RootParentID}
			if k > 0 {
				hk = hintKey{parent: binary.BigEndian.Uint64(key[1:9]), name: p.comps[k-1]}
			}
			ks = append(ks, keyed{store.ReadReq{Key: key, Mode: m}, hk, p.ids[k]})
		}
	}
	var extraX map[string]bool
	if t.op.late != nil {
		extraX = t.op.late.extraX
	}
	for k := range extraX {
		parent, name, _ := store.DecodeInodeKey([]byte(k))
		ks = append(ks, keyed{store.ReadReq{Key: []byte(k), Mode: store.Exclusive}, hintKey{parent, name}, 0})
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.req.Key, b.req.Key); c != 0 {
			return c
		}
		return int(b.req.Mode) - int(a.req.Mode) // strongest first, so the dedup keeps it
	})
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return bytes.Equal(a.req.Key, b.req.Key) })
	reqs := sc.reqs[:0]
	rec := t.recPending
	if rec {
		// The request record's lock (and read), first (once.go).
		reqs = append(reqs, t.recordReq())
	}
	for i := range ks {
		reqs = append(reqs, ks[i].req)
	}
	sc.ks, sc.reqs = ks, reqs // kept for the next resolve, grown or not
	vals, err := t.st.Read(ctx, reqs)
	if err != nil {
		return nil, err
	}
	if rec {
		if err := t.recordRead(ctx, vals[0]); err != nil {
			return nil, err
		}
		vals = vals[1:]
	}
	t.reserveInodes(len(ks))
	for i, k := range ks {
		t.rows.setMode(k.hk, k.req.Mode)
		if err := t.cacheRowHinted(k.hk, vals[i], k.id); err != nil {
			return nil, err
		}
	}

	out := make([]*resolved, len(plans))
	for i := range plans {
		r, err := t.validate(ctx, &plans[i])
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// keyed is one key of resolve's batch read, with its (parent, name).
type keyed struct {
	req store.ReadReq
	hk  hintKey
	id  uint64 // the id the plan expects (0: unknown), whose hint is in place
}

// resolveScratch is resolve's working memory, reused from call to call (a
// rename's is ~3 KB): nothing in it outlives the call. The keys it builds
// are copied by whatever keeps one (the lock manager, the store's caches).
type resolveScratch struct {
	plans []plan
	mem   []planMem // mem[i] backs plans[i]'s keys and ids
	ks    []keyed
	reqs  []store.ReadReq
}

// planMem is the memory of one plan's keys and ids.
type planMem struct {
	keys [][]byte
	ids  []uint64
	buf  []byte // the bytes of keys
}

var resolveScratchPool = sync.Pool{New: func() any { return new(resolveScratch) }}

// release clears what the scratch points to (keys, names) and returns it to
// the pool.
func (sc *resolveScratch) release() {
	clear(sc.plans[:cap(sc.plans)])
	clear(sc.ks[:cap(sc.ks)])
	clear(sc.reqs[:cap(sc.reqs)])
	for i := range sc.mem {
		clear(sc.mem[i].keys[:cap(sc.mem[i].keys)])
	}
	sc.plans, sc.ks, sc.reqs = sc.plans[:0], sc.ks[:0], sc.reqs[:0]
	resolveScratchPool.Put(sc)
}

// guess computes the keys of a path's components without locks. The
// directories it shares with the paths of earlier plans of the same
// operation (a rename within one directory shares all of them) are taken
// from those plans, not looked up again.
func (t *tx) guess(ctx context.Context, w want, earlier []plan, mem *planMem) (plan, error) {
	comps := meta.SplitPath(w.path)
	// mem's keys and ids hold every component's without growing, and all the
	// keys share one buffer: 9 bytes of table and parent id plus the name.
	if cap(mem.keys) < len(comps)+1 {
		mem.keys, mem.ids = make([][]byte, 0, len(comps)+1), make([]uint64, 0, len(comps)+1)
	}
	if need := 9*(len(comps)+1) + len(w.path); cap(mem.buf) < need {
		mem.buf = make([]byte, 0, need)
	}
	p := plan{w: w, comps: comps, keys: mem.keys[:1], ids: mem.ids[:1]}
	buf := mem.buf[:0]
	key := func(parent uint64, name string) []byte {
		start := len(buf)
		buf = store.AppendInodeKey(buf, parent, name)
		return buf[start:len(buf):len(buf)]
	}
	p.keys[0] = key(store.RootParentID, "")
	p.ids[0] = store.RootID
	parent := store.RootID
	k := 1
	if q := longestShared(comps, earlier); q != nil {
		// Entry k of q names the same directory when the names up to k are
		// the same and q went on below it (it built key k+1 from its id).
		for ; k < len(comps) && k+1 < len(q.keys) && q.comps[k-1] == comps[k-1]; k++ {
			p.keys = append(p.keys, q.keys[k])
			p.ids = append(p.ids, q.ids[k])
			parent = q.ids[k]
		}
	}
	for ; k <= len(comps); k++ {
		name := comps[k-1]
		p.keys = append(p.keys, key(parent, name))
		if k == len(comps) {
			p.ids = append(p.ids, 0) // the last component's id is not needed for keys
			break
		}
		id, ok := uint64(0), false
		if !t.op.noHints {
			id, ok = t.e.hints.get(parent, name)
		}
		if ok {
			t.e.metrics.hintHits.Inc()
		} else {
			t.e.metrics.hintMisses.Inc()
			vals, err := t.st.Read(ctx, []store.ReadReq{{Key: p.keys[k], Mode: store.ReadCommitted}})
			if err != nil {
				return p, err
			}
			if vals[0] == nil {
				p.ids = append(p.ids, 0)
				break // missing: the components below cannot be named
			}
			var n store.Inode
			if err := store.DecodeInode(p.keys[k], vals[0], &n); err != nil {
				return p, err
			}
			if n.Type != meta.TypeDir {
				p.ids = append(p.ids, n.ID)
				break // a file or symlink in the middle: validation reports it
			}
			id = n.ID
			t.e.hints.put(parent, name, id)
		}
		p.ids = append(p.ids, id)
		parent = id
	}
	return p, nil
}

// longestShared returns the earlier plan whose path shares the most leading
// components with comps (nil if none shares one).
func longestShared(comps []string, earlier []plan) *plan {
	var best *plan
	bestN := 0
	for i := range earlier {
		q := &earlier[i]
		n := 0
		for n < len(comps) && n < len(q.comps) && comps[n] == q.comps[n] {
			n++
		}
		if n > bestN {
			best, bestN = q, n
		}
	}
	return best
}

// validate checks the rows read for a plan against what the plan assumed.
// Every key is built from the id of the row before it, and that row is checked
// first, so a missing row is the truth at read time; a row whose id differs
// from its hint means the keys after it were built from a stale hint.
func (t *tx) validate(ctx context.Context, p *plan) (*resolved, error) {
	n := len(p.comps)
	r := &resolved{path: p.w.path, comps: p.comps, chain: make([]*store.Inode, n+1)}
	root := t.rows.get(hintKey{parent: store.RootParentID})
	if root == nil {
		return nil, meta.Errorf("resolve", "/", meta.ErrInternal, "the root inode is missing")
	}
	r.chain[0] = root
	if root.SubtreeOwner != 0 {
		if err := t.checkFlag(ctx, root, meta.RootPath); err != nil {
			return nil, err
		}
	}
	last := len(p.keys) - 1
	for k := 1; k <= last; k++ {
		row := t.rows.get(hintKey{binary.BigEndian.Uint64(p.keys[k][1:9]), p.comps[k-1]})
		r.end = k
		if row == nil {
			if k < last {
				parent, name, _ := store.DecodeInodeKey(p.keys[k])
				t.e.hints.drop(parent, name)
			}
			return r, nil
		}
		if k < n {
			if p.ids[k] == 0 || row.ID != p.ids[k] {
				// Found missing by the guess but present now, or a stale hint.
				t.staleHint(p, k)
				return nil, errRetry
			}
			if row.Type == meta.TypeDir && k == last {
				t.op.noHints = true // cannot happen: ids never change type
				return nil, errRetry
			}
		}
		r.chain[k] = row
		if row.Type != meta.TypeDir {
			return r, nil
		}
		if row.SubtreeOwner != 0 {
			// Read after every lock of the batch was taken: an operation
			// that the quiesce did not wait for sees the flag here.
			if err := t.checkFlag(ctx, row, r.prefix(k)); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func (t *tx) staleHint(p *plan, k int) {
	parent, name, _ := store.DecodeInodeKey(p.keys[k])
	t.e.hints.drop(parent, name)
	t.op.noHints = true
}

// cacheRow decodes a row into the per-transaction cache.
func (t *tx) cacheRow(key, val []byte) error {
	parent, name, ok := store.DecodeInodeKey(key)
	if !ok {
		return store.DecodeInode(key, val, new(store.Inode)) // reports the bad key
	}
	return t.cacheRowAt(hintKey{parent, name}, val)
}

func (t *tx) cacheRowAt(hk hintKey, val []byte) error { return t.cacheRowHinted(hk, val, 0) }

// cacheRowHinted is cacheRowAt for a row whose directory id the hint cache
// was just seen to hold (hinted, 0 if not): the hint is not put again when
// the row confirms it, the common case on every path component.
func (t *tx) cacheRowHinted(hk hintKey, val []byte, hinted uint64) error {
	keep := t.e.inv != nil
	if val == nil {
		t.rows.setRead(hk, nil, keep)
		return nil
	}
	n := t.newInode()
	if err := store.DecodeInodeValue(hk.parent, hk.name, val, n); err != nil {
		return err
	}
	t.rows.setRead(hk, n, keep)
	if n.Type == meta.TypeDir && n.ID != hinted {
		t.e.hints.put(n.Parent, n.Name, n.ID)
	}
	return nil
}

// newInode returns a zeroed inode for a row this transaction decodes,
// carved from a slab: an operation decodes about ten rows (every component
// of one or two paths), and the lock phase reserves room for all of them in
// one allocation instead of ten.
func (t *tx) newInode() *store.Inode {
	if len(t.inodes) == cap(t.inodes) {
		t.reserveInodes(4)
	}
	t.inodes = t.inodes[:len(t.inodes)+1]
	return &t.inodes[len(t.inodes)-1]
}

// reserveInodes makes room in the slab for n more inodes.
func (t *tx) reserveInodes(n int) {
	if cap(t.inodes)-len(t.inodes) < n {
		t.inodes = make([]store.Inode, 0, n) // the old slab stays with the rows carved from it
	}
}

// put records n to be written at commit; the per-transaction cache sees it
// at once. Writing the same row again before commit replaces the first write.
func (t *tx) put(n *store.Inode) {
	if t.dirty == nil {
		t.dirty = make(map[string]*store.Inode, 4)
	}
	t.dirty[string(n.Key())] = n
	t.rows.set(hintKey{n.Parent, n.Name}, n)
}

// create is put for a new inode whose key had no row when the operation
// read it (or whose parent was created by this transaction): the store is
// asked to insert it, not to overwrite, where it can tell the difference
// (store.Inserter). The parent's lock is what keeps a second creator of the
// key out; if that ever failed, the second creation would fail and be
// retried, instead of replacing the first inode and orphaning what was
// made below it.
func (t *tx) create(n *store.Inode) {
	t.put(n)
	if t.fresh == nil {
		t.fresh = make(map[string]bool, 2)
	}
	t.fresh[string(n.Key())] = true
}

// del records n's row to be deleted at commit.
func (t *tx) del(n *store.Inode) {
	if t.dirty == nil {
		t.dirty = make(map[string]*store.Inode, 4)
	}
	t.dirty[string(n.Key())] = nil
	delete(t.fresh, string(n.Key()))
	t.rows.set(hintKey{n.Parent, n.Name}, nil)
	t.e.hints.drop(n.Parent, n.Name)
}

// putRaw and delRaw buffer writes of rows other than inodes, straight into
// the store transaction; raw records that there are some, so that a
// transaction writing only such rows commits too.
func (t *tx) putRaw(key, value []byte) {
	t.raw = true
	t.st.Put(key, value)
}

func (t *tx) delRaw(key []byte) {
	t.raw = true
	t.st.Delete(key)
	if _, _, ok := store.DecodeInodeKey(key); ok && t.e.inv != nil {
		// An inode row deleted past dirty (a recursive delete's): its
		// invalidation targets are computed with the others (targets).
		t.rawDeleted = append(t.rawDeleted, string(key))
	}
}

// flush hands the dirty inode rows to the store in one batch. Every inode
// row written must be locked exclusive by this transaction, or be new in a
// directory it locked exclusive (mkdir -p's intermediate directories): that
// is the HopsFS discipline, and the store's row cache relies on it (a row
// one transaction writes under its exclusive lock, no other writes without
// that lock or its parent's). A row that breaks it is a bug of the
// operation, reported instead of committed.
func (t *tx) flush() error {
	if err := t.checkWriteLocks(); err != nil {
		return err
	}
	var buf []byte
	ins, _ := t.st.(store.Inserter)
	for key, n := range t.dirty {
		if n == nil {
			t.st.Delete([]byte(key))
			continue
		}
		buf = store.EncodeInode(buf[:0], n)
		if ins != nil && t.fresh[key] {
			ins.Insert([]byte(key), buf)
		} else {
			t.st.Put([]byte(key), buf)
		}
		if n.Type == meta.TypeDir {
			t.e.hints.put(n.Parent, n.Name, n.ID)
		}
	}
	return nil
}

// checkWriteLocks checks flush's rule: each dirty row is locked exclusive,
// or lives in a directory that is (locked exclusive, or itself new and
// allowed by this rule).
func (t *tx) checkWriteLocks() error {
	var xdirs map[uint64]bool
	for key := range t.dirty {
		if t.lockedExclusive([]byte(key)) {
			continue
		}
		if xdirs == nil {
			xdirs = make(map[uint64]bool)
			for _, r := range t.rows.list {
				if r.n != nil && r.mode == store.Exclusive {
					xdirs[r.n.ID] = true
				}
			}
			for grew := true; grew; { // new directories below those, level by level
				grew = false
				for k, n := range t.dirty {
					if n == nil || xdirs[n.ID] {
						continue
					}
					if parent, _, ok := store.DecodeInodeKey([]byte(k)); ok && xdirs[parent] {
						xdirs[n.ID], grew = true, true
					}
				}
			}
		}
		if parent, _, ok := store.DecodeInodeKey([]byte(key)); !ok || !xdirs[parent] {
			return meta.Errorf("commit", "", meta.ErrInternal, "inode row %s written without an exclusive lock on it or its directory", store.FormatKey([]byte(key)))
		}
	}
	return nil
}

// lockedExclusive reports whether this transaction holds the inode row key
// exclusively.
func (t *tx) lockedExclusive(key []byte) bool {
	parent, name, ok := store.DecodeInodeKey(key)
	return ok && t.rows.mode(hintKey{parent, name}) == store.Exclusive
}

// mode returns the lock mode key was read in (ReadCommitted if not read).
func (t *tx) mode(n *store.Inode) store.Mode { return t.rows.mode(hintKey{n.Parent, n.Name}) }

// needExclusive records that key must be locked exclusive from the start and
// restarts the operation: HopsFS never upgrades a lock in place.
func (t *tx) needExclusive(key []byte) error {
	late := t.op.needs()
	if late.extraX == nil {
		late.extraX = make(map[string]bool)
	}
	late.extraX[string(key)] = true
	return errRetry
}

// children scans the entries of directory dir (unlocked, one snapshot). The
// inode passed to fn is reused for the next entry, and its name is a view of
// the scanned key: fn copies what it keeps.
func (t *tx) children(ctx context.Context, dir uint64, startAfter string, limit int, fn func(n *store.Inode) bool) error {
	start, end := store.ChildrenRange(dir, startAfter)
	var decErr error
	// One for the whole scan, its name a view of the scanned key: fn keeps
	// neither n nor n.Name (it copies what it needs, into a path or a key).
	var n store.Inode
	err := t.st.Scan(ctx, start, end, limit, func(k, v []byte) bool {
		if decErr = store.DecodeInodeView(k, v, &n); decErr != nil {
			return false
		}
		return fn(&n)
	})
	if err != nil {
		return err
	}
	return decErr
}
