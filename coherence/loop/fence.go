package loop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/store"
)

// The fence and the write floor in the store (coherence/doc.go, "Joins"
// and "Fencing"; docs/ELASTIC.md, "Coherence across servers").
// Two kinds of rows, in the store-wide metadata table:
//
//	'm' "coherence/floor"        -> uint64 (8, big-endian): the write floor, a membership revision
//	'm' "coherence/fence/" id    -> 1 byte: 0 live, 1 fenced: incarnation id's fence row
//
// Every write transaction of a coherent engine reads both, shared, just
// before its commit (check): its own fence row must say live, and the view
// its targets were computed from must not be below the floor. Raising the
// floor, and fencing an incarnation, are transactions that lock the row
// exclusive, so they wait for the writes holding it shared to end, and
// every write that locks it after sees the new value. Every lock of these
// rows is a guard (store.ReadReq.Guard): the floor is locked shared by
// every write of the cluster, and as a PostgreSQL row lock that cost each
// write a multixact. Where the store can, the check is an expectation of
// the write's commit (expect, store.Expecter), which on PostgreSQL saves
// the round trip a read before the commit costs (docs/BENCHMARKS.md,
// "Caches and coherence", has what the check costs a create). The
// shared reads are
// NoWait (they are taken out of the key order, after the write's other
// locks): a write that meets a raise or a fence under way fails with
// store.ErrLockBusy and is run again, and nothing can deadlock.
//
// Both rows must exist before the first write that relies on them: a
// store need not lock a missing row (SQL cannot), so a write that read the
// row missing would hold no lock a raise or a fence could wait for. The
// loop creates the floor row and its own fence row before its incarnation
// writes anything, and a check that finds either missing refuses the write.

var floorKey = store.MetaKey("coherence/floor")

func fenceKey(id coherence.NodeID) []byte { return store.MetaKey("coherence/fence/" + string(id)) }

const (
	fenceLive   = 0
	fenceFenced = 1
)

// Errors of the store check. Both wrap store.ErrUnavailable: nothing was
// written and the operation may run again (under a new incarnation, or a
// view at or above the floor).
var (
	// ErrFenced: this incarnation was fenced (its peers saw it leave the
	// membership); it can commit nothing more.
	ErrFenced = fmt.Errorf("%w: coherence: this instance incarnation is fenced", store.ErrUnavailable)
	// ErrBelowFloor: the write's targets were computed from a view older
	// than the store's write floor: an instance that joined since may
	// cache what it changes, and was not invalidated.
	ErrBelowFloor = fmt.Errorf("%w: coherence: write begun under a view below the write floor", store.ErrUnavailable)
	// errIDTaken: the incarnation's fence row already exists: the ID was
	// used before, and is never reused.
	errIDTaken = errors.New("coherence/loop: incarnation ID already has a fence row")
)

// check reads the floor and the fence row of id in txn (shared, NoWait)
// and refuses the commit when id is fenced or view is below the floor
// (view 0: a write without targets, which only the fence concerns).
func check(ctx context.Context, txn store.Txn, id coherence.NodeID, view int64) error {
	vals, err := txn.Read(ctx, checkReqs(id))
	if err != nil {
		return err
	}
	return judge(vals, id, view)
}

// expect is check made part of txn's commit, where the store can
// (store.Expecter; PostgreSQL: in the commit's own round trip, where check
// costs one of its own): the commit writes nothing unless id's fence row
// says live and, for view > 0, the floor is at most view, both read under
// their guards held shared to the end of the commit. belowFloor is called
// when it is the floor that refused. Without the capability it is check.
func expect(ctx context.Context, txn store.Txn, id coherence.NodeID, view int64, belowFloor func()) error {
	e, ok := txn.(store.Expecter)
	if !ok {
		err := check(ctx, txn, id, view)
		if errors.Is(err, ErrBelowFloor) && belowFloor != nil {
			belowFloor()
		}
		return err
	}
	e.Expect(fenceKey(id), []byte{fenceLive}, nil)
	if view != 0 {
		e.Expect(floorKey, encodeFloor(view), belowFloor)
	}
	return nil
}

// checkReqs are check's reads: the floor and id's fence row, shared.
func checkReqs(id coherence.NodeID) []store.ReadReq {
	return []store.ReadReq{
		{Key: floorKey, Mode: store.Shared, NoWait: true, Guard: true},
		{Key: fenceKey(id), Mode: store.Shared, NoWait: true, Guard: true},
	}
}

// judge is check's verdict on the values of checkReqs(id), read under
// their locks.
func judge(vals [][]byte, id coherence.NodeID, view int64) error {
	floor, ok := decodeFloor(vals[0])
	if !ok {
		return fmt.Errorf("%w (the floor row is missing or malformed)", ErrBelowFloor)
	}
	if len(vals[1]) != 1 || vals[1][0] != fenceLive {
		return fmt.Errorf("%w: %s", ErrFenced, id)
	}
	if view != 0 && view < floor {
		return fmt.Errorf("%w: view %d, floor %d", ErrBelowFloor, view, floor)
	}
	return nil
}

func decodeFloor(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

func encodeFloor(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// insert is Put for a row the caller found missing under its lock: with
// store.Inserter the commit fails with store.ErrConflict if another
// transaction created it meanwhile (SQL does not lock missing rows).
func insert(txn store.Txn, key, value []byte) {
	if ins, ok := txn.(store.Inserter); ok {
		ins.Insert(key, value)
		return
	}
	txn.Put(key, value)
}

// lockRow begins a transaction and reads key locked exclusive (nil: no
// row). The caller rolls the transaction back (a no-op after Commit).
func lockRow(ctx context.Context, st store.Store, key []byte) (store.Txn, []byte, error) {
	txn, err := st.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: key, Mode: store.Exclusive, Guard: true}})
	if err != nil {
		txn.Rollback()
		return nil, nil, err
	}
	return txn, vals[0], nil
}

// ensureFloor creates the floor row at 0 if it is missing. A row there
// (it is never deleted) is only read, not locked: there is nothing to
// create, and the exclusive guard would wait for every write committing
// at the time, for nothing.
func ensureFloor(ctx context.Context, st store.Store) error {
	if txn, err := st.Begin(ctx); err == nil {
		vals, err := txn.Read(ctx, []store.ReadReq{{Key: floorKey}})
		txn.Rollback()
		if err == nil && vals[0] != nil {
			return nil
		}
	}
	txn, val, err := lockRow(ctx, st, floorKey)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	if val != nil {
		return nil
	}
	insert(txn, floorKey, encodeFloor(0))
	return txn.Commit(ctx)
}

// raiseFloor raises the floor to at least v: the exclusive lock waits for
// every write transaction holding the row shared.
func raiseFloor(ctx context.Context, st store.Store, v int64) error {
	txn, val, err := lockRow(ctx, st, floorKey)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	cur, ok := decodeFloor(val)
	switch {
	case !ok && val == nil:
		insert(txn, floorKey, encodeFloor(v))
	case !ok:
		return fmt.Errorf("coherence/loop: malformed floor row %x", val)
	case cur < v:
		txn.Put(floorKey, encodeFloor(v))
	}
	return txn.Commit(ctx) // also when unchanged: the lock waited for the writes
}

// createFence creates incarnation id's fence row, live. errIDTaken if it
// exists (the ID was used, and perhaps fenced, before).
func createFence(ctx context.Context, st store.Store, id coherence.NodeID) error {
	k := fenceKey(id)
	txn, val, err := lockRow(ctx, st, k)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	if val != nil {
		return errIDTaken
	}
	insert(txn, k, []byte{fenceLive})
	err = txn.Commit(ctx)
	if errors.Is(err, store.ErrConflict) {
		return errIDTaken
	}
	return err
}

// fence marks incarnation id fenced: the exclusive lock waits for its
// write transactions holding the row shared (their commits, or their
// aborts when its process died and the database dropped its connection),
// and every later one reads fenced and refuses to commit. A missing row is
// created fenced: the incarnation never wrote, and now cannot create it.
func fence(ctx context.Context, st store.Store, id coherence.NodeID) error {
	k := fenceKey(id)
	txn, val, err := lockRow(ctx, st, k)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	switch {
	case val == nil:
		insert(txn, k, []byte{fenceFenced})
	case len(val) == 1 && val[0] == fenceFenced:
		// already fenced; commit anyway (nothing written)
	default:
		txn.Put(k, []byte{fenceFenced})
	}
	return txn.Commit(ctx)
}
