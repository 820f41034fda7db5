package registry

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/nimbus-fs/nimbus/store"
)

// Reported is one replica as a DataNode reports it.
type Reported struct {
	Block    uint64
	GenStamp uint64
	Length   int64
	State    store.ReplicaState
}

func (p Reported) check() error {
	if p.State < store.ReplicaFinalized || p.State > store.ReplicaCorrupt {
		return fmt.Errorf("%w: blk_%d: unknown state %d", ErrBadReport, p.Block, p.State)
	}
	if p.Length < 0 {
		return fmt.Errorf("%w: blk_%d: length %d", ErrBadReport, p.Block, p.Length)
	}
	return nil
}

func (p Reported) value() []byte {
	return store.EncodeReplica(nil, &store.Replica{GenStamp: p.GenStamp, Length: p.Length, State: p.State})
}

// Change is one entry of an incremental report: a replica received,
// finalized, found corrupt (Reported's state says which), or deleted.
type Change struct {
	Reported
	Deleted bool
}

// IncrementalReport applies DataNode id's changes, in order (a later
// change of a block replaces an earlier one), in transactions of at most
// Config.Batch changes each. On an error the batches before it are
// applied and the rest are not; sending the whole report again is safe.
func (r *Registry) IncrementalReport(ctx context.Context, id uint64, changes []Change) error {
	for _, c := range changes {
		if !c.Deleted {
			if err := c.check(); err != nil {
				return fmt.Errorf("registry: incremental report of DataNode %d: %w", id, err)
			}
		}
	}
	for len(changes) > 0 {
		n := min(len(changes), r.cfg.Batch)
		if err := r.applyChanges(ctx, id, changes[:n]); err != nil {
			return fmt.Errorf("registry: incremental report of DataNode %d: %w", id, err)
		}
		changes = changes[n:]
	}
	return nil
}

func (r *Registry) applyChanges(ctx context.Context, id uint64, changes []Change) error {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	for _, c := range changes {
		if c.Deleted {
			txn.Delete(store.ReplicaKey(c.Block, id))
			txn.Delete(store.NodeReplicaKey(id, c.Block))
			continue
		}
		v := c.value()
		txn.Put(store.ReplicaKey(c.Block, id), v)
		txn.Put(store.NodeReplicaKey(id, c.Block), v)
	}
	return txn.Commit(ctx)
}

// ReportStats says what a full report changed.
type ReportStats struct {
	Replicas int // replicas reported
	Written  int // rows added or changed (a replica already recorded as reported is not written)
	Deleted  int // replicas recorded that the report did not hold
	Txns     int // transactions committed
}

// FullReport is one full block report of one DataNode, under way: Add
// each replica in increasing block order, then Finish. It reconciles the
// DataNode's replica rows with the report as it goes, in transactions
// that each write at most about 2 × Config.Batch replicas: a row that
// differs is written, one the report lacks deleted, one that matches left
// alone. Until Finish returns, the rows are a mix of old and new; a report
// that fails midway leaves rows that the next one puts right. Not safe for
// concurrent use.
type FullReport struct {
	r       *Registry
	id      uint64
	buf     []Reported
	from    uint64 // the smallest block not yet reconciled
	done    bool   // reconciled up to the last possible block
	started bool
	last    uint64
	checked bool
	stats   ReportStats
}

// FullReport starts a full report of DataNode id.
func (r *Registry) FullReport(id uint64) *FullReport {
	return &FullReport{r: r, id: id}
}

// Add adds the next replica; blocks must come in strictly increasing order
// (blocks.Store.Report's order). It may reconcile a batch.
func (f *FullReport) Add(ctx context.Context, p Reported) error {
	if err := p.check(); err != nil {
		return f.err(err)
	}
	if f.started && p.Block <= f.last {
		return f.err(fmt.Errorf("%w: blk_%d after blk_%d: not in increasing block order", ErrBadReport, p.Block, f.last))
	}
	f.started, f.last = true, p.Block
	f.buf = append(f.buf, p)
	f.stats.Replicas++
	if len(f.buf) < f.r.cfg.Batch {
		return nil
	}
	return f.err(f.reconcile(ctx, false))
}

// Finish reconciles what is left, deleting every recorded replica after
// the last one reported.
func (f *FullReport) Finish(ctx context.Context) (ReportStats, error) {
	return f.stats, f.err(f.reconcile(ctx, true))
}

func (f *FullReport) err(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("registry: full report of DataNode %d: %w", f.id, err)
}

// reconcile merges the buffered replicas with the recorded ones, in
// rounds of one scan of at most Batch recorded rows and one transaction.
// Without final, it reconciles up to the last buffered block; with final,
// to the end of the DataNode's rows.
func (f *FullReport) reconcile(ctx context.Context, final bool) error {
	if !f.checked {
		if err := f.checkNode(ctx); err != nil {
			return err
		}
		f.checked = true
	}
	for !f.done && (final || len(f.buf) > 0) {
		if err := f.round(ctx, final); err != nil {
			return err
		}
	}
	return nil
}

// checkNode makes sure the DataNode is registered: rows of an unknown one
// would name nobody.
func (f *FullReport) checkNode(ctx context.Context) error {
	txn, err := f.r.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	vals, err := txn.Read(ctx, []store.ReadReq{{Key: store.DataNodeKey(f.id)}})
	if err != nil {
		return err
	}
	if vals[0] == nil {
		return ErrUnknownDataNode
	}
	return nil
}

func (f *FullReport) round(ctx context.Context, final bool) error {
	// The round reaches up to the last buffered block (or the end of the
	// DataNode's rows when final), or to the last recorded row the scan
	// returned when it filled its limit: whichever is first.
	var upTo uint64 = math.MaxUint64
	if !final {
		upTo = f.buf[len(f.buf)-1].Block
	}
	start, end := store.ReplicasOfNodeRange(f.id, f.from)
	if upTo < math.MaxUint64 {
		end = store.NodeReplicaKey(f.id, upTo+1)
	}
	type rec struct {
		block uint64
		value []byte
	}
	var recorded []rec
	limit := f.r.cfg.Batch
	txn, err := f.r.st.Begin(ctx)
	if err != nil {
		return err
	}
	defer txn.Rollback()
	err = txn.Scan(ctx, start, end, limit, func(k, v []byte) bool {
		_, b, ok := store.DecodeNodeReplicaKey(k)
		if ok {
			recorded = append(recorded, rec{b, bytes.Clone(v)})
		}
		return true
	})
	if err != nil {
		return err
	}
	if len(recorded) >= limit {
		upTo = recorded[len(recorded)-1].block // the scan stopped there: so does this round
	}
	written, deleted := 0, 0
	i, j := 0, 0
	for ; i < len(f.buf) && f.buf[i].Block <= upTo; i++ {
		p := f.buf[i]
		for j < len(recorded) && recorded[j].block < p.Block {
			f.delete(txn, recorded[j].block)
			deleted++
			j++
		}
		v := p.value()
		if j < len(recorded) && recorded[j].block == p.Block {
			j++
			if bytes.Equal(recorded[j-1].value, v) {
				continue
			}
		}
		txn.Put(store.ReplicaKey(p.Block, f.id), v)
		txn.Put(store.NodeReplicaKey(f.id, p.Block), v)
		written++
	}
	for ; j < len(recorded); j++ {
		f.delete(txn, recorded[j].block)
		deleted++
	}
	if written+deleted > 0 {
		if err := txn.Commit(ctx); err != nil {
			return err
		}
		f.stats.Txns++
	}
	f.stats.Written += written
	f.stats.Deleted += deleted
	f.buf = f.buf[:copy(f.buf, f.buf[i:])]
	if upTo == math.MaxUint64 {
		f.done = true
	} else {
		f.from = upTo + 1
	}
	return nil
}

func (f *FullReport) delete(txn store.Txn, block uint64) {
	txn.Delete(store.ReplicaKey(block, f.id))
	txn.Delete(store.NodeReplicaKey(f.id, block))
}
