package namespace

import (
	"context"
	"fmt"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// The client protocol of the DataNode mode (datanodes.go): HDFS's
// ClientProtocol calls addBlock, complete, getBlockLocations,
// updateBlockForPipeline, updatePipeline, abandonBlock and fsync, one
// method each. Block rows of a file being written: every block but the
// last is Complete with its final length; the last one, while the client
// writes it, is not, and its Length is the length last committed (by
// Fsync or UpdatePipeline). n.Written is always the sum of the rows'
// lengths, and space usage follows it, as in the local mode, so that
// delete, truncate and recovery give back what was charged.

// dnMode fails unless the engine is in the DataNode mode.
func (e *Engine) dnMode(op, p string) error {
	if e.cfg.DataNodes == nil {
		return meta.Errorf(op, p, meta.ErrUnsupported, "this NameNode keeps blocks itself (no DataNodes are configured)")
	}
	return nil
}

// notYet is the retryable answer of a commit whose block has no reported
// replica yet.
func notYet(op, p string, b BlockRef) error {
	return &meta.OpError{Op: op, Path: p, Err: fmt.Errorf("%w: %w", meta.ErrBusy, ErrNotYetReplicated),
		Detail: fmt.Sprintf("block blk_%d_%d of %d bytes has no reported replica with that stamp and length yet; try again", b.ID, b.GenStamp, b.NumBytes)}
}

// ErrNoDataNode is wrapped (with meta.ErrBusy) by AddBlock when no
// DataNode can take the block.
var ErrNoDataNode = fmt.Errorf("namespace: no DataNode available")

// committed reports whether one of the reported replicas of block b holds
// its bytes: finalized, with its stamp and length (HDFS's minimum
// replication of 1).
func (t *tx) committed(ctx context.Context, b BlockRef) (bool, error) {
	reps, err := t.e.cfg.DataNodes.Replicas(ctx, []uint64{b.ID}, Location{})
	if err != nil {
		return false, err
	}
	for _, r := range reps[0] {
		if r.State == ReplicaFinalized && r.GenStamp == b.GenStamp && r.Length == b.NumBytes {
			return true, nil
		}
	}
	return false, nil
}

// lastOpen returns the file's last block row when it is being written.
func lastOpen(rows []store.Block) *store.Block {
	if len(rows) == 0 || rows[len(rows)-1].Complete {
		return nil
	}
	return &rows[len(rows)-1]
}

// sumLengths is the bytes of rows.
func sumLengths(rows []store.Block) int64 {
	var s int64
	for _, b := range rows {
		s += b.Length
	}
	return s
}

// commitLast records the client's length of the file's open last block
// (the caller checked ref names it) and makes it complete when done,
// adjusting n.Written and usage. The bytes are on the DataNodes already:
// usage follows them without a quota check, as HDFS's commit does.
func (t *tx) commitLast(op string, r *resolved, n *store.Inode, rows []store.Block, last *store.Block, length int64, done bool) error {
	last.Length, last.Complete = length, done
	t.putBlock(last)
	total := sumLengths(rows)
	if err := t.adjust(op, r.path, r.chain[:r.depth()], (total-n.Written)*int64(n.Replication)); err != nil {
		return err
	}
	n.Written = total
	return nil
}

// dropLast deletes the file's last block row (being written, with no
// byte of the file committed in it) and settles n.Written and usage.
func (t *tx) dropLast(op string, r *resolved, n *store.Inode, rows []store.Block) error {
	last := rows[len(rows)-1]
	t.delRaw(store.BlockKey(last.File, last.Index))
	rows = rows[:len(rows)-1]
	total := sumLengths(rows)
	if err := t.adjust(op, r.path, r.chain[:r.depth()], (total-n.Written)*int64(n.Replication)); err != nil {
		return err
	}
	n.Written = total
	return nil
}

// checkRef fails unless ref names block row b (id and stamp).
func checkRef(op, p string, b *store.Block, ref BlockRef) error {
	if b == nil {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d: the file has no block being written", ref.ID, ref.GenStamp)
	}
	if b.ID != ref.ID || b.GenStamp != ref.GenStamp {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d is not the file's last block blk_%d_%d", ref.ID, ref.GenStamp, b.ID, b.GenStamp)
	}
	if ref.NumBytes < 0 || ref.NumBytes > 1<<62 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d: length %d", ref.ID, ref.NumBytes)
	}
	return nil
}

// AddBlock allocates the next block of file path, being written by client,
// and chooses the DataNodes of its pipeline (HDFS's addBlock). previous is
// the file's last block as the client wrote it (nil for the first block):
// its length is committed, which needs one finalized replica of it
// reported (else a retryable ErrNotYetReplicated). exclude are DataNodes
// the client failed to reach; writer is where it runs.
//
// An inline file goes to blocks here: its content rows are dropped in the
// same transaction and block 0 is returned, which the client, which kept
// those bytes, writes first. A call sent again after its answer was lost
// (previous is the block before the file's open last block, which has no
// bytes committed) returns that block again.
//
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) AddBlock(ctx context.Context, u meta.User, path, client string, previous *BlockRef, exclude []uint64, writer Location) (*LocatedBlock, error) {
	const op = "add block"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, err
	}
	dn := e.cfg.DataNodes
	var out *LocatedBlock
	err = e.run(ctx, op, p, u, func(t *tx) error {
		out = nil
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		dirs := r.chain[:r.depth()]
		var rows []store.Block
		if !n.Blocks {
			if previous != nil {
				return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d: the file keeps its bytes inline and has no blocks", previous.ID)
			}
			// To blocks: the client writes the inline bytes to block 0.
			if err := t.adjust(op, p, dirs, -n.Written*int64(n.Replication)); err != nil {
				return err
			}
			if err := t.cutContent(ctx, n, 0); err != nil {
				return err
			}
			n.Blocks = true
		} else if rows, err = t.blockRows(ctx, n.ID); err != nil {
			return err
		}
		last := lastOpen(rows)
		if last != nil && last.Length == 0 {
			// A resent call whose block was allocated: answer it again.
			var before *store.Block
			if len(rows) > 1 {
				before = &rows[len(rows)-2]
			}
			if (previous == nil && before == nil) || (previous != nil && before != nil && before.ID == previous.ID) {
				offset := sumLengths(rows[:len(rows)-1])
				targets, err := dn.ChooseTargets(ctx, int(n.Replication), n.BlockSize, writer, exclude, nil)
				if err != nil {
					return meta.Errorf(op, p, meta.ErrInternal, "choosing DataNodes: %v", err)
				}
				out = e.locatedForWrite(t.user, last, offset, targets)
				return nil
			}
		}
		switch {
		case last != nil && previous == nil:
			return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d is being written: name it as the previous block", last.ID, last.GenStamp)
		case last == nil && previous != nil:
			// After an append that found the last block full, the client
			// names that block.
			if len(rows) == 0 || rows[len(rows)-1].ID != previous.ID {
				return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d: the file has no block being written", previous.ID, previous.GenStamp)
			}
		case last != nil:
			if err := checkRef(op, p, last, *previous); err != nil {
				return err
			}
			ok, err := t.committed(ctx, *previous)
			if err != nil {
				return meta.Errorf(op, p, meta.ErrInternal, "reading the replicas of blk_%d: %v", previous.ID, err)
			}
			if !ok {
				return notYet(op, p, *previous)
			}
			if err := t.commitLast(op, r, n, rows, last, previous.NumBytes, true); err != nil {
				return err
			}
		}
		if len(rows) >= e.cfg.MaxBlocksPerFile {
			return meta.Errorf(op, p, meta.ErrTooLarge,
				"file has reached the limit on maximum number of blocks: %d blocks of %d bytes (the server's --max-blocks-per-file)", len(rows), n.BlockSize)
		}
		// HDFS checks room for a whole block at its allocation.
		if err := t.room(op, p, dirs, n.BlockSize*int64(n.Replication)); err != nil {
			return err
		}
		targets, err := dn.ChooseTargets(ctx, int(n.Replication), n.BlockSize, writer, exclude, nil)
		if err != nil {
			return meta.Errorf(op, p, meta.ErrInternal, "choosing DataNodes: %v", err)
		}
		if len(targets) == 0 {
			return &meta.OpError{Op: op, Path: p, Err: fmt.Errorf("%w: %w", meta.ErrBusy, ErrNoDataNode),
				Detail: fmt.Sprintf("no DataNode can take a block of %d bytes (%d excluded): none is live, in service and with room", n.BlockSize, len(exclude))}
		}
		bid, err := e.newBlockID(ctx)
		if err != nil {
			return err
		}
		b := store.Block{File: n.ID, Index: uint32(len(rows)), ID: bid, GenStamp: 1}
		t.putBlock(&b)
		n.Written = sumLengths(rows)
		t.put(n)
		t.renewLease(n.LeaseHolder)
		out = e.locatedForWrite(t.user, &b, n.Written, targets)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// locatedForWrite is the answer of AddBlock.
func (e *Engine) locatedForWrite(user string, b *store.Block, offset int64, targets []DataNodeInfo) *LocatedBlock {
	dn := e.cfg.DataNodes
	return &LocatedBlock{Pool: dn.BlockPool(), ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.Length, Offset: offset,
		Targets: targets, Token: dn.Token(user, b.ID, TokenWrite)}
}

// room fails with ErrQuota unless every quota directory among dirs has
// dSpace bytes free; it changes nothing.
func (t *tx) room(op, path string, dirs []*store.Inode, dSpace int64) error {
	for _, d := range dirs {
		if d != nil && d.HasQuota() && d.SpaceQuota >= 0 && d.SpaceUsed+dSpace > d.SpaceQuota {
			return meta.Errorf(op, path, meta.ErrQuota, "space quota of %s exceeded: quota %d bytes, in use %d, a new block needs %d",
				d.Name, d.SpaceQuota, d.SpaceUsed, dSpace)
		}
	}
	return nil
}

// CompleteBlock closes file path, written by client, in the DataNode mode
// (HDFS's complete): last is the file's last block as the client wrote it
// (nil when the file has no block being written: an inline file, or one
// whose blocks are all committed). Its length is committed; the file
// closes once one finalized replica of it with that stamp and length is
// reported, else the answer is a retryable ErrNotYetReplicated and
// nothing changes. A last block with no bytes is dropped.
//
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) CompleteBlock(ctx context.Context, u meta.User, path, client string, last *BlockRef) (*meta.FileStatus, error) {
	const op = "complete"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, err
	}
	var out *meta.FileStatus
	err = e.runOnceStatus(ctx, op, p, u, &out, func(t *tx) error {
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if n.Blocks {
			rows, err := t.blockRows(ctx, n.ID)
			if err != nil {
				return err
			}
			open := lastOpen(rows)
			switch {
			case open == nil && last != nil:
				return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d: the file has no block being written", last.ID, last.GenStamp)
			case open != nil && last == nil:
				return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d_%d is being written: name it as the last block", open.ID, open.GenStamp)
			case open != nil:
				if err := checkRef(op, p, open, *last); err != nil {
					return err
				}
				if last.NumBytes == 0 {
					if err := t.dropLast(op, r, n, rows); err != nil {
						return err
					}
					break
				}
				ok, err := t.committed(ctx, *last)
				if err != nil {
					return meta.Errorf(op, p, meta.ErrInternal, "reading the replicas of blk_%d: %v", last.ID, err)
				}
				if !ok {
					return notYet(op, p, *last)
				}
				if err := t.commitLast(op, r, n, rows, open, last.NumBytes, true); err != nil {
					return err
				}
			}
		} else if last != nil {
			return meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d: the file keeps its bytes inline and has no blocks", last.ID)
		}
		t.closeFile(n)
		out = status(r.path, n)
		t.answer(out)
		return nil
	})
	return out, err
}

// openBlock locks the file client writes and returns its rows and its
// open last block, checked against ref (by id; by stamp too when
// sameStamp).
func (t *tx) openBlock(ctx context.Context, op, p, client string, ref BlockRef, sameStamp bool) (*resolved, *store.Inode, []store.Block, *store.Block, error) {
	r, n, err := t.writerFile(ctx, op, p, client)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var rows []store.Block
	if n.Blocks {
		if rows, err = t.blockRows(ctx, n.ID); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	last := lastOpen(rows)
	if last == nil || last.ID != ref.ID {
		return nil, nil, nil, nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "block blk_%d is not the file's block being written", ref.ID)
	}
	if sameStamp {
		if err := checkRef(op, p, last, ref); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return r, n, rows, last, nil
}

// UpdateBlockForPipeline gives the file's block being written a new
// generation stamp for a pipeline recovery and returns it with a write
// token (HDFS's updateBlockForPipeline): the replicas of the DataNodes
// that stay in the pipeline are moved to it, a failed DataNode's keeps
// the old stamp and is dropped when reported.
//
// Locks: the file exclusive.
func (e *Engine) UpdateBlockForPipeline(ctx context.Context, u meta.User, path, client string, block BlockRef) (*LocatedBlock, error) {
	const op = "update block for pipeline"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, err
	}
	var out *LocatedBlock
	err = e.run(ctx, op, p, u, func(t *tx) error {
		_, n, rows, last, err := t.openBlock(ctx, op, p, client, block, false)
		if err != nil {
			return err
		}
		last.GenStamp++
		t.putBlock(last)
		t.renewLease(n.LeaseHolder)
		out = e.locatedForWrite(t.user, last, sumLengths(rows[:len(rows)-1]), nil)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdatePipeline records the outcome of a pipeline recovery (HDFS's
// updatePipeline): old is the block as it was, updated is it under the
// stamp UpdateBlockForPipeline gave and the length the DataNodes that
// stay (nodes) acknowledged.
//
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) UpdatePipeline(ctx context.Context, u meta.User, path, client string, old, updated BlockRef, nodes []uint64) error {
	const op = "update pipeline"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	if err := e.dnMode(op, p); err != nil {
		return err
	}
	if old.ID != updated.ID || updated.GenStamp <= old.GenStamp {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "blk_%d_%d cannot become blk_%d_%d", old.ID, old.GenStamp, updated.ID, updated.GenStamp)
	}
	if len(nodes) == 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "blk_%d: a pipeline with no DataNode", old.ID)
	}
	return e.run(ctx, op, p, u, func(t *tx) error {
		r, n, rows, last, err := t.openBlock(ctx, op, p, client, updated, true)
		if err != nil {
			return err
		}
		if updated.NumBytes < last.Length {
			return meta.Errorf(op, p, meta.ErrInvalidArgument, "blk_%d: length %d below the %d bytes committed", old.ID, updated.NumBytes, last.Length)
		}
		if err := t.commitLast(op, r, n, rows, last, updated.NumBytes, false); err != nil {
			return err
		}
		t.put(n)
		t.renewLease(n.LeaseHolder)
		return nil
	})
}

// AbandonBlock drops the file's block being written, which the client
// could not write to any DataNode (HDFS's abandonBlock). Its replicas, if
// any, have no row and go as orphans.
//
// Locks: the file exclusive.
func (e *Engine) AbandonBlock(ctx context.Context, u meta.User, path, client string, block BlockRef) error {
	const op = "abandon block"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	if err := e.dnMode(op, p); err != nil {
		return err
	}
	return e.run(ctx, op, p, u, func(t *tx) error {
		r, n, rows, _, err := t.openBlock(ctx, op, p, client, block, true)
		if err != nil {
			return err
		}
		if err := t.dropLast(op, r, n, rows); err != nil {
			return err
		}
		t.put(n)
		return nil
	})
}

// Fsync records the length of the file's block being written as the
// client's hflush/hsync reached it (HDFS's fsync): readers see the file
// that long. A length below the one recorded changes nothing.
//
// Locks: the file exclusive (and directories with a space quota above it).
func (e *Engine) Fsync(ctx context.Context, u meta.User, path, client string, lastBlockLength int64) error {
	const op = "fsync"
	p, err := clean(op, path)
	if err != nil {
		return err
	}
	if err := e.dnMode(op, p); err != nil {
		return err
	}
	if lastBlockLength < 0 {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "length %d", lastBlockLength)
	}
	return e.run(ctx, op, p, u, func(t *tx) error {
		r, n, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if !n.Blocks {
			return nil // inline bytes are committed by every write
		}
		rows, err := t.blockRows(ctx, n.ID)
		if err != nil {
			return err
		}
		last := lastOpen(rows)
		if last == nil || lastBlockLength <= last.Length {
			return nil
		}
		if lastBlockLength > n.BlockSize {
			return meta.Errorf(op, p, meta.ErrInvalidArgument, "blk_%d: length %d beyond the block size %d", last.ID, lastBlockLength, n.BlockSize)
		}
		if err := t.commitLast(op, r, n, rows, last, lastBlockLength, false); err != nil {
			return err
		}
		t.put(n)
		t.renewLease(n.LeaseHolder)
		return nil
	})
}

// GetBlockLocations returns the blocks of file path overlapping [offset,
// offset+length) with the DataNodes holding their replicas, ordered for a
// reader at reader, and read tokens (HDFS's getBlockLocations). A file
// being written is as long as its writer last committed. An inline file
// answers Inline, with no blocks: read it with Read.
//
// Locks: the file shared.
func (e *Engine) GetBlockLocations(ctx context.Context, u meta.User, path string, offset, length int64, reader Location) (*LocatedBlocks, error) {
	const op = "get block locations"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "negative offset %d or length %d", offset, length)
	}
	var out LocatedBlocks
	var rows []store.Block
	err = e.run(ctx, op, p, u, func(t *tx) error {
		out, rows = LocatedBlocks{}, nil
		_, n, err := t.regularFile(ctx, op, p, store.Shared, permR)
		if err != nil {
			return err
		}
		out.UnderConstruction = n.UnderConstruction()
		out.FileLength = n.Length
		if out.UnderConstruction {
			out.FileLength = n.Written
		}
		if !n.Blocks {
			out.Inline = true
			return nil
		}
		rows, err = t.blockRows(ctx, n.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return &out, nil
	}
	// The blocks asked, and the last one.
	var pick []int
	var ids []uint64
	var start int64
	offsets := make([]int64, len(rows))
	for i, b := range rows {
		offsets[i] = start
		if start < offset+length && start+b.Length > offset {
			pick = append(pick, i)
			ids = append(ids, b.ID)
		}
		start += b.Length
	}
	lastIdx := len(rows) - 1
	if len(pick) == 0 || pick[len(pick)-1] != lastIdx {
		ids = append(ids, rows[lastIdx].ID)
	}
	dn := e.cfg.DataNodes
	reps, err := dn.Replicas(ctx, ids, reader)
	if err != nil {
		return nil, meta.Errorf(op, p, meta.ErrInternal, "reading the replicas: %v", err)
	}
	pool := dn.BlockPool()
	located := func(i int, rs []ReplicaInfo) LocatedBlock {
		b := rows[i]
		lb := LocatedBlock{Pool: pool, ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.Length, Offset: offsets[i],
			Token: dn.Token(u.Name, b.ID, TokenRead)}
		var corrupt []DataNodeInfo
		for _, r := range rs {
			switch {
			case r.GenStamp != b.GenStamp:
				// A replica of an older stamp (a DataNode dropped from a
				// pipeline) or one not yet moved: not readable as this block.
			case r.State == ReplicaCorrupt:
				corrupt = append(corrupt, r.Node)
			case r.State == ReplicaFinalized || !b.Complete:
				lb.Targets = append(lb.Targets, r.Node)
			}
		}
		if len(lb.Targets) == 0 && len(corrupt) > 0 {
			lb.Targets, lb.Corrupt = corrupt, true
		}
		return lb
	}
	for k, i := range pick {
		out.Blocks = append(out.Blocks, located(i, reps[k]))
	}
	lb := located(lastIdx, reps[len(reps)-1])
	out.LastBlock = &lb
	out.LastBlockComplete = rows[lastIdx].Complete
	return &out, nil
}

// AdditionalDataNode chooses n more DataNodes for the file's block being
// written, to replace DataNodes a pipeline lost (HDFS's
// getAdditionalDatanode): existing are the pipeline's DataNodes (counted
// in the zone spread), exclude the ones not to choose. The answer's
// Targets are the new DataNodes only; its token allows writing and
// copying (the client has an existing DataNode transfer the replica).
//
// Locks: the file shared.
func (e *Engine) AdditionalDataNode(ctx context.Context, u meta.User, path, client string, block BlockRef, existing, exclude []uint64, n int, writer Location) (*LocatedBlock, error) {
	const op = "get additional datanode"
	p, err := clean(op, path)
	if err != nil {
		return nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, meta.Errorf(op, p, meta.ErrInvalidArgument, "%d DataNodes asked", n)
	}
	var b store.Block
	var offset, bs int64
	err = e.run(ctx, op, p, u, func(t *tx) error {
		_, f, rows, last, err := t.openBlock(ctx, op, p, client, block, false)
		if err != nil {
			return err
		}
		b, offset, bs = *last, sumLengths(rows[:len(rows)-1]), f.BlockSize
		return nil
	})
	if err != nil {
		return nil, err
	}
	dn := e.cfg.DataNodes
	targets, err := dn.ChooseTargets(ctx, n, bs, writer, exclude, existing)
	if err != nil {
		return nil, meta.Errorf(op, p, meta.ErrInternal, "choosing DataNodes: %v", err)
	}
	if len(targets) == 0 {
		return nil, &meta.OpError{Op: op, Path: p, Err: fmt.Errorf("%w: %w", meta.ErrBusy, ErrNoDataNode),
			Detail: fmt.Sprintf("no further DataNode can take blk_%d", b.ID)}
	}
	return &LocatedBlock{Pool: dn.BlockPool(), ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.Length, Offset: offset,
		Targets: targets, Token: dn.Token(u.Name, b.ID, TokenWrite, TokenCopy)}, nil
}

// AppendBlock opens file path for appending by client (as Append) and
// returns its last block when it is not full, under a new stamp, with the
// DataNodes holding its replicas (of the previous stamp) and a write
// token: the client sets up a PIPELINE_SETUP_APPEND pipeline on them and
// goes on with AddBlock or CompleteBlock naming the block under the new
// stamp. A nil block: the last block is full (or the file has none, or is
// inline): the client adds a block (inline: writes with Write first).
//
// Locks: the file exclusive, then shared to locate the block.
func (e *Engine) AppendBlock(ctx context.Context, u meta.User, path, client string, writer Location) (*meta.FileStatus, *LocatedBlock, error) {
	const op = "append"
	p, err := clean(op, path)
	if err != nil {
		return nil, nil, err
	}
	if err := e.dnMode(op, p); err != nil {
		return nil, nil, err
	}
	st, err := e.Append(ctx, u, p, client)
	if err != nil {
		return nil, nil, err
	}
	var last *store.Block
	var offset int64
	err = e.run(ctx, op, p, u, func(t *tx) error {
		last = nil
		_, n, err := t.writerFile(ctx, op, p, client)
		if err != nil || !n.Blocks {
			return err
		}
		rows, err := t.blockRows(ctx, n.ID)
		if err != nil {
			return err
		}
		if b := lastOpen(rows); b != nil {
			last, offset = b, sumLengths(rows[:len(rows)-1])
		}
		return nil
	})
	if err != nil || last == nil {
		return st, nil, err
	}
	dn := e.cfg.DataNodes
	reps, err := dn.Replicas(ctx, []uint64{last.ID}, writer)
	if err != nil {
		return nil, nil, meta.Errorf(op, p, meta.ErrInternal, "reading the replicas of blk_%d: %v", last.ID, err)
	}
	lb := e.locatedForWrite(u.Name, last, offset, nil)
	for _, r := range reps[0] {
		if r.State == ReplicaFinalized && r.GenStamp == last.GenStamp-1 && r.Length == last.Length {
			lb.Targets = append(lb.Targets, r.Node)
		}
	}
	if len(lb.Targets) == 0 {
		return nil, nil, meta.Errorf(op, p, meta.ErrInternal, "block blk_%d_%d has no finalized replica to append to", last.ID, last.GenStamp-1)
	}
	return st, lb, nil
}
