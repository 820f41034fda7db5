package namespace

import (
	"context"
	"errors"
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// The operations of the local mode (blocks.go) that meet a file in blocks
// on DataNodes. The engine holds no replica in this mode: it changes rows
// only, and replicas no row names are the DataNodes' orphans.

// dnReadBlocks: the bytes are on the DataNodes, which the client reads.
func (t *tx) dnReadBlocks(p string) error {
	return meta.Errorf("read", p, meta.ErrUnsupported,
		"the file's bytes are in blocks on DataNodes: read them there (get its block locations)")
}

// dnWriteBlocks: a file in blocks is written block by block to DataNodes.
func dnWriteBlocks(p string) error {
	return meta.Errorf("write", p, meta.ErrUnsupported,
		"the file's bytes are in blocks on DataNodes: write them there (add a block, then write it through its pipeline)")
}

// dnTooLarge: an inline file would pass the threshold.
func (t *tx) dnTooLarge(p string, n *store.Inode, size int) error {
	return meta.Errorf("write", p, meta.ErrTooLarge,
		"%d bytes would pass the %d bytes kept in the metadata store: add a block (the file moves to blocks on DataNodes) and write there",
		n.Written+int64(size), t.e.cfg.InlineThreshold)
}

// dnDropBlocks deletes the block rows of file n; the DataNodes drop the
// replicas no row names (the orphan duty).
func (t *tx) dnDropBlocks(ctx context.Context, n *store.Inode) error {
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	for _, b := range rows {
		t.delRaw(store.BlockKey(b.File, b.Index))
	}
	return nil
}

// dnTruncateBlocks cuts file n to size bytes when size is on a block
// boundary (rows only, as HDFS); any other size needs block recovery.
func (t *tx) dnTruncateBlocks(ctx context.Context, p string, n *store.Inode, size int64) error {
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	var start int64
	for _, b := range rows {
		switch {
		case start >= size:
			t.delRaw(store.BlockKey(b.File, b.Index))
		case start+b.Length > size:
			return meta.Errorf("truncate", p, meta.ErrUnsupported,
				"length %d is inside block blk_%d [%d, %d): truncating inside a block on DataNodes is not supported; truncate to a block boundary",
				size, b.ID, start, start+b.Length)
		}
		start += b.Length
	}
	if size <= t.e.cfg.InlineThreshold && size > 0 {
		return meta.Errorf("truncate", p, meta.ErrUnsupported,
			"length %d fits the inline threshold: moving a file in blocks on DataNodes back inline is not supported", size)
	}
	if size == 0 {
		n.Blocks = false
	}
	n.Written = size
	return nil
}

// dnAppendBlocks reopens file n in blocks on DataNodes for an append:
// its last block, when not full, is being written again under a new
// stamp (the client sets up an append pipeline on its replicas:
// AppendBlock). Rows only.
func (t *tx) dnAppendBlocks(ctx context.Context, n *store.Inode) error {
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	last := rows[len(rows)-1]
	if last.Length < n.BlockSize {
		last.GenStamp++
		last.Complete = false
		t.putBlock(&last)
	}
	return nil
}

// dnRecoverBlocks is lease recovery of file n in blocks on DataNodes: its
// block being written, if any, is committed at the length of a finalized
// replica with its stamp, or dropped when it has no byte and no replica.
// A block whose replicas are all being written needs block recovery by
// the DataNodes (not done here): the file stays open and the error says
// so; the lease monitor tries again.
func (t *tx) dnRecoverBlocks(ctx context.Context, op string, r *resolved, n *store.Inode) error {
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	last := lastOpen(rows)
	if last == nil {
		return t.adjust(op, r.path, r.chain[:r.depth()], (sumLengths(rows)-n.Written)*int64(n.Replication))
	}
	reps, err := t.e.cfg.DataNodes.Replicas(ctx, []uint64{last.ID}, Location{})
	if err != nil {
		return meta.Errorf(op, r.path, meta.ErrInternal, "reading the replicas of blk_%d: %v", last.ID, err)
	}
	for _, rep := range reps[0] {
		if rep.State == ReplicaFinalized && rep.GenStamp == last.GenStamp {
			return t.commitLast(op, r, n, rows, last, rep.Length, true)
		}
	}
	for _, rep := range reps[0] {
		// Reopened for an append that wrote nothing: the block is as it was.
		if rep.State == ReplicaFinalized && rep.GenStamp == last.GenStamp-1 && rep.Length == last.Length {
			last.GenStamp = rep.GenStamp
			return t.commitLast(op, r, n, rows, last, rep.Length, true)
		}
	}
	if len(reps[0]) == 0 && last.Length == 0 {
		return t.dropLast(op, r, n, rows)
	}
	if t.e.cfg.BlockRecovery == nil {
		return meta.Errorf(op, r.path, meta.ErrLease,
			"block blk_%d_%d has no finalized replica: it needs block recovery by its DataNodes, which this NameNode is not configured to run", last.ID, last.GenStamp)
	}
	gs, length, err := t.e.recoverBlock(ctx, last, reps[0])
	if err != nil {
		return meta.Errorf(op, r.path, meta.ErrLease, "recovering block blk_%d_%d: %v", last.ID, last.GenStamp, err)
	}
	if gs == 0 {
		// No DataNode has a replica and none was committed: the block had
		// no byte for sure.
		return t.dropLast(op, r, n, rows)
	}
	t.e.log.Info("block recovered", "path", r.path, "block", last.ID, "genstamp", gs, "length", length)
	last.GenStamp = gs
	return t.commitLast(op, r, n, rows, last, length, true)
}

// recoverBlock is HDFS's block recovery of block row b, driven from here:
// each DataNode reported to hold a replica of it is asked for its replica
// (which stops its writer), the length is chosen (a finalized replica's,
// else the shortest being-written one's: every byte of it is on each),
// and each is told to finalize at that length under a new stamp. It
// returns the new stamp and the length; stamp 0 when no DataNode had a
// replica and the row has no committed byte.
func (e *Engine) recoverBlock(ctx context.Context, b *store.Block, reps []ReplicaInfo) (uint64, int64, error) {
	rec := e.cfg.BlockRecovery
	id := b.GenStamp + 1
	for _, r := range reps {
		id = max(id, r.GenStamp+1)
	}
	type found struct {
		node string
		rep  RecoveredReplica
	}
	var got []found
	var errs []error
	for _, r := range reps {
		if r.State == ReplicaCorrupt {
			continue
		}
		rr, err := rec.InitRecovery(ctx, r.Node.HTTPAddr, BlockRef{ID: b.ID, GenStamp: r.GenStamp}, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("DataNode %d (%s): %w", r.Node.ID, r.Node.HTTPAddr, err))
			continue
		}
		if rr.State == ReplicaCorrupt {
			continue
		}
		got = append(got, found{r.Node.HTTPAddr, rr})
	}
	if len(got) == 0 {
		if len(errs) == 0 && b.Length == 0 {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("no DataNode could recover a replica: %w", errors.Join(errs...))
	}
	length := int64(-1)
	for _, g := range got {
		if g.rep.State == ReplicaFinalized {
			length = g.rep.Length
			break
		}
	}
	if length < 0 {
		length = got[0].rep.Length
		for _, g := range got[1:] {
			length = min(length, g.rep.Length)
		}
	}
	if length < b.Length {
		// Bytes a client committed (fsync, a pipeline update) are on every
		// replica of the pipeline: a shorter one is not this block's.
		e.log.Warn("block recovery: the replicas hold fewer bytes than committed", "block", b.ID, "committed", b.Length, "replicas", length)
	}
	done := 0
	for _, g := range got {
		if g.rep.State == ReplicaFinalized && g.rep.Length != length {
			continue
		}
		if err := rec.FinishRecovery(ctx, g.node, BlockRef{ID: b.ID, GenStamp: g.rep.GenStamp}, id, length); err != nil {
			errs = append(errs, fmt.Errorf("finishing on %s: %w", g.node, err))
			continue
		}
		done++
	}
	if done == 0 {
		return 0, 0, fmt.Errorf("no DataNode finalized its replica: %w", errors.Join(errs...))
	}
	return id, length, nil
}
