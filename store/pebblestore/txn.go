package pebblestore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/lockmgr"
)

// txn is a store.Txn: locks from the store's lock manager, writes buffered
// in a Pebble batch. It is used by one goroutine at a time and never reused,
// so a deferred Rollback after Commit cannot touch another transaction.
type txn struct {
	s     *Store
	owner *lockmgr.Owner // nil until the first lock
	batch *pebble.Batch  // nil until the first write
	keys  []written      // the rows written, for the row cache
	// putsEnd is the length of keys after its last Put: no put is past it.
	putsEnd int
	xkeys   [][]byte // keys read under an exclusive lock (row cache only)
	done    bool
	// mustSync is set once the transaction may have read something that
	// is not durable yet: it must not end before it is (see waitDurable).
	mustSync bool
	expects  []expectation // the commit's conditions (Expect)
}

// expectation is a condition of the commit (store.Expecter).
type expectation struct {
	key, max []byte
	failed   func()
}

// Expect implements store.Expecter: the commit takes the keys' locks
// shared, NoWait, reads them and compares, before it writes. Here that is
// no cheaper than a read before Commit; it exists so that callers have one
// path over every store.
func (t *txn) Expect(key, max []byte, failed func()) {
	t.expects = append(t.expects, expectation{key: bytes.Clone(key), max: bytes.Clone(max), failed: failed})
}

// checkExpects reads the expected keys under their locks and judges them.
func (t *txn) checkExpects(ctx context.Context) error {
	reqs := make([]store.ReadReq, len(t.expects))
	for i, e := range t.expects {
		reqs[i] = store.ReadReq{Key: e.key, Mode: store.Shared, NoWait: true, Guard: true}
	}
	vals, err := t.read(ctx, reqs)
	if err != nil {
		return err
	}
	for i, e := range t.expects {
		if vals[i] == nil || bytes.Compare(vals[i], e.max) > 0 {
			if e.failed != nil {
				e.failed()
			}
			return fmt.Errorf("pebblestore: commit: %w: %s is missing or above %x", store.ErrExpectation, store.FormatKey(e.key), e.max)
		}
	}
	return nil
}

// lockOnly reports whether r asks for its lock only (store.ReadReq.LockOnly):
// it is locked, not read, and its value is nil.
func lockOnly(r *store.ReadReq) bool { return r.LockOnly && r.Mode != store.ReadCommitted }

// allLockOnly reports whether a batch reads nothing.
func allLockOnly(reqs []store.ReadReq) bool {
	for i := range reqs {
		if !lockOnly(&reqs[i]) {
			return false
		}
	}
	return true
}

func (t *txn) Read(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	if t.done {
		return nil, store.ErrTxnDone
	}
	return t.read(ctx, reqs)
}

// read is Read on a transaction not yet finished (or finishing: Commit's
// expectations).
func (t *txn) read(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	// Not into a lock wait on a failed store: the holder may never return.
	if err := t.s.failed(); err != nil {
		return nil, err
	}
	for i := range reqs {
		r := &reqs[i]
		if r.Mode == store.ReadCommitted {
			continue
		}
		if t.owner == nil {
			t.owner = t.s.locks.Owner()
		}
		// Locks already taken stay held until Commit or Rollback, as a
		// failed statement leaves a SQL transaction's locks in place.
		if err := t.owner.Lock(ctx, r.Key, r.Mode, r.NoWait); err != nil {
			return nil, err
		}
		if r.Mode == store.Exclusive && t.s.rows != nil {
			t.xkeys = append(t.xkeys, bytes.Clone(r.Key))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vals := make([][]byte, len(reqs))
	if allLockOnly(reqs) {
		return vals, nil // locked: nothing to read
	}
	if err := t.s.acquire(); err != nil {
		return nil, err
	}
	defer t.s.release()
	defer t.noteUnsynced(reqs)
	if t.s.rows != nil {
		return vals, t.readCached(ctx, reqs, vals)
	}
	if len(reqs) > 1 {
		return vals, t.readBatch(ctx, reqs, vals)
	}
	var slab []byte
	for i := range reqs {
		if lockOnly(&reqs[i]) {
			continue
		}
		v, closer, err := t.s.db.Get(reqs[i].Key)
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pebblestore: get %s: %w", store.FormatKey(reqs[i].Key), err)
		}
		// One allocation for the batch's values: carve them from a slab.
		// An empty value is a row: it reads as a non-nil empty slice.
		if len(slab) < len(v) || slab == nil {
			slab = make([]byte, max(len(v), 512))
		}
		vals[i] = slab[:len(v):len(v)]
		copy(vals[i], v)
		slab = slab[len(v):]
		closer.Close()
	}
	return vals, nil
}

func (t *txn) Scan(ctx context.Context, start, end []byte, limit int, fn func(k, v []byte) bool) error {
	if t.done {
		return store.ErrTxnDone
	}
	if err := t.s.acquire(); err != nil {
		return err
	}
	defer t.s.release()
	// A scan cannot tell which rows an unsynced commit removed from its
	// range, so it waits whenever a commit was unsynced when it ended.
	defer func() {
		if t.s.unsynced.Load() > 0 {
			t.mustSync = true
		}
	}()
	// A range inside one partition is answered from the scan cache when the
	// partition is there; a scan of a whole partition fills it.
	var (
		pid     store.PartitionID
		gen     uint64
		builder *partitionBuilder
	)
	if c := t.s.scans; c != nil {
		var ok bool
		if pid, ok = store.PartitionOf(start); ok && pid.Covers(start, end) {
			var part *partition
			if part, gen = c.get(pid); part != nil {
				t.s.metrics.scanCacheHits.Inc()
				part.scan(start, end, limit, fn)
				return nil
			}
			t.s.metrics.scanCacheMiss.Inc()
			if pid.Whole(start, end) {
				builder = &partitionBuilder{maxRows: c.maxRows}
			}
		}
	}
	it, err := t.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("pebblestore: scan: %w", err)
	}
	n := 0
	valid := it.First()
	for ; valid; valid = it.Next() {
		if n&255 == 255 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("pebblestore: scan %s: %w", store.FormatKey(it.Key()), err)
		}
		n++
		if builder != nil && !builder.add(it.Key(), v) {
			builder = nil
		}
		if !fn(it.Key(), v) || (limit > 0 && n >= limit) {
			break
		}
	}
	t.s.noteScanWaste(it)
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: scan: %w", err)
	}
	// Installed only when the iterator ran off the partition's end: then
	// the builder holds all of it.
	if builder != nil && !valid {
		if part := builder.finish(); part != nil {
			t.s.scans.fill(pid, part, gen)
		}
	}
	return nil
}

// noteUnsynced, after a read of reqs, sets mustSync if one of their keys
// was written by a commit that is visible but not synced. Checked after the
// read: a commit that synced in between is durable, one still unsynced is
// still in the set.
func (t *txn) noteUnsynced(reqs []store.ReadReq) {
	if t.mustSync || t.s.unsynced.Load() == 0 {
		return
	}
	for i := range reqs {
		if t.s.pendingKeys.has(reqs[i].Key) {
			t.mustSync = true
			return
		}
	}
}

// Put buffers a write; after Commit or Rollback it is ignored.
func (t *txn) Put(key, value []byte) {
	if t.done {
		return
	}
	if t.batch == nil {
		t.batch = t.s.db.NewBatch()
	}
	_ = t.batch.Set(key, value, nil) // copies; a batch Set only fails on a closed batch
	keep := t.s.rows != nil && len(value) <= maxCachedValue && store.RowCacheable(key)
	if !keep {
		value = nil // the key only: never installed
	}
	t.keys = append(t.keys, newWritten(key, value, true, keep))
	t.putsEnd = len(t.keys)
}

// Delete buffers a deletion; after Commit or Rollback it is ignored.
func (t *txn) Delete(key []byte) {
	if t.done {
		return
	}
	if t.batch == nil {
		t.batch = t.s.db.NewBatch()
	}
	_ = t.batch.Delete(key, nil)
	t.keys = append(t.keys, newWritten(key, nil, false, t.s.rows != nil))
}

// DeleteRange implements store.RangeDeleter with one Pebble range tombstone.
// The caches know rows by key, not by range, so the rows in the range are
// listed now and recorded as deletions, as Delete records one: the commit
// drops them from the row and scan caches and counts them as pending for
// the readers that must wait for its sync. The caller's locks keep the
// range from gaining a row before the commit (the RangeDeleter contract),
// so the list is what the tombstone deletes. The listing costs one
// iterator (none when the scan cache holds the range's partition), far less
// than a tombstone per row in the log, the memtable and every level a scan
// crosses until compaction.
func (t *txn) DeleteRange(ctx context.Context, start, end []byte) error {
	if t.done {
		return store.ErrTxnDone
	}
	if bytes.Compare(start, end) >= 0 {
		return nil
	}
	if err := t.s.acquire(); err != nil {
		return err
	}
	defer t.s.release()
	// What this transaction put in the range goes with it: never installed.
	// (Only puts matter: a deletion's absence stays true. A recursive
	// delete puts nothing before its ranges, and skips the loop, which
	// would be quadratic over its thousands of rows.)
	for i := range t.keys[:t.putsEnd] {
		if w := &t.keys[i]; w.keep && bytes.Compare(w.key, start) >= 0 && bytes.Compare(w.key, end) < 0 {
			w.keep = false
		}
	}
	keep := t.s.rows != nil
	// A range inside one partition the scan cache holds (a directory just
	// listed, as a recursive delete does) is listed from there: the cache
	// is coherent with every commit, and the caller's locks keep the range
	// as it is until this one.
	if c := t.s.scans; c != nil {
		if pid, ok := store.PartitionOf(start); ok && pid.Covers(start, end) {
			if part, _ := c.get(pid); part != nil {
				part.scan(start, end, 0, func(k, _ []byte) bool {
					t.keys = append(t.keys, newWritten(k, nil, false, keep))
					return true
				})
				t.deleteRange(start, end)
				return nil
			}
		}
	}
	it, err := t.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("pebblestore: delete range %s: %w", store.FormatKey(start), err)
	}
	// A failed listing records nothing: a caller that commits anyway must
	// not have rows that stay installed as absent.
	listed := len(t.keys)
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if n++; n&255 == 0 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				t.keys = t.keys[:listed]
				return err
			}
		}
		t.keys = append(t.keys, newWritten(it.Key(), nil, false, keep))
	}
	if err := it.Close(); err != nil {
		t.keys = t.keys[:listed]
		return fmt.Errorf("pebblestore: delete range %s: %w", store.FormatKey(start), err)
	}
	t.deleteRange(start, end)
	return nil
}

// deleteRange buffers the range tombstone of DeleteRange.
func (t *txn) deleteRange(start, end []byte) {
	if t.batch == nil {
		t.batch = t.s.db.NewBatch()
	}
	_ = t.batch.DeleteRange(start, end, nil) // copies; fails only on a closed batch
	t.s.metrics.rangeDeletes.Inc()
}

func (t *txn) Commit(ctx context.Context) error {
	if t.done {
		return store.ErrTxnDone
	}
	t.done = true
	defer t.finish()
	if t.batch == nil || t.batch.Empty() {
		return t.waitDurable()
	}
	// The commit is not interrupted by ctx once started: a half-known outcome
	// is worse than a late one. ctx is checked before.
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(t.expects) > 0 {
		if err := t.checkExpects(ctx); err != nil {
			return err
		}
	}
	if err := t.s.acquire(); err != nil {
		return err
	}
	defer t.s.release()
	start := time.Now()
	// Early lock release (unless Options.HoldLocksThroughSync). The batch
	// goes to the WAL and becomes visible, the locks are released, and only
	// then does the commit wait for the WAL fsync. A transaction that takes
	// the released locks and reads the new rows either commits after this
	// one in the WAL (so its own sync covers this one) or ends without
	// writing, and then waitDurable makes it wait for the sync too. So no
	// caller is ever told anything that a crash could take back, while the
	// locks are not held through the fsync: writers of the same directory
	// no longer queue behind each other's syncs, they share them.
	//
	// Pebble makes a batch visible before its sync in both modes, so both
	// count it as unsynced, from before it can be seen until it is synced.
	early := !t.s.opts.HoldLocksThroughSync
	t.s.unsynced.Add(1)
	t.s.pendingKeys.add(t.keys)
	defer func() {
		t.s.pendingKeys.remove(t.keys)
		t.s.unsynced.Add(-1)
	}()
	if t.s.rows != nil {
		t.s.rows.beginCommit(t.keys) // before and after the batch becomes visible: see rowCache
	}
	if t.s.scans != nil {
		t.s.scans.beginCommit(t.keys) // likewise: see scanCache
	}
	err := t.applyBatch(early)
	if t.s.rows != nil {
		t.s.rows.endCommit(t.installable(err))
	}
	if t.s.scans != nil {
		t.s.scans.endCommit(t.keys)
	}
	// Any error of Pebble's commit is fatal (failstop.go): the batch may be
	// in the log or not, and the log cannot take another.
	if err != nil {
		return t.s.failStop("commit", err)
	}
	if early {
		t.releaseLocks()
		if err := t.batch.SyncWait(); err != nil {
			err = t.s.failStop("commit: wal sync", err)
			t.forget()
			return err
		}
	}
	// Pebble's sync may have "succeeded" only because the log's error was
	// kept from it (walfs.go): the store failed before Pebble heard of the
	// sync, so this load sees it.
	if err := t.s.failed(); err != nil {
		t.forget()
		return err
	}
	t.s.commits.Add(1)
	t.s.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// Rollback waits for the durability of what the transaction read, as Commit
// does, but cannot say when that failed: a caller that answers on what it
// read (a stat, "exists") ends with Commit, which returns the error. The
// wait stays so that no lock is released before the rows it protected are
// durable.
func (t *txn) Rollback() {
	if t.done {
		return
	}
	t.done = true
	_ = t.waitDurable()
	t.finish()
}

// forget drops the rows of a commit whose WAL sync failed from the row and
// scan caches, where they were installed when the batch became visible: they
// may not be in the log, and a restart would not have them. The store has
// failed by then (failStop), so no later read reaches the caches; this is
// for the reads already past that check.
func (t *txn) forget() {
	for i := range t.keys {
		t.keys[i].keep = false
	}
	if t.s.rows != nil {
		t.s.rows.beginCommit(t.keys)
		t.s.rows.endCommit(t.keys)
	}
	if t.s.scans != nil {
		t.s.scans.beginCommit(t.keys)
		t.s.scans.endCommit(t.keys)
	}
}

// waitDurable returns once everything this transaction may have read is
// durable. A row becomes visible before its commit's WAL sync (always in
// Pebble, and here before the locks go); every such commit counts itself in
// unsynced, and its keys in pendingKeys, from before it is visible until its
// sync returns. A transaction that read one of those keys (or scanned while
// any commit was unsynced) commits a log-only record with a sync: it lands
// in the WAL after every batch already visible, so its sync covers them
// (and it joins the same group commit). The others return at once.
func (t *txn) waitDurable() error {
	// A commit whose sync failed counts itself out of unsynced and its keys
	// out of pendingKeys (Commit's deferred remove) as one that synced, so
	// the checks below would let a transaction that read its rows end with
	// success. failStop records the failure before that remove: once the
	// store has failed, that is the answer of every transaction still under
	// way (one atomic load).
	if err := t.s.failed(); err != nil {
		return err
	}
	if !t.mustSync || t.s.unsynced.Load() == 0 {
		return nil
	}
	if err := t.s.acquire(); err != nil {
		return err
	}
	defer t.s.release()
	t.s.metrics.durableWaits.Inc()
	if err := t.s.logSync(); err != nil {
		return t.s.failStop("wait for the wal sync", err)
	}
	return nil
}

// installable marks the written rows that endCommit may put in the row
// cache: after a successful commit, those whose key this transaction holds
// exclusively, so no other transaction can be writing it now (the store.Txn
// contract: a row written under an exclusive lock is only ever written under
// it). The others are only dropped from the cache.
func (t *txn) installable(commitErr error) []written {
	var xset map[string]struct{} // for big transactions (a recursive delete locks thousands)
	if len(t.xkeys) > 16 {
		xset = make(map[string]struct{}, len(t.xkeys))
		for _, k := range t.xkeys {
			xset[string(k)] = struct{}{}
		}
	}
	locked := func(key []byte) bool {
		if xset != nil {
			_, ok := xset[string(key)]
			return ok
		}
		return slices.ContainsFunc(t.xkeys, func(k []byte) bool { return bytes.Equal(k, key) })
	}
	for i := range t.keys {
		w := &t.keys[i]
		if w.keep && (commitErr != nil || !locked(w.key)) {
			w.keep = false
		}
	}
	return t.keys
}

func (t *txn) releaseLocks() {
	if t.owner != nil {
		t.owner.Release()
		t.owner = nil
	}
}

// finish drops the batch and releases the locks that are still held.
func (t *txn) finish() {
	if t.batch != nil {
		_ = t.batch.Close()
		t.batch = nil
	}
	t.releaseLocks()
}

// readBatch reads several keys through one iterator, seeking in key order: one
// iterator costs far less than one Get per key, and the values come from one
// consistent view of the store.
func (t *txn) readBatch(ctx context.Context, reqs []store.ReadReq, vals [][]byte) error {
	order := make([]int, 0, len(reqs))
	for i := range reqs {
		if !lockOnly(&reqs[i]) {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return nil
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(reqs[a].Key, reqs[b].Key) })
	lo, hi := reqs[order[0]].Key, reqs[order[len(order)-1]].Key
	upper := append(bytes.Clone(hi), 0)
	it, err := t.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("pebblestore: read: %w", err)
	}
	var slab []byte
	for _, i := range order {
		k := reqs[i].Key
		// SeekPrefixGE, not SeekGE: the whole key is the prefix (the
		// default comparer's Split), so the tables' bloom filters skip
		// every level that lacks it (an absent rename target, a cold
		// file row) instead of seeking through their indexes.
		if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("pebblestore: get %s: %w", store.FormatKey(k), err)
		}
		if len(slab) < len(v) || slab == nil {
			slab = make([]byte, max(len(v), 1024))
		}
		vals[i] = slab[:len(v):len(v)]
		copy(vals[i], v)
		slab = slab[len(v):]
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: read: %w", err)
	}
	return nil
}

// readCached answers what it can from the row cache and reads the rest from
// Pebble, filling the cache with what it read.
func (t *txn) readCached(ctx context.Context, reqs []store.ReadReq, vals [][]byte) error {
	var missReqs []store.ReadReq
	var missIdx []int
	var gens []uint64
	locked := 0 // lock-only requests: neither hits nor misses
	for i := range reqs {
		if lockOnly(&reqs[i]) {
			locked++
			continue
		}
		row, hit, gen := t.s.rows.get(reqs[i].Key)
		if hit {
			if row.present {
				vals[i] = row.v
			}
			continue
		}
		missReqs = append(missReqs, reqs[i])
		missIdx = append(missIdx, i)
		gens = append(gens, gen)
	}
	if len(missReqs) == 0 {
		t.s.metrics.rowCacheHits.Add(float64(len(reqs) - locked))
		return nil
	}
	t.s.metrics.rowCacheHits.Add(float64(len(reqs) - locked - len(missReqs)))
	t.s.metrics.rowCacheMisses.Add(float64(len(missReqs)))
	got := make([][]byte, len(missReqs))
	if len(missReqs) > 1 {
		if err := t.readBatch(ctx, missReqs, got); err != nil {
			return err
		}
	} else {
		v, closer, err := t.s.db.Get(missReqs[0].Key)
		switch {
		case err == pebble.ErrNotFound:
		case err != nil:
			return fmt.Errorf("pebblestore: get %s: %w", store.FormatKey(missReqs[0].Key), err)
		default:
			got[0] = bytes.Clone(v)
			closer.Close()
		}
	}
	for j, i := range missIdx {
		vals[i] = got[j]
		t.s.rows.fill(missReqs[j].Key, got[j], gens[j])
	}
	return nil
}
