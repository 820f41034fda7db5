package namespace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// Files larger than the inline threshold keep their bytes in block storage:
// block rows in the store (id, generation stamp, length), changed in the same
// transaction as the inode, and replicas in the blocks.Store. A file moves
// from inline to blocks when a write takes it past the threshold.
//
// While a file is written, the engine keeps the open replica writer of its
// last block in memory (writers). A Write of a block file does not run a
// store transaction: it checks the lease with unlocked reads and appends to
// the replica; a transaction runs only when a block fills up (to record its
// length and add the next block) and at Complete. Bytes are synced every
// Config.SyncEvery bytes, at every block end and at Complete; lease recovery
// keeps what was synced (the blocks.Store guarantees that much).

// fileWriter is the open block stream of one file under construction.
type fileWriter struct {
	mu      sync.Mutex
	holder  string        // the lease holder (holderKey) writing the file
	w       blocks.Writer // the last block's writer; nil when the next write starts a block
	block   store.Block   // the last block's row
	start   int64         // file offset where the last block starts
	written int64         // bytes written to the file
	synced  int64         // bytes written when the writer last synced
	nblocks uint32        // blocks the file has, the one being written included
	dead    error         // set when the stream failed: every later write fails
}

// writers is the table of open block streams, by inode id.
type writers struct {
	sync.Mutex
	m map[uint64]*fileWriter
}

func (ws *writers) get(id uint64) *fileWriter {
	ws.Lock()
	defer ws.Unlock()
	return ws.m[id]
}

func (ws *writers) put(id uint64, fw *fileWriter) {
	ws.Lock()
	ws.m[id] = fw
	ws.Unlock()
}

// drop removes and closes the stream of file id (its replica stays being
// written, recoverable).
func (ws *writers) drop(id uint64) {
	ws.Lock()
	fw := ws.m[id]
	delete(ws.m, id)
	ws.Unlock()
	if fw != nil {
		fw.mu.Lock()
		fw.stop()
		fw.mu.Unlock()
	}
}

// stop closes the stream's writer (its replica stays being written,
// recoverable) and fails every later write; the caller holds fw.mu.
func (fw *fileWriter) stop() {
	if fw.w != nil {
		_ = fw.w.Close()
		fw.w = nil
	}
	fw.dead = errors.New("the file was closed")
}

// The lock order between a file's block stream and its row lock: the
// stream's mutex (fileWriter.mu) first, then the file's row lock. A write
// holds its stream while its next block's transaction waits for the file
// (nextBlock), and its transactions run with no stream held (they are
// taken before any row lock), so a transaction that holds the file never
// waits for the stream: Complete only tries it (finishBlocks), and lease
// recovery, which must stop the stream, restarts with it taken before its
// first lock (stopStream).

// stopStream removes and stops the open block stream of file id, if any,
// for its lease recovery. This transaction holds the file's lock, so it only
// tries the stream's mutex; when a write holds it (perhaps waiting for this
// very lock), the operation restarts with the stream taken at the start of
// its next attempt, before any lock (lateNeeds.streams).
func (t *tx) stopStream(id uint64) error {
	ws := &t.e.writers
	fw := ws.get(id)
	if fw == nil {
		return nil
	}
	if late := t.op.late; late == nil || !slices.Contains(late.streams, fw) {
		if !fw.mu.TryLock() {
			late := t.op.needs()
			late.streams = append(late.streams, fw)
			return errRetry
		}
		defer fw.mu.Unlock()
	}
	ws.Lock()
	if ws.m[id] == fw {
		delete(ws.m, id)
	}
	ws.Unlock()
	fw.stop()
	return nil
}

// blockRows reads the block rows of file id, in order (the caller holds a
// lock on the file).
func (t *tx) blockRows(ctx context.Context, id uint64) ([]store.Block, error) {
	var out []store.Block
	var decErr error
	start, end := store.BlocksRange(id)
	err := t.st.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var b store.Block
		if decErr = store.DecodeBlock(k, v, &b); decErr != nil {
			return false
		}
		out = append(out, b)
		return true
	})
	if err == nil {
		err = decErr
	}
	return out, err
}

func (t *tx) putBlock(b *store.Block) {
	t.putRaw(store.BlockKey(b.File, b.Index), store.EncodeBlock(nil, b))
}

// toBlocks moves an inline file under construction to block storage: its
// bytes go into a first block, its content rows go away, and an open stream
// is registered for the writer. The replica is removed again if the
// transaction does not commit.
func (t *tx) toBlocks(ctx context.Context, n *store.Inode, holder string) (*fileWriter, error) {
	if t.e.blocks == nil {
		return nil, nil
	}
	data, err := t.readContent(ctx, n, 0, n.Written, n.Written)
	if err != nil {
		return nil, err
	}
	bid, err := t.e.newBlockID(ctx)
	if err != nil {
		return nil, err
	}
	b := store.Block{File: n.ID, Index: 0, ID: bid, GenStamp: 1}
	w, err := t.e.blocks.Create(ctx, blocks.ID{Block: bid, GenStamp: 1})
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return nil, err
	}
	if err := w.Sync(ctx); err != nil {
		_ = w.Abort()
		return nil, err
	}
	written := n.Written
	if err := t.cutContent(ctx, n, 0); err != nil {
		_ = w.Abort()
		return nil, err
	}
	n.Written = written
	n.Blocks = true
	b.Length = written
	t.putBlock(&b)
	t.put(n)
	fw := &fileWriter{holder: holder, w: w, block: b, written: written, synced: written, nblocks: 1}
	t.undo = append(t.undo, func() {
		// A commit whose outcome is unknown may have recorded the block: its
		// replica stays (unreferenced, the next start removes it).
		if !t.commitUnknown {
			_ = w.Abort()
		}
	})
	t.after = append(t.after, func() { t.e.writers.put(n.ID, fw) })
	return fw, nil
}

// writeBlocks appends data to the open stream of block file n (at offset,
// which must be where the stream is). It runs outside any transaction except
// when a block fills up.
func (e *Engine) writeBlocks(ctx context.Context, u meta.User, p string, n *store.Inode, fw *fileWriter, offset int64, data []byte) error {
	const op = "write"
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.dead != nil {
		return meta.Errorf(op, p, meta.ErrLease, "the file's block stream failed: %v", fw.dead)
	}
	if e.rewritten(ctx, offset, len(data), fw.written) {
		return nil // a resubmission of the write that ended there (once.go)
	}
	if offset != fw.written {
		return meta.Errorf(op, p, meta.ErrInvalidArgument, "writes are sequential: offset %d, but %d bytes are written", offset, fw.written)
	}
	bs := n.BlockSize
	for len(data) > 0 {
		if fw.w == nil || fw.written-fw.start >= bs {
			if fw.nblocks >= uint32(e.cfg.MaxBlocksPerFile) {
				// The stream stays usable: the writer may still close the
				// file with the blocks it has.
				return meta.Errorf(op, p, meta.ErrTooLarge,
					"file has reached the limit on maximum number of blocks: %d blocks of %d bytes (the server's --max-blocks-per-file)", fw.nblocks, bs)
			}
			if err := e.nextBlock(ctx, u, p, n, fw); err != nil {
				fw.dead = err
				return err
			}
		}
		take := min(int64(len(data)), bs-(fw.written-fw.start))
		if _, err := fw.w.Write(data[:take]); err != nil {
			fw.dead = err
			return meta.Errorf(op, p, meta.ErrInternal, "writing block %d: %v", fw.block.ID, err)
		}
		fw.written += take
		data = data[take:]
		if fw.written-fw.synced >= e.cfg.SyncEvery {
			if err := fw.w.Sync(ctx); err != nil {
				fw.dead = err
				return meta.Errorf(op, p, meta.ErrInternal, "syncing block %d: %v", fw.block.ID, err)
			}
			fw.synced = fw.written
		}
	}
	if err := e.renewLease(ctx, fw.holder); err != nil {
		e.log.Warn("recording a lease renewal for the other NameNodes", "path", p, "err", err)
	}
	return nil
}

// nextBlock finalizes the stream's full block (if any) and starts the next,
// recording both in one transaction.
func (e *Engine) nextBlock(ctx context.Context, u meta.User, p string, n *store.Inode, fw *fileWriter) error {
	const op = "write"
	var done *store.Block
	if fw.w != nil {
		length, err := fw.w.Finalize(ctx)
		if err != nil {
			return meta.Errorf(op, p, meta.ErrInternal, "finalizing block %d: %v", fw.block.ID, err)
		}
		fw.w = nil
		fw.synced = fw.written
		b := fw.block
		b.Length, b.Complete = length, true
		done = &b
	}
	bid, err := e.newBlockID(ctx)
	if err != nil {
		return err
	}
	next := store.Block{File: n.ID, Index: fw.nblocks, ID: bid, GenStamp: 1}
	w, err := e.blocks.Create(ctx, blocks.ID{Block: bid, GenStamp: 1})
	if err != nil {
		return meta.Errorf(op, p, meta.ErrInternal, "creating block %d: %v", bid, err)
	}
	err = e.run(ctx, "add block", p, u, func(t *tx) error {
		client, _ := splitHolder(fw.holder)
		r, cur, err := t.writerFile(ctx, op, p, client)
		if err != nil {
			return err
		}
		if cur.ID != n.ID {
			return meta.Errorf(op, p, meta.ErrLease, "the file was replaced")
		}
		if done != nil {
			t.putBlock(done)
		}
		// Usage follows the written length, block by block.
		if err := t.charge(op, p, r.chain[:r.depth()], 0, (fw.written-cur.Written)*int64(cur.Replication)); err != nil {
			return err
		}
		cur.Written = fw.written
		t.put(cur)
		t.putBlock(&next)
		return nil
	})
	if err != nil {
		_ = w.Abort()
		return err
	}
	fw.w, fw.block, fw.start = w, next, fw.written
	fw.nblocks++
	return nil
}

// finishBlocks finalizes the stream of block file n at Complete and records
// the last block; the caller's transaction holds n exclusive and commits.
func (t *tx) finishBlocks(ctx context.Context, op string, r *resolved, n *store.Inode, fw *fileWriter) error {
	// A write holds the stream while it may wait for this file's lock:
	// never wait for the stream while holding the lock.
	if !fw.mu.TryLock() {
		return meta.Errorf(op, r.path, meta.ErrBusy, "a write to the file is in progress")
	}
	defer fw.mu.Unlock()
	if fw.dead != nil {
		return meta.Errorf(op, r.path, meta.ErrLease, "the file's block stream failed: %v", fw.dead)
	}
	if fw.w != nil {
		length, err := fw.w.Finalize(ctx)
		if err != nil {
			fw.dead = err
			return meta.Errorf(op, r.path, meta.ErrInternal, "finalizing block %d: %v", fw.block.ID, err)
		}
		fw.w = nil
		b := fw.block
		b.Length, b.Complete = length, true
		t.putBlock(&b)
	}
	if err := t.charge(op, r.path, r.chain[:r.depth()], 0, (fw.written-n.Written)*int64(n.Replication)); err != nil {
		return err
	}
	n.Written = fw.written
	t.after = append(t.after, func() { t.e.writers.drop(n.ID) })
	return nil
}

// recoverBlocks is lease recovery for block file n: the last block's replica
// is cut to its durable length and finalized under a new generation stamp,
// and the file's length becomes what the blocks hold. The caller closes the
// file in its transaction.
func (t *tx) recoverBlocks(ctx context.Context, op string, r *resolved, n *store.Inode) error {
	if t.e.cfg.DataNodes != nil {
		return t.dnRecoverBlocks(ctx, op, r, n)
	}
	if err := t.stopStream(n.ID); err != nil {
		return err
	}
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	var total int64
	for i := range rows {
		b := &rows[i]
		if !b.Complete {
			length, gs, err := t.e.recoverReplica(ctx, b)
			if errors.Is(err, errReplicaElsewhere) {
				return meta.Errorf(op, r.path, meta.ErrLease,
					"block %d, the one being written, has no replica on this NameNode's DataNode: the file is being written through another NameNode (close it there), or that NameNode is down and its replica waits for it to return", b.ID)
			}
			if err != nil {
				return err
			}
			b.Length, b.GenStamp, b.Complete = length, gs, true
			t.putBlock(b)
		}
		total += b.Length
	}
	// Usage follows the written length: give back what the blocks lost (an
	// appended-to replica gone), charge the synced tail of the last block
	// (charged so far only up to its start). Never refused: the bytes are
	// already stored, as HDFS's recovery commits past a quota.
	if err := t.adjust(op, r.path, r.chain[:r.depth()], (total-n.Written)*int64(n.Replication)); err != nil {
		return err
	}
	n.Written = total
	return nil
}

// stamps are the generation stamps a replica of row b may have: the row's,
// and the neighbours an append (row ahead) or a truncate (replica ahead) that
// a crash interrupted can leave.
func stamps(b *store.Block) []uint64 {
	return []uint64{b.GenStamp, b.GenStamp - 1, b.GenStamp + 1}
}

// errReplicaElsewhere: recovery found no replica of a block on this
// engine's DataNode, on a store other NameNodes share.
var errReplicaElsewhere = errors.New("namespace: the replica is not on this NameNode's DataNode")

// recoverReplica recovers the replica of block row b under a new generation
// stamp. A replica that is gone entirely counts as empty on a store that is
// this engine's alone. On a shared store each NameNode has its DataNode
// (blocks/local under its --data), and the replica of a file written through
// another NameNode is on that one's: recovery here would close the file
// without the bytes its writer synced, so it fails with errReplicaElsewhere
// (the lease monitor tries again at its next round; the file's own NameNode
// recovers it when the client completes it there, or at the monitor's round
// once that NameNode leads).
func (e *Engine) recoverReplica(ctx context.Context, b *store.Block) (length int64, gs uint64, err error) {
	for _, g := range stamps(b) {
		if g == 0 {
			continue
		}
		next := max(g, b.GenStamp) + 1
		length, err = e.blocks.Recover(ctx, blocks.ID{Block: b.ID, GenStamp: g}, next)
		if err == nil {
			return length, next, nil
		}
		if !errors.Is(err, blocks.ErrNotFound) {
			return 0, 0, fmt.Errorf("namespace: recovering block %d: %w", b.ID, err)
		}
	}
	if !e.alone {
		return 0, 0, fmt.Errorf("%w: block %d", errReplicaElsewhere, b.ID)
	}
	e.log.Warn("block replica missing at recovery: the block is empty", "block", b.ID)
	return 0, b.GenStamp, nil
}

// readBlocks reads [offset, offset+length) of block file n, within size bytes.
func (t *tx) readBlocks(ctx context.Context, p string, n *store.Inode, offset, length, size int64) ([]byte, error) {
	if t.e.cfg.DataNodes != nil {
		return nil, t.dnReadBlocks(p)
	}
	if offset >= size || length == 0 {
		return []byte{}, nil
	}
	end := min(size, offset+length)
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, end-offset)
	var start int64
	for _, b := range rows {
		blen := b.Length
		if !b.Complete {
			blen = size - start // the completed part of a block being appended to
		}
		lo, hi := max(offset, start), min(end, start+blen)
		if lo < hi {
			rc, err := t.e.blocks.Read(ctx, blocks.ID{Block: b.ID, GenStamp: b.GenStamp}, lo-start, hi-lo)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err() // the reader went away: not a storage failure
				}
				return nil, meta.Errorf("read", p, meta.ErrInternal, "block %d: %v", b.ID, err)
			}
			out, err = readAppend(out, rc, hi-lo)
			rc.Close()
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, meta.Errorf("read", p, meta.ErrInternal, "block %d at offset %d: %v", b.ID, lo-start, err)
			}
		}
		start += blen
		if start >= end {
			break
		}
	}
	if int64(len(out)) != end-offset {
		return nil, meta.Errorf("read", p, meta.ErrInternal, "blocks hold %d of the %d bytes asked", len(out), end-offset)
	}
	return out, nil
}

func readAppend(out []byte, r io.Reader, n int64) ([]byte, error) {
	l := len(out)
	out = out[:l+int(n)]
	_, err := io.ReadFull(r, out[l:])
	return out, err
}

// dropBlocks deletes the block rows of file n; the replicas are deleted once
// the transaction commits.
func (t *tx) dropBlocks(ctx context.Context, n *store.Inode) error {
	if t.e.cfg.DataNodes != nil {
		return t.dnDropBlocks(ctx, n)
	}
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	for _, b := range rows {
		t.delRaw(store.BlockKey(b.File, b.Index))
	}
	id := n.ID
	t.after = append(t.after, func() {
		t.e.writers.drop(id)
		for _, b := range rows {
			for _, g := range stamps(&b) {
				if err := t.e.blocks.Delete(context.Background(), blocks.ID{Block: b.ID, GenStamp: g}); err != nil {
					t.e.log.Warn("deleting a block replica", "block", b.ID, "err", err)
				}
			}
		}
	})
	return nil
}

// appendBlocks reopens block file n for writing by holder: the last block,
// when not full, is reopened under a new generation stamp.
func (t *tx) appendBlocks(ctx context.Context, n *store.Inode, holder string) error {
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	fw := &fileWriter{holder: holder, written: n.Length, synced: n.Length, start: n.Length, nblocks: uint32(len(rows))}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		fw.block = last
		if last.Length < n.BlockSize {
			fw.start = n.Length - last.Length
			old := blocks.ID{Block: last.ID, GenStamp: last.GenStamp}
			last.GenStamp++
			last.Complete = false
			w, err := t.e.blocks.OpenAppend(ctx, old, last.GenStamp)
			if err != nil {
				return fmt.Errorf("namespace: reopening block %d: %w", last.ID, err)
			}
			fw.w, fw.block = w, last
			t.putBlock(&last)
			t.undo = append(t.undo, func() { _ = w.Close() })
		}
	}
	t.after = append(t.after, func() { t.e.writers.put(n.ID, fw) })
	return nil
}

// truncateBlocks cuts block file n to size bytes. A result that fits the
// inline threshold moves back to content rows.
func (t *tx) truncateBlocks(ctx context.Context, p string, n *store.Inode, size int64) error {
	if t.e.cfg.DataNodes != nil {
		return t.dnTruncateBlocks(ctx, p, n, size)
	}
	if size <= t.e.cfg.InlineThreshold {
		data, err := t.readBlocks(ctx, p, n, 0, size, n.Length)
		if err != nil {
			return err
		}
		if err := t.dropBlocks(ctx, n); err != nil {
			return err
		}
		n.Blocks, n.Written = false, 0
		return t.appendContent(ctx, n, data)
	}
	rows, err := t.blockRows(ctx, n.ID)
	if err != nil {
		return err
	}
	var start int64
	var gone []store.Block
	for i := range rows {
		b := rows[i]
		switch {
		case start >= size:
			gone = append(gone, b)
			t.delRaw(store.BlockKey(b.File, b.Index))
		case start+b.Length > size:
			old := blocks.ID{Block: b.ID, GenStamp: b.GenStamp}
			b.GenStamp++
			b.Length = size - start
			// Cut the replica while the file is locked, then record it: a
			// crash in between leaves the row one stamp behind the replica.
			if err := t.e.blocks.Truncate(ctx, old, b.Length, b.GenStamp); err != nil {
				return meta.Errorf("truncate", p, meta.ErrInternal, "block %d: %v", b.ID, err)
			}
			t.putBlock(&b)
		}
		start += rows[i].Length
	}
	t.after = append(t.after, func() {
		for _, b := range gone {
			_ = t.e.blocks.Delete(context.Background(), blocks.ID{Block: b.ID, GenStamp: b.GenStamp})
		}
	})
	n.Written = size
	return nil
}

// RemoveOrphanBlocks deletes the replicas in this engine's block storage
// that no block row refers to (left by a crash between a transaction that
// dropped rows and the deletion of their replicas, or by a block started
// and never recorded) and returns how many it removed.
//
// A replica is created before the transaction that records its row
// commits, so a replica without a row may be one whose transaction is
// still pending; the rule that tells the two apart:
//
//   - the replicas are listed first, then the block rows read: a row that
//     commits before that read keeps its replica, and a replica created
//     after the listing is not a candidate at all;
//   - settle runs after that read (nil: none), then the rows are read
//     again and the replicas listed again: a candidate goes only if no row
//     referred to its block at either read and it is still there with the
//     same generation stamp.
//
// On a store that is this engine's alone, before it serves (what `nimbus
// serve` does), nothing can be pending: the previous process is gone, and
// its store with it, so settle is nil. On a store other NameNodes share,
// the previous process's last commit may still be landing in the database
// after it died, and this engine serves meanwhile: settle waits longer
// than any transaction can stay pending (the server's grace, a minute by
// default). Replicas of other NameNodes' DataNodes are never touched: each
// engine reports and deletes only its own (Config.Blocks).
func (e *Engine) RemoveOrphanBlocks(ctx context.Context, settle func(context.Context) error) (int, error) {
	if e.blocks == nil {
		return 0, nil
	}
	var listed []blocks.ID
	if err := e.blocks.Report(ctx, func(r blocks.Replica) error {
		listed = append(listed, r.ID)
		return nil
	}); err != nil {
		return 0, err
	}
	known, err := e.blockRowIDs(ctx)
	if err != nil {
		return 0, err
	}
	var cand []blocks.ID
	for _, id := range listed {
		if !known[id.Block] {
			cand = append(cand, id)
		}
	}
	if len(cand) == 0 {
		return 0, nil
	}
	if settle != nil {
		e.log.Info("replicas with no block row: waiting before removing them, in case their rows are still being committed", "count", len(cand))
		if err := settle(ctx); err != nil {
			return 0, err
		}
		if known, err = e.blockRowIDs(ctx); err != nil {
			return 0, err
		}
	}
	removed := 0
	for _, id := range cand {
		if known[id.Block] {
			continue
		}
		r, err := e.blocks.Stat(ctx, id)
		if errors.Is(err, blocks.ErrNotFound) {
			continue // deleted meanwhile, or moved on to another stamp
		}
		if err != nil {
			return removed, err
		}
		if err := e.blocks.Delete(ctx, id); err != nil {
			return removed, err
		}
		removed++
		e.log.Info("removed an orphaned block replica", "replica", id.String(), "length", r.Length)
	}
	return removed, nil
}

// blockRowIDs reads the block ids of every block row.
func (e *Engine) blockRowIDs(ctx context.Context) (map[uint64]bool, error) {
	known := make(map[uint64]bool)
	txn, err := e.st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	start, end := store.AllBlocksRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var b store.Block
		if store.DecodeBlock(k, v, &b) == nil {
			known[b.ID] = true
		}
		return true
	})
	return known, err
}

// checkConcatBlocks enforces HDFS's rule for a concat that moves blocks:
// every file but the last source ends on a block boundary of the target's
// block size (and has that block size), and holds its bytes in blocks unless
// it is empty.
func (t *tx) checkConcatBlocks(op string, rs []*resolved, files []*store.Inode) error {
	tn := files[0]
	for i, f := range files {
		last := i == len(files)-1
		switch {
		case f.Length > 0 && !f.Blocks:
			return meta.Errorf(op, rs[i].path, meta.ErrUnsupported,
				"concat into a file kept in blocks needs every file in blocks; this one (%d bytes) is kept inline", f.Length)
		case f.BlockSize != tn.BlockSize:
			return meta.Errorf(op, rs[i].path, meta.ErrInvalidArgument,
				"block size %d differs from the target's %d", f.BlockSize, tn.BlockSize)
		case !last && f.Length%tn.BlockSize != 0:
			return meta.Errorf(op, rs[i].path, meta.ErrInvalidArgument,
				"its last block is not full (%d bytes, block size %d): only the last source may end in a partial block, as in HDFS", f.Length, tn.BlockSize)
		}
	}
	return nil
}

// moveBlocks makes the block rows of src the blocks of target numbered from
// *next on (reads see committed rows only, so the caller counts).
func (t *tx) moveBlocks(ctx context.Context, src, target *store.Inode, next *uint32) error {
	rows, err := t.blockRows(ctx, src.ID)
	if err != nil {
		return err
	}
	for _, b := range rows {
		t.delRaw(store.BlockKey(b.File, b.Index))
		b.File, b.Index = target.ID, *next
		*next++
		t.putBlock(&b)
	}
	target.Blocks = true
	target.Written += src.Length
	return nil
}
