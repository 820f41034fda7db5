package dataxfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// Stage is a BlockConstructionStage of WRITE_BLOCK.
type Stage = hadoop.OpWriteBlockProto_BlockConstructionStage

// WriteOptions tunes WriteBlock. The zero value creates a block with HDFS's
// client defaults.
type WriteOptions struct {
	// Stage is the op's stage. Its zero value is PIPELINE_SETUP_APPEND in
	// Hadoop's enum; here it means PIPELINE_SETUP_CREATE unless Append is
	// set.
	Stage Stage
	// Append selects PIPELINE_SETUP_APPEND.
	Append bool
	// Offset is the number of bytes the replicas already have (append,
	// recovery): the first packet starts there.
	Offset int64
	// MinBytesRcvd, MaxBytesRcvd: for a recovery, the bytes acknowledged
	// and the bytes sent before the failure.
	MinBytesRcvd, MaxBytesRcvd int64
	// LatestGenStamp is the generation stamp the replicas get (append,
	// recovery); 0: the block's.
	LatestGenStamp uint64
	// PacketSize is the size of a full packet with its header and
	// checksums (HDFS's dfs.client-write-packet-size, 64 KiB): 126 chunks
	// of data by default.
	PacketSize int
	// MaxInFlight bounds the packets sent and not yet acknowledged (HDFS's
	// dfs.client.write.max-packets-in-flight, 80).
	MaxInFlight int
}

// PipelineError is a write that failed at one DataNode of the pipeline:
// Index is its position (0 the first), as HDFS's DataStreamer finds the
// bad node, so that the caller can recover the pipeline without it.
type PipelineError struct {
	Index  int
	Addr   string
	Block  Block
	Status hadoop.Status // the status it reported, ERROR if the connection broke
	Err    error
}

func (e *PipelineError) Error() string {
	return fmt.Sprintf("dataxfer: write %s: pipeline node %d (%s) failed: %v: %v", e.Block, e.Index, e.Addr, e.Status, e.Err)
}

func (e *PipelineError) Unwrap() error { return e.Err }

// BlockWriter writes one block through a pipeline of DataNodes: bytes are
// cut into packets of whole 512-byte chunks with their CRC32C, sent to the
// first DataNode, which stores and forwards them; acks come back merged.
// Its methods must not be called concurrently.
type BlockWriter struct {
	c        *Client
	nc       net.Conn
	w        *bufio.Writer
	b        Block
	pipeline []Target
	maxData  int

	sendMu   sync.Mutex // serializes packets and heartbeats on w
	lastSend time.Time  // when the last packet or heartbeat went out; under sendMu

	buf    []byte // bytes not yet sent in a full packet, starting at bufOff
	bufOff int64
	seq    int64
	pkt    []byte
	window chan struct{}

	mu struct {
		sync.Mutex
		queue []pending
		acked int64 // bytes acknowledged by every DataNode
		err   error
		cond  *sync.Cond
	}
	done   chan struct{}
	stop   func() bool
	closed bool
}

type pending struct {
	seqno int64
	end   int64
	last  bool
}

// WriteBlock sets up a pipeline to write b (HDFS's DataStreamer
// createBlockOutputStream): the op goes to pipeline[0] with the rest as
// targets; a DataNode that fails the setup is named by a *PipelineError.
func (c *Client) WriteBlock(ctx context.Context, b Block, tok blocktoken.Token, pipeline []Target, opts WriteOptions) (*BlockWriter, error) {
	if len(pipeline) == 0 {
		return nil, fmt.Errorf("dataxfer: write %s: empty pipeline", b)
	}
	st := opts.Stage
	if st == 0 && !opts.Append {
		st = StageCreate
	}
	gs := opts.LatestGenStamp
	if gs == 0 {
		gs = b.GenStamp
	}
	psize := opts.PacketSize
	if psize <= 0 {
		psize = 64 << 10
	}
	chunksPer := max((psize-packetMaxHeader)/(blocks.ChunkSize+crcSize), 1)
	inflight := opts.MaxInFlight
	if inflight <= 0 {
		inflight = 80
	}
	req := &hadoop.OpWriteBlockProto{
		Header:                c.header(b, tok),
		Stage:                 st.Enum(),
		PipelineSize:          proto.Uint32(uint32(len(pipeline))),
		MinBytesRcvd:          proto.Uint64(uint64(opts.MinBytesRcvd)),
		MaxBytesRcvd:          proto.Uint64(uint64(opts.MaxBytesRcvd)),
		LatestGenerationStamp: proto.Uint64(gs),
		RequestedChecksum:     CRC32C.proto(),
		StorageType:           pipeline[0].storageType().Enum(),
	}
	if pipeline[0].StorageID != "" {
		req.StorageId = proto.String(pipeline[0].StorageID)
	}
	for _, t := range pipeline[1:] {
		req.Targets = append(req.Targets, t.proto())
		req.TargetStorageTypes = append(req.TargetStorageTypes, t.storageType())
		req.TargetStorageIds = append(req.TargetStorageIds, t.StorageID)
	}
	nc, r, resp, err := c.call(ctx, pipeline[0].Addr, OpWriteBlock, b, req)
	if err != nil {
		idx, status := 0, hadoop.Status_ERROR
		if resp != nil {
			status = resp.GetStatus()
			if bad := resp.GetFirstBadLink(); bad != "" {
				for i, t := range pipeline {
					if t.Addr == bad {
						idx = i
					}
				}
			}
		}
		return nil, &PipelineError{Index: idx, Addr: pipeline[idx].Addr, Block: b, Status: status, Err: err}
	}
	nc.SetDeadline(time.Time{})
	bw := &BlockWriter{
		c: c, nc: nc, w: bufio.NewWriterSize(&deadlineConn{nc: nc, d: c.timeout()}, psize+64), b: b, pipeline: pipeline,
		maxData: chunksPer * blocks.ChunkSize, bufOff: opts.Offset,
		window: make(chan struct{}, inflight), done: make(chan struct{}),
	}
	bw.b.GenStamp = gs
	bw.mu.acked = opts.Offset
	bw.mu.cond = sync.NewCond(&bw.mu.Mutex)
	bw.stop = closeOnDone(ctx, nc)
	bw.lastSend = time.Now()
	go bw.readAcks(r)
	go bw.heartbeats(c.timeout() / 2)
	return bw, nil
}

// heartbeats sends an empty packet with seqno -1 whenever nothing was sent
// for interval (HDFS's DataStreamer does so at half the socket timeout), so
// that a writer that pauses keeps its pipeline: every DataNode's read
// deadline would otherwise end it.
func (bw *BlockWriter) heartbeats(interval time.Duration) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	var hb []byte
	for {
		select {
		case <-bw.done:
			return
		case <-t.C:
		}
		bw.sendMu.Lock()
		if time.Since(bw.lastSend) >= interval {
			hb = AppendPacket(hb[:0], PacketHeader{Seqno: HeartbeatSeqno}, nil, true)
			_, err := bw.w.Write(hb)
			if err == nil {
				err = bw.w.Flush()
			}
			bw.lastSend = time.Now()
			if err != nil {
				bw.sendMu.Unlock()
				bw.setErr(&PipelineError{Index: 0, Addr: bw.pipeline[0].Addr, Block: bw.b, Status: hadoop.Status_ERROR, Err: fmt.Errorf("heartbeat: %w", err)})
				return
			}
		}
		bw.sendMu.Unlock()
	}
}

// room is how many more bytes the current packet takes: up to a full
// packet, and a packet that starts inside a chunk (an append to a replica
// ending in a partial chunk) ends at that chunk's end, so that later
// packets are chunk aligned, as HDFS's DFSOutputStream does.
func (bw *BlockWriter) room() int {
	if r := int(bw.bufOff % blocks.ChunkSize); r != 0 {
		return blocks.ChunkSize - r - len(bw.buf)
	}
	return bw.maxData - len(bw.buf)
}

// Write buffers p and sends every full packet.
func (bw *BlockWriter) Write(p []byte) (int, error) {
	if err := bw.failed(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := min(bw.room(), len(p))
		bw.buf = append(bw.buf, p[:k]...)
		p, n = p[k:], n+k
		if bw.room() == 0 {
			if err := bw.sendPacket(false, false); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// sendPacket sends the buffered bytes as one packet. The bytes of a partial
// last chunk stay buffered: the next packet sends the chunk again with what
// follows (the DataNodes keep the bytes they have), so every packet's
// checksums cover whole chunks of the block.
func (bw *BlockWriter) sendPacket(sync, last bool) error {
	select {
	case bw.window <- struct{}{}:
	case <-bw.done:
		return bw.failed()
	}
	end := bw.bufOff + int64(len(bw.buf))
	h := PacketHeader{Offset: bw.bufOff, Seqno: bw.seq, Last: last, Sync: sync}
	bw.pkt = AppendPacket(bw.pkt[:0], h, bw.buf, true)
	bw.mu.Lock()
	bw.mu.queue = append(bw.mu.queue, pending{seqno: bw.seq, end: end, last: last})
	bw.mu.Unlock()
	bw.seq++
	bw.sendMu.Lock()
	_, err := bw.w.Write(bw.pkt)
	if err == nil {
		err = bw.w.Flush()
	}
	bw.lastSend = time.Now()
	bw.sendMu.Unlock()
	if err != nil {
		// A failed send blames the first DataNode, unless an ack already
		// named another.
		return bw.setErr(&PipelineError{Index: 0, Addr: bw.pipeline[0].Addr, Block: bw.b, Status: hadoop.Status_ERROR, Err: err})
	}
	keep := max(bw.bufOff, end-end%blocks.ChunkSize)
	bw.buf = append(bw.buf[:0], bw.buf[keep-bw.bufOff:]...)
	bw.bufOff = keep
	return nil
}

func (bw *BlockWriter) setErr(err error) error {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if bw.mu.err == nil {
		bw.mu.err = err
		bw.nc.Close()
	}
	bw.mu.cond.Broadcast()
	return bw.mu.err
}

func (bw *BlockWriter) failed() error {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.mu.err
}

// readAcks is HDFS's ResponseProcessor: acks must come in packet order;
// the highest index of a DataNode that did not succeed is the bad one; a
// broken ack stream blames the first DataNode.
func (bw *BlockWriter) readAcks(r *bufio.Reader) {
	defer close(bw.done)
	for {
		bw.nc.SetReadDeadline(time.Now().Add(bw.c.timeout() * 2))
		bw.mu.Lock()
		idle := len(bw.mu.queue) == 0
		bw.mu.Unlock()
		if idle {
			bw.nc.SetReadDeadline(time.Time{})
		}
		a, err := ReadAck(r)
		if err != nil {
			bw.setErr(&PipelineError{Index: 0, Addr: bw.pipeline[0].Addr, Block: bw.b, Status: hadoop.Status_ERROR, Err: fmt.Errorf("reading acks: %w", err)})
			return
		}
		for i := len(a.Status) - 1; i >= 0; i-- {
			if a.Status[i] != hadoop.Status_SUCCESS {
				idx := min(i, len(bw.pipeline)-1)
				bw.setErr(&PipelineError{Index: idx, Addr: bw.pipeline[idx].Addr, Block: bw.b, Status: a.Status[i], Err: fmt.Errorf("ack of packet %d", a.Seqno)})
				return
			}
		}
		if a.Seqno == HeartbeatSeqno {
			continue
		}
		bw.mu.Lock()
		if len(bw.mu.queue) == 0 || bw.mu.queue[0].seqno != a.Seqno || len(a.Status) != len(bw.pipeline) {
			bw.mu.Unlock()
			bw.setErr(&PipelineError{Index: 0, Addr: bw.pipeline[0].Addr, Block: bw.b, Status: hadoop.Status_ERROR,
				Err: protoErr("ack of packet %d with %d statuses out of order", a.Seqno, len(a.Status))})
			return
		}
		p := bw.mu.queue[0]
		bw.mu.queue = bw.mu.queue[1:]
		bw.mu.acked = max(bw.mu.acked, p.end)
		bw.mu.cond.Broadcast()
		bw.mu.Unlock()
		<-bw.window
		if p.last {
			return // the block is complete: no more acks
		}
	}
}

// wait blocks until every packet sent is acknowledged.
func (bw *BlockWriter) wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		bw.mu.Lock()
		bw.mu.cond.Broadcast()
		bw.mu.Unlock()
	})
	defer stop()
	bw.mu.Lock()
	defer bw.mu.Unlock()
	for len(bw.mu.queue) > 0 && bw.mu.err == nil && ctx.Err() == nil {
		bw.mu.cond.Wait()
	}
	if len(bw.mu.queue) == 0 {
		return nil
	}
	if bw.mu.err != nil {
		return bw.mu.err
	}
	return ctx.Err()
}

// Acked is the number of bytes of the block every DataNode acknowledged
// (HDFS's bytesAcked: what a recovery keeps).
func (bw *BlockWriter) Acked() int64 {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.mu.acked
}

// Flush is hflush: it sends the buffered bytes and waits until every
// DataNode acknowledged them.
func (bw *BlockWriter) Flush(ctx context.Context) error {
	if err := bw.failed(); err != nil {
		return err
	}
	if len(bw.buf) > 0 {
		if err := bw.sendPacket(false, false); err != nil {
			return err
		}
	}
	return bw.wait(ctx)
}

// Sync is hsync: like Flush, with the packet's sync flag set, so that
// every DataNode makes the bytes durable before acknowledging.
func (bw *BlockWriter) Sync(ctx context.Context) error {
	if err := bw.failed(); err != nil {
		return err
	}
	if err := bw.sendPacket(true, false); err != nil {
		return err
	}
	return bw.wait(ctx)
}

// Close finishes the block: the buffered bytes, then the empty last
// packet; it returns once every DataNode acknowledged it (each has then
// finalized its replica) and returns the block's length.
func (bw *BlockWriter) Close(ctx context.Context) (int64, error) {
	if bw.closed {
		return 0, errors.New("dataxfer: block writer closed")
	}
	bw.closed = true
	defer bw.release()
	if err := bw.failed(); err != nil {
		return 0, err
	}
	if len(bw.buf) > 0 {
		if err := bw.sendPacket(false, false); err != nil {
			return 0, err
		}
	}
	end := bw.bufOff + int64(len(bw.buf))
	bw.bufOff, bw.buf = end, bw.buf[:0]
	if err := bw.sendPacket(false, true); err != nil {
		return 0, err
	}
	if err := bw.wait(ctx); err != nil {
		return 0, err
	}
	return end, nil
}

// Abort drops the connection; the DataNodes keep what they stored, being
// written.
func (bw *BlockWriter) Abort() {
	if !bw.closed {
		bw.closed = true
		bw.release()
	}
}

func (bw *BlockWriter) release() {
	bw.stop()
	bw.nc.Close()
	<-bw.done
}
