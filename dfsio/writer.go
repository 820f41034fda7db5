package dfsio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nimbus-fs/nimbus/dataxfer"
)

// ReplacePolicy says when a pipeline recovery adds a DataNode to replace
// the one it lost (HDFS's dfs.client.block.write.replace-datanode-on-failure.policy).
type ReplacePolicy uint8

const (
	// ReplaceDefault: with a replication of 3 or more, when at most half
	// the replication is left or the stream was hflushed/appended (HDFS's
	// DEFAULT: a block that readers may already see keeps its width).
	ReplaceDefault ReplacePolicy = iota
	ReplaceNever
	ReplaceAlways
)

// WriterConfig configures an OutputStream.
type WriterConfig struct {
	NameNode NameNode
	Data     *dataxfer.Client // its Name should be Client
	Path     string
	Client   string // the lease holder's name
	Writer   Location

	BlockSize   int64 // the file's block size; required
	Replication int   // the file's replication; 0: 3
	Policy      ReplacePolicy
	// PacketSize is passed to dataxfer (0: 64 KiB).
	PacketSize int
	// BlockWriteRetries bounds AddBlock attempts whose pipeline could not
	// be set up (HDFS's dfs.client.block.write.retries, 3).
	BlockWriteRetries int
	// Recoveries bounds the pipeline recoveries of one block (HDFS's
	// dfs.client.block.write.recovery.retries... 5).
	Recoveries int
	// CompleteTimeout bounds how long AddBlock and CompleteBlock are sent
	// again while the NameNode answers "not yet replicated"; 0: 30 s.
	CompleteTimeout time.Duration

	// Inline, when set, lets the NameNode keep the file's first bytes
	// itself: while the file is at most Inline.Limit bytes long, Write
	// sends them through Inline.Write (the NameNode's write call); past it
	// the stream asks for a first block (the NameNode drops its inline
	// copy) and writes the bytes it kept first.
	Inline *InlineConfig
	// Append, when set, opens the stream at the end of an existing file
	// the NameNode opened for appending.
	Append  *AppendConfig
	Metrics *Metrics // nil: none
	Logger  *slog.Logger
}

// AppendConfig is where an appending stream starts.
type AppendConfig struct {
	// Last is the NameNode's answer to the append (HDFS's append's
	// LocatedBlock): the file's partial last block under its new
	// generation stamp, with the DataNodes holding its replicas under the
	// previous stamp. The stream sets up a PIPELINE_SETUP_APPEND pipeline
	// on them and goes on writing that block. nil: the last block is full
	// (or the file has none) and the stream starts with AddBlock.
	Last *LocatedBlock
	// Previous is the file's last block when Last is nil (nil for a file
	// with no block): AddBlock names it.
	Previous *BlockRef
}

// InlineConfig is the inline-threshold hook of WriterConfig.
type InlineConfig struct {
	Limit int64
	// Have are the bytes the file already holds inline (an append).
	Have  []byte
	Write func(ctx context.Context, p []byte) error
}

// OutputStream writes a file through DataNode pipelines (HDFS's
// DFSOutputStream with its DataStreamer). Its methods must not be called
// concurrently.
type OutputStream struct {
	cfg WriterConfig
	ctx context.Context
	log *slog.Logger

	inline   []byte // bytes written inline, while inlining
	inlining bool
	prev     *BlockRef // the last block closed
	// prevSynced: its length was sent with Fsync.
	prevSynced bool
	exclude    []uint64
	lb         *LocatedBlock // the block being written, under its current stamp
	dnStamp    uint64        // the stamp of its replicas on the pipeline's DataNodes
	// issued are the stamps of this block's recovery attempts whose setup
	// failed: a DataNode may have moved its replica to one of them.
	issued   []uint64
	nodes    []DataNodeInfo
	failed   []uint64 // DataNodes that failed this block's pipeline
	bw       *dataxfer.BlockWriter
	pend     []byte // bytes of the block from pendOff not yet known acked
	pendOff  int64
	blockPos int64 // bytes written to the block
	synced   int64 // last length sent with Fsync
	hflushed bool
	closed   bool
	err      error
}

// Create opens a stream writing the file cfg.Path, already created (and
// leased to cfg.Client) on the NameNode. ctx bounds every call Write and
// Close make.
func Create(ctx context.Context, cfg WriterConfig) (*OutputStream, error) {
	if cfg.NameNode == nil || cfg.Data == nil || cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("dfsio: create %s: NameNode, Data and a positive BlockSize are required", cfg.Path)
	}
	if cfg.Replication <= 0 {
		cfg.Replication = 3
	}
	if cfg.BlockWriteRetries <= 0 {
		cfg.BlockWriteRetries = 3
	}
	if cfg.Recoveries <= 0 {
		cfg.Recoveries = 5
	}
	if cfg.CompleteTimeout <= 0 {
		cfg.CompleteTimeout = 30 * time.Second
	}
	s := &OutputStream{cfg: cfg, ctx: ctx, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if cfg.Inline != nil {
		s.inlining = true
		s.inline = slices.Clone(cfg.Inline.Have)
	}
	if a := cfg.Append; a != nil {
		s.inlining, s.prev = false, a.Previous
		if lb := a.Last; lb != nil {
			if err := s.openAppend(lb); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// openAppend sets up the pipeline appending to the file's partial last
// block lb (its replicas are under lb.GenStamp-1).
func (s *OutputStream) openAppend(lb *LocatedBlock) error {
	if len(lb.Targets) == 0 || lb.GenStamp < 2 {
		return s.errf("append to blk_%d_%d: no replica to append to", lb.ID, lb.GenStamp)
	}
	b := block(lb, lb.NumBytes)
	b.GenStamp = lb.GenStamp - 1
	bw, err := s.cfg.Data.WriteBlock(s.ctx, b, lb.Token, targets(lb.Targets), dataxfer.WriteOptions{
		Append: true, Offset: lb.NumBytes, LatestGenStamp: lb.GenStamp, PacketSize: s.cfg.PacketSize,
	})
	if err != nil {
		return s.errf("append to blk_%d_%d: %w", lb.ID, lb.GenStamp, err)
	}
	s.lb, s.nodes, s.bw, s.dnStamp = lb, slices.Clone(lb.Targets), bw, lb.GenStamp
	s.pendOff, s.blockPos, s.synced = lb.NumBytes, lb.NumBytes, lb.NumBytes
	return nil
}

func (s *OutputStream) errf(format string, args ...any) error {
	return fmt.Errorf("dfsio: write %s: "+format, append([]any{s.cfg.Path}, args...)...)
}

// Write writes p; full blocks are closed and new ones added as the file
// grows.
func (s *OutputStream) Write(p []byte) (int, error) {
	if s.closed {
		return 0, s.errf("stream closed")
	}
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	if s.inlining {
		if int64(len(s.inline)+len(p)) <= s.cfg.Inline.Limit {
			if err := s.cfg.Inline.Write(s.ctx, p); err != nil {
				return 0, err
			}
			s.inline = append(s.inline, p...)
			return len(p), nil
		}
		// Past the threshold: the kept bytes go to block 0 first.
		s.inlining = false
		kept := s.inline
		s.inline = nil
		if err := s.write(kept); err != nil {
			return 0, s.fail(err)
		}
	}
	for len(p) > 0 {
		if s.bw == nil {
			if err := s.startBlock(); err != nil {
				return n, s.fail(err)
			}
		}
		k := int(min(int64(len(p)), s.cfg.BlockSize-s.blockPos))
		if err := s.writeBlock(p[:k]); err != nil {
			return n, s.fail(err)
		}
		p, n = p[k:], n+k
		if s.blockPos == s.cfg.BlockSize {
			if err := s.endBlock(); err != nil {
				return n, s.fail(err)
			}
		}
	}
	return n, nil
}

func (s *OutputStream) write(p []byte) error {
	_, err := s.Write(p)
	return err
}

func (s *OutputStream) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// writeBlock sends p to the current pipeline, keeping it until acked.
func (s *OutputStream) writeBlock(p []byte) error {
	s.trim()
	s.pend = append(s.pend, p...)
	s.blockPos += int64(len(p))
	s.cfg.Metrics.inc(mBytesWritten, len(p))
	if _, err := s.bw.Write(p); err != nil {
		// The recovery sends every unacknowledged byte again, p too.
		return s.recover(s.ctx, err)
	}
	return nil
}

// trim drops the kept bytes every DataNode acknowledged.
func (s *OutputStream) trim() {
	if a := s.bw.Acked(); a > s.pendOff {
		s.pend = s.pend[a-s.pendOff:]
		s.pendOff = a
	}
}

// startBlock adds a block and sets up its pipeline: a pipeline that fails
// to set up abandons the block and excludes the DataNode at fault
// (DataStreamer.nextBlockOutputStream).
func (s *OutputStream) startBlock() error {
	var lastErr error
	for range s.cfg.BlockWriteRetries {
		var lb *LocatedBlock
		err := s.retry(s.ctx, "add block", func() (err error) {
			lb, err = s.cfg.NameNode.AddBlock(s.ctx, s.cfg.Path, s.cfg.Client, s.prev, s.exclude, s.cfg.Writer)
			return err
		})
		if err != nil {
			return s.errf("add block: %w", err)
		}
		if len(lb.Targets) == 0 {
			return s.errf("add block: blk_%d with no DataNode", lb.ID)
		}
		bw, err := s.cfg.Data.WriteBlock(s.ctx, block(lb, 0), lb.Token, targets(lb.Targets), dataxfer.WriteOptions{PacketSize: s.cfg.PacketSize})
		if err == nil {
			s.lb, s.nodes, s.bw, s.failed, s.dnStamp, s.issued = lb, slices.Clone(lb.Targets), bw, nil, lb.GenStamp, nil
			s.pend, s.pendOff, s.blockPos, s.synced = s.pend[:0], 0, 0, 0
			return nil
		}
		lastErr = err
		var pe *dataxfer.PipelineError
		if !errors.As(err, &pe) {
			return s.errf("blk_%d: %w", lb.ID, err)
		}
		s.log.Info("dfsio: pipeline setup failed; abandoning the block", "path", s.cfg.Path, "block", lb.ID, "datanode", pe.Addr, "err", err)
		s.cfg.Metrics.inc(mAbandoned, 1)
		if aerr := s.cfg.NameNode.AbandonBlock(s.ctx, s.cfg.Path, s.cfg.Client, lb.Ref()); aerr != nil {
			return s.errf("abandon blk_%d: %w", lb.ID, aerr)
		}
		s.exclude = append(s.exclude, lb.Targets[pe.Index].ID)
	}
	return s.errf("no pipeline after %d attempts: %w", s.cfg.BlockWriteRetries, lastErr)
}

// endBlock closes the block being written (the last packet), recovering
// the pipeline as often as needed.
func (s *OutputStream) endBlock() error {
	for {
		n, err := s.bw.Close(s.ctx)
		if err == nil {
			s.prev = &BlockRef{ID: s.lb.ID, GenStamp: s.lb.GenStamp, NumBytes: n}
			s.prevSynced = false
			s.bw, s.lb, s.pend = nil, nil, s.pend[:0]
			return nil
		}
		if err := s.recover(s.ctx, err); err != nil {
			return err
		}
	}
}

// recover runs HDFS's pipeline recovery after err (a *PipelineError; any
// other error fails the stream): it ends with a pipeline on which every
// byte written to the block was sent again.
func (s *OutputStream) recover(ctx context.Context, err error) error {
	acked := s.bw.Acked()
	s.bw.Abort()
	s.bw = nil
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return s.errf("blk_%d: %w", s.lb.ID, errors.Join(ctx.Err(), err))
		}
		var pe *dataxfer.PipelineError
		if !errors.As(err, &pe) {
			return s.errf("blk_%d: %w", s.lb.ID, err)
		}
		if attempt >= s.cfg.Recoveries {
			return s.errf("blk_%d: pipeline recovery failed %d times: %w", s.lb.ID, attempt, err)
		}
		s.trim2(acked)
		bad := min(max(pe.Index, 0), len(s.nodes)-1)
		s.cfg.Metrics.inc(mRecoveries, 1)
		s.log.Warn("dfsio: pipeline failed; recovering", "path", s.cfg.Path, "block", s.lb.ID, "datanode", s.nodes[bad].DataAddr, "acked", acked, "err", err)
		s.failed = append(s.failed, s.nodes[bad].ID)
		s.nodes = slices.Delete(s.nodes, bad, bad+1)
		if len(s.nodes) == 0 {
			return s.errf("blk_%d: every DataNode of the pipeline failed: %w", s.lb.ID, err)
		}
		old := BlockRef{ID: s.lb.ID, GenStamp: s.lb.GenStamp, NumBytes: acked}
		if s.replace() {
			s.addDataNode(ctx, old)
		}
		// The DataNodes' replicas are under the stamp of the last
		// pipeline that was set up: a setup that failed moved none.
		dnb := block(s.lb, acked)
		dnb.GenStamp = s.dnStamp
		up, uerr := s.cfg.NameNode.UpdateBlockForPipeline(ctx, s.cfg.Path, s.cfg.Client, old)
		if uerr != nil {
			return s.errf("update blk_%d for pipeline: %w", s.lb.ID, uerr)
		}
		bw, werr := s.cfg.Data.WriteBlock(ctx, dnb, up.Token, targets(s.nodes), dataxfer.WriteOptions{
			Stage: dataxfer.StageStreamingRecovery, Offset: acked, MinBytesRcvd: acked,
			MaxBytesRcvd: s.blockPos, LatestGenStamp: up.GenStamp, PacketSize: s.cfg.PacketSize,
		})
		s.lb.GenStamp, s.lb.Token = up.GenStamp, up.Token
		if werr != nil {
			s.issued = append(s.issued, up.GenStamp)
			err = werr
			continue
		}
		s.dnStamp, s.issued = up.GenStamp, nil
		if len(s.pend) > 0 {
			if _, werr := bw.Write(s.pend); werr != nil {
				acked = max(acked, bw.Acked())
				bw.Abort()
				err = werr
				continue
			}
		}
		s.bw = bw
		updated := BlockRef{ID: s.lb.ID, GenStamp: up.GenStamp, NumBytes: acked}
		ids := make([]uint64, len(s.nodes))
		for i, n := range s.nodes {
			ids[i] = n.ID
		}
		if uerr := s.cfg.NameNode.UpdatePipeline(ctx, s.cfg.Path, s.cfg.Client, old, updated, ids); uerr != nil {
			return s.errf("update pipeline of blk_%d: %w", s.lb.ID, uerr)
		}
		return nil
	}
}

func (s *OutputStream) trim2(acked int64) {
	if acked > s.pendOff {
		s.pend = s.pend[acked-s.pendOff:]
		s.pendOff = acked
	}
}

// replace is the replace-datanode-on-failure policy.
func (s *OutputStream) replace() bool {
	r, n := s.cfg.Replication, len(s.nodes)
	if n >= r {
		return false
	}
	switch s.cfg.Policy {
	case ReplaceNever:
		return false
	case ReplaceAlways:
		return true
	}
	return r >= 3 && (n <= r/2 || s.hflushed || s.cfg.Append != nil)
}

// addDataNode asks for a DataNode to replace a lost one and has a
// surviving DataNode copy the replica's acknowledged bytes to it
// (TRANSFER_BLOCK, stage TRANSFER_RBW), so that it joins the recovered
// pipeline. It is best effort: when no DataNode is found or the copy
// fails, the pipeline goes on narrower.
func (s *OutputStream) addDataNode(ctx context.Context, b BlockRef) {
	existing := make([]uint64, len(s.nodes))
	for i, n := range s.nodes {
		existing[i] = n.ID
	}
	add, err := s.cfg.NameNode.AdditionalDataNode(ctx, s.cfg.Path, s.cfg.Client, b, existing, s.failed, 1, s.cfg.Writer)
	if err != nil || len(add.Targets) == 0 {
		s.log.Info("dfsio: no DataNode to add to the pipeline", "path", s.cfg.Path, "block", b.ID, "err", err)
		return
	}
	// The survivor's replica is under the stamp of the last pipeline set
	// up, or of a failed setup that reached it.
	var err2 error
	for _, gs := range append([]uint64{s.dnStamp}, s.issued...) {
		nb := dataxfer.Block{Pool: s.lb.Pool, ID: b.ID, GenStamp: gs, NumBytes: b.NumBytes}
		if err2 = s.cfg.Data.TransferBlock(ctx, s.nodes[0].DataAddr, nb, add.Token, targets(add.Targets[:1])); err2 == nil {
			break
		}
	}
	if err2 != nil {
		s.log.Info("dfsio: copying the replica to an added DataNode failed", "path", s.cfg.Path, "block", b.ID, "datanode", add.Targets[0].DataAddr, "err", err2)
		s.failed = append(s.failed, add.Targets[0].ID)
		return
	}
	s.nodes = append(s.nodes, add.Targets[0])
	s.cfg.Metrics.inc(mReplaced, 1)
}

// Hflush sends the bytes written and waits until every DataNode of the
// pipeline acknowledged them; the NameNode records the block's length.
// DataNodes serve a replica being written up to its last sync: readers
// see the bytes after Hsync.
func (s *OutputStream) Hflush(ctx context.Context) error {
	return s.flush(ctx, false)
}

// Hsync is Hflush with every DataNode syncing the bytes to disk first.
func (s *OutputStream) Hsync(ctx context.Context) error {
	return s.flush(ctx, true)
}

func (s *OutputStream) flush(ctx context.Context, sync bool) error {
	if s.closed {
		return s.errf("stream closed")
	}
	if s.err != nil {
		return s.err
	}
	s.hflushed = true
	if s.bw == nil {
		// At a block boundary the closed block is the file's last until
		// the next AddBlock commits it: its length is the one to record.
		if s.prev != nil && !s.prevSynced {
			if err := s.cfg.NameNode.Fsync(ctx, s.cfg.Path, s.cfg.Client, s.prev.NumBytes); err != nil {
				return s.fail(s.errf("fsync: %w", err))
			}
			s.prevSynced = true
		}
		return nil
	}
	for {
		var err error
		if sync {
			err = s.bw.Sync(ctx)
		} else {
			err = s.bw.Flush(ctx)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return s.fail(s.errf("flush: %w", err))
		}
		if err := s.recover(ctx, err); err != nil {
			return s.fail(err)
		}
	}
	s.trim()
	if s.blockPos != s.synced {
		if err := s.cfg.NameNode.Fsync(ctx, s.cfg.Path, s.cfg.Client, s.blockPos); err != nil {
			return s.fail(s.errf("fsync: %w", err))
		}
		s.synced = s.blockPos
	}
	return nil
}

// Close ends the last block and completes the file, sending CompleteBlock
// again under a backoff while the NameNode has no replica of the last
// block reported (bounded by CompleteTimeout).
func (s *OutputStream) Close() error {
	if s.closed {
		return s.err
	}
	if s.err != nil {
		s.closed = true
		if s.bw != nil {
			s.bw.Abort()
		}
		return s.err
	}
	if s.bw != nil {
		if err := s.endBlock(); err != nil {
			s.closed = true
			if s.bw != nil {
				s.bw.Abort()
			}
			return s.fail(err)
		}
	}
	s.closed = true
	err := s.retry(s.ctx, "complete", func() error {
		return s.cfg.NameNode.CompleteBlock(s.ctx, s.cfg.Path, s.cfg.Client, s.prev)
	})
	if err != nil {
		return s.fail(s.errf("complete: %w", err))
	}
	return nil
}

// retry sends call again under a doubling backoff while its error
// IsRetryable, for at most CompleteTimeout (DFSOutputStream.completeFile).
func (s *OutputStream) retry(ctx context.Context, what string, call func() error) error {
	deadline := time.Now().Add(s.cfg.CompleteTimeout)
	delay := 20 * time.Millisecond
	for {
		err := call()
		if err == nil || !IsRetryable(err) {
			return err
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("still retrying %s after %v: %w", what, s.cfg.CompleteTimeout, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

func block(lb *LocatedBlock, n int64) dataxfer.Block {
	return dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: n}
}

func targets(ns []DataNodeInfo) []dataxfer.Target {
	ts := make([]dataxfer.Target, len(ns))
	for i, n := range ns {
		ts[i] = dataxfer.Target{Addr: n.DataAddr, UUID: n.UUID, Hostname: n.Host, StorageID: n.StorageID}
	}
	return ts
}
