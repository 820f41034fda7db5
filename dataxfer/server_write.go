package dataxfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

type stage = hadoop.OpWriteBlockProto_BlockConstructionStage

// The stages an op may carry (HDFS's BlockConstructionStage), for
// WriteOptions.Stage.
const (
	StageAppend            = hadoop.OpWriteBlockProto_PIPELINE_SETUP_APPEND
	StageAppendRecovery    = hadoop.OpWriteBlockProto_PIPELINE_SETUP_APPEND_RECOVERY
	StageStreamingRecovery = hadoop.OpWriteBlockProto_PIPELINE_SETUP_STREAMING_RECOVERY
	StageCloseRecovery     = hadoop.OpWriteBlockProto_PIPELINE_CLOSE_RECOVERY
	StageCreate            = hadoop.OpWriteBlockProto_PIPELINE_SETUP_CREATE
	StageTransferRBW       = hadoop.OpWriteBlockProto_TRANSFER_RBW
	StageTransferFinalized = hadoop.OpWriteBlockProto_TRANSFER_FINALIZED
)

// writeOpState is one WRITE_BLOCK being served.
type writeOpState struct {
	s          *Server
	c          *conn
	req        *hadoop.OpWriteBlockProto
	b          Block
	isClient   bool // sent by a client (clientName set), not a DataNode
	isTransfer bool
	w          blocks.Writer
	created    bool // the replica was created by this op (abort drops it)
	replacing  bool // REPLACE_BLOCK: reported by the Replaced hook, not Received

	mirror     net.Conn
	mirrorAddr string
	mirrorR    *bufio.Reader
	mirrorW    *bufio.Writer
	mirrorErr  atomic.Bool // the downstream failed; the rest of the block is stored here only

	acks chan ackItem
}

// ackItem is a packet stored and waiting for its ack.
type ackItem struct {
	seqno  int64
	last   bool
	status hadoop.Status
}

// writeBlock serves WRITE_BLOCK as HDFS's DataXceiver.writeBlock and
// BlockReceiver: open the replica for the stage, connect to the next
// DataNode of the pipeline and forward the op, answer the upstream with
// the connection status (firstBadLink names a DataNode that failed), then
// store and forward every packet while a responder goroutine merges this
// DataNode's status with the downstream acks and sends them upstream.
func (s *Server) writeBlock(c *conn, req *hadoop.OpWriteBlockProto) error {
	hdr := req.GetHeader()
	b := blockOf(hdr.GetBaseHeader().GetBlock())
	op := &writeOpState{s: s, c: c, req: req, b: b, isClient: hdr.GetClientName() != ""}
	st := req.GetStage()
	op.isTransfer = st == StageTransferRBW || st == StageTransferFinalized
	if err := s.checkToken(c, OpWriteBlock, b, hdr.GetBaseHeader().GetToken(), blocktoken.Write); err != nil {
		return err
	}
	sum, err := checksumOf(req.GetRequestedChecksum())
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR_INVALID, "WRITE_BLOCK %s: %v", b, err))
		return fmt.Errorf("WRITE_BLOCK %s: %w", b, err)
	}
	if op.isTransfer && len(req.Targets) > 0 {
		s.respond(c, errResponse(hadoop.Status_ERROR_INVALID, "WRITE_BLOCK %s: %v does not support targets", b, st))
		return fmt.Errorf("WRITE_BLOCK %s: %v with targets", b, st)
	}

	// A recovery stops whatever write of the block is still in progress.
	release := s.claimBlock(c, b.ID, st != StageCreate && !op.isTransfer)
	defer release()

	if st == StageCloseRecovery {
		return op.closeRecovery()
	}
	if err := op.open(st); err != nil {
		// Answer with the error and no firstBadLink: the upstream DataNode
		// names this one (its mirror) to the client, and a client with no
		// upstream takes the first DataNode, this one.
		s.respond(c, errResponse(hadoop.Status_ERROR, "WRITE_BLOCK %s (%v): %v", b, st, err))
		return fmt.Errorf("WRITE_BLOCK %s (%v): %w", b, st, err)
	}
	ok := false
	defer func() { op.finish(ok) }()

	if err := op.connectMirror(); err != nil {
		return err
	}
	err = op.receive(sum)
	ok = err == nil
	return err
}

// claimBlock registers this op as the writer of block; when stopOld it
// first closes the connection of a write of the block in progress and
// waits (briefly) for it to end.
func (s *Server) claimBlock(c *conn, block uint64, stopOld bool) (release func()) {
	me := &activeWrite{conn: c.Conn, done: make(chan struct{})}
	s.mu.Lock()
	old := s.mu.writers[block]
	s.mu.writers[block] = me
	s.mu.Unlock()
	if old != nil && stopOld {
		old.conn.Close()
		select {
		case <-old.done:
		case <-time.After(s.cfg.Timeout):
		}
	}
	return func() {
		s.mu.Lock()
		if s.mu.writers[block] == me {
			delete(s.mu.writers, block)
		}
		s.mu.Unlock()
		close(me.done)
	}
}

// open opens the replica as the stage asks.
func (op *writeOpState) open(st stage) error {
	store, ctx, req := op.s.cfg.Store, op.s.ctx, op.req
	id := op.b.BlockID()
	var err error
	switch st {
	case StageCreate, StageTransferRBW, StageTransferFinalized:
		op.w, err = store.Create(ctx, id)
		op.created = err == nil
	case StageAppend:
		op.w, err = store.OpenAppend(ctx, id, req.GetLatestGenerationStamp())
	case StageStreamingRecovery, StageAppendRecovery:
		op.w, err = openForRecovery(ctx, store, id, req.GetLatestGenerationStamp())
		if err == nil {
			n := op.w.Len()
			if n < int64(req.GetMinBytesRcvd()) || n > int64(req.GetMaxBytesRcvd()) {
				op.w.Close()
				op.w = nil
				return fmt.Errorf("replica has %d bytes, the client acknowledged %d and sent %d", n, req.GetMinBytesRcvd(), req.GetMaxBytesRcvd())
			}
		}
	default:
		return fmt.Errorf("stage %v is not an op's stage", st)
	}
	if err != nil {
		return err
	}
	if st == StageAppend || st == StageAppendRecovery || st == StageStreamingRecovery {
		op.b.GenStamp = req.GetLatestGenerationStamp()
	}
	if h := op.s.cfg.Hooks.Receiving; h != nil {
		h(op.b.BlockID())
	}
	return nil
}

// maxRecoveryStamps bounds the stamps openForRecovery tries.
const maxRecoveryStamps = 64

// openForRecovery reopens the replica of a pipeline recovery under latest.
// As HDFS's recoverRbw, it accepts a replica whose stamp lies between the
// op's block stamp and latest: a recovery whose pipeline setup failed
// downstream has already moved this DataNode's replica to the stamp of
// that attempt, and the client's next attempt names the stamp it knew.
func openForRecovery(ctx context.Context, store blocks.Store, id blocks.ID, latest uint64) (blocks.Writer, error) {
	w, err := store.OpenAppend(ctx, id, latest)
	for gs := id.GenStamp + 1; errors.Is(err, blocks.ErrNotFound) && gs < latest && gs-id.GenStamp <= maxRecoveryStamps; gs++ {
		var err2 error
		w, err2 = store.OpenAppend(ctx, blocks.ID{Block: id.Block, GenStamp: gs}, latest)
		if !errors.Is(err2, blocks.ErrNotFound) {
			err = err2
		}
	}
	return w, err
}

// closeRecovery serves PIPELINE_CLOSE_RECOVERY: finalize the replica under
// the new generation stamp, forward the op, answer.
func (op *writeOpState) closeRecovery() error {
	s := op.s
	n, err := s.cfg.Store.Recover(s.ctx, op.b.BlockID(), op.req.GetLatestGenerationStamp())
	if err != nil {
		s.respond(op.c, errResponse(hadoop.Status_ERROR, "WRITE_BLOCK %s (PIPELINE_CLOSE_RECOVERY): %v", op.b, err))
		return fmt.Errorf("WRITE_BLOCK %s (PIPELINE_CLOSE_RECOVERY): %w", op.b, err)
	}
	id := blocks.ID{Block: op.b.ID, GenStamp: op.req.GetLatestGenerationStamp()}
	if h := s.cfg.Hooks.Received; h != nil {
		h(blocks.Replica{ID: id, State: blocks.Finalized, Length: n})
	}
	err = op.connectMirror()
	if op.mirror != nil {
		op.mirror.Close()
	}
	return err
}

// connectMirror connects to the first target, sends it the op for the rest
// of the pipeline and, for a client's op, relays its answer upstream.
func (op *writeOpState) connectMirror() error {
	s, req := op.s, op.req
	status, firstBad := hadoop.Status_SUCCESS, ""
	var msg string
	if len(req.Targets) > 0 {
		t := targetOf(req.Targets[0], req.TargetStorageTypes, req.TargetStorageIds, 0)
		op.mirrorAddr = t.Addr
		if err := op.dialMirror(t); err != nil {
			if op.mirror != nil {
				op.mirror.Close()
				op.mirror = nil
			}
			if op.isClient {
				s.respond(op.c, &hadoop.BlockOpResponseProto{
					Status: hadoop.Status_ERROR.Enum(), FirstBadLink: proto.String(t.Addr),
					Message: proto.String(fmt.Sprintf("WRITE_BLOCK %s: downstream %s: %v", op.b, t.Addr, err)),
				})
				return fmt.Errorf("WRITE_BLOCK %s: downstream %s: %w", op.b, t.Addr, err)
			}
			// A DataNode's transfer goes on without the rest of the pipeline.
			s.log.Info("dataxfer: transfer continues without its downstream", "block", op.b, "downstream", t.Addr, "err", err)
		} else if op.isClient {
			op.mirror.SetReadDeadline(time.Now().Add(s.cfg.Timeout))
			var resp hadoop.BlockOpResponseProto
			if err := ReadDelimited(op.mirrorR, &resp); err != nil {
				status, firstBad = hadoop.Status_ERROR, t.Addr
				msg = fmt.Sprintf("downstream %s: %v", t.Addr, err)
			} else if resp.GetStatus() != hadoop.Status_SUCCESS {
				status, firstBad, msg = resp.GetStatus(), resp.GetFirstBadLink(), resp.GetMessage()
				if firstBad == "" {
					firstBad = t.Addr
				}
			}
		}
	}
	if op.isClient && !op.isTransfer {
		r := &hadoop.BlockOpResponseProto{Status: status.Enum(), FirstBadLink: proto.String(firstBad)}
		if msg != "" {
			r.Message = proto.String(msg)
		}
		if err := s.respond(op.c, r); err != nil {
			return err
		}
	}
	if status != hadoop.Status_SUCCESS {
		return fmt.Errorf("WRITE_BLOCK %s: pipeline setup failed at %s: %v %s", op.b, firstBad, status, msg)
	}
	return nil
}

func (op *writeOpState) dialMirror(t Target) error {
	s, req := op.s, op.req
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	nc, err := s.cfg.Dial(ctx, "tcp", t.Addr)
	if err != nil {
		return err
	}
	op.mirror = nc
	op.mirrorR = bufio.NewReaderSize(nc, 4<<10)
	op.mirrorW = bufio.NewWriterSize(nc, 64<<10)
	down := proto.CloneOf(req)
	down.Targets = req.Targets[1:]
	down.StorageType = t.StorageType.Enum()
	if len(req.TargetStorageTypes) > 0 {
		down.TargetStorageTypes = req.TargetStorageTypes[1:]
	}
	down.StorageId = nil
	if len(req.TargetStorageIds) > 0 {
		down.StorageId = proto.String(req.TargetStorageIds[0])
		down.TargetStorageIds = req.TargetStorageIds[1:]
	}
	nc.SetWriteDeadline(time.Now().Add(s.cfg.Timeout))
	if err := writeOp(op.mirrorW, OpWriteBlock, down); err != nil {
		return err
	}
	return op.mirrorW.Flush()
}

// receive reads packets until the last one, storing and forwarding each;
// the responder acknowledges them upstream.
func (op *writeOpState) receive(sum Checksum) error {
	s, c := op.s, op.c
	withResponder := op.isClient && !op.isTransfer
	var respErr error
	var wg sync.WaitGroup
	if withResponder {
		op.acks = make(chan ackItem, s.cfg.AckWindow)
		wg.Add(1)
		go func() {
			defer wg.Done()
			respErr = op.respondAcks()
			if respErr != nil {
				// Nobody reads the acks: stop the receiver too, and take what
				// it still queues so that it never blocks on a full window.
				c.Close()
				for range op.acks {
				}
			}
		}()
	}
	err := op.receivePackets(sum)
	if withResponder {
		close(op.acks)
		if err != nil && op.mirror != nil {
			op.mirror.Close() // unblocks a responder waiting for a downstream ack
		}
		wg.Wait()
	}
	if err == nil && respErr != nil {
		err = respErr
	}
	if err == nil && op.isTransfer {
		// The transfer's sender waits for this answer (DNTransferAckProto).
		err = s.respond(c, &hadoop.BlockOpResponseProto{Status: hadoop.Status_SUCCESS.Enum()})
	}
	return err
}

func (op *writeOpState) receivePackets(sum Checksum) error {
	s, c := op.s, op.c
	pr := NewPacketReader(c.r, sum)
	pr.Max = s.cfg.MaxPacket
	var fwd []byte
	for {
		c.readDeadline(s.cfg.Timeout)
		p, err := pr.Next()
		if err != nil {
			var ce *ChecksumError
			if errors.As(err, &ce) && op.acks != nil {
				// HDFS answers a corrupt packet with ERROR_CHECKSUM at this
				// DataNode's index and stops.
				op.acks <- ackItem{seqno: p.Seqno, status: hadoop.Status_ERROR_CHECKSUM}
			}
			return fmt.Errorf("WRITE_BLOCK %s: packet: %w", op.b, err)
		}
		if p.Last && p.DataLen != 0 {
			return fmt.Errorf("WRITE_BLOCK %s: %w", op.b, protoErr("last packet %d carries %d bytes", p.Seqno, p.DataLen))
		}
		if op.mirror != nil && !op.mirrorErr.Load() {
			// Relayed as received, without a copy of the packet.
			fwd = appendPacketHead(fwd[:0], p.PacketHeader, len(p.Sums), len(p.Data))
			op.mirror.SetWriteDeadline(time.Now().Add(s.cfg.Timeout))
			_, err := op.mirrorW.Write(fwd)
			if err == nil {
				_, err = op.mirrorW.Write(p.Sums)
			}
			if err == nil {
				_, err = op.mirrorW.Write(p.Data)
			}
			if err == nil {
				err = op.mirrorW.Flush()
			}
			if err != nil {
				op.mirrorErr.Store(true)
				s.log.Info("dataxfer: downstream failed; storing here only", "block", op.b, "downstream", op.mirrorAddr, "err", err)
			}
		}
		if p.Seqno != HeartbeatSeqno {
			s.met.bytesIn.Add(float64(len(p.Data)))
			if err := op.store(p); err != nil {
				return err
			}
		}
		if op.acks != nil {
			op.acks <- ackItem{seqno: p.Seqno, last: p.Last, status: hadoop.Status_SUCCESS}
		}
		if p.Last {
			return nil
		}
	}
}

// store writes a packet's bytes the replica does not have yet. A packet may
// start before the replica's end: a client resends the partial last chunk
// after an hflush, and the unacknowledged packets after a recovery; those
// bytes are the ones already stored.
func (op *writeOpState) store(p Packet) error {
	ctx := op.s.ctx
	have := op.w.Len()
	if p.Offset > have {
		return fmt.Errorf("WRITE_BLOCK %s: %w", op.b, protoErr("packet %d at offset %d, the replica has %d bytes", p.Seqno, p.Offset, have))
	}
	if skip := have - p.Offset; skip < int64(len(p.Data)) {
		if _, err := op.w.Write(p.Data[skip:]); err != nil {
			return fmt.Errorf("WRITE_BLOCK %s: %w", op.b, err)
		}
	}
	// A TRANSFER_RBW replica stays being written; its bytes are synced
	// before the sender is told it has them.
	if p.Sync || (p.Last && op.req.GetStage() == StageTransferRBW) {
		if err := op.w.Sync(ctx); err != nil {
			return fmt.Errorf("WRITE_BLOCK %s: sync: %w", op.b, err)
		}
	}
	if p.Last && op.req.GetStage() != StageTransferRBW {
		n, err := op.w.Finalize(ctx)
		if err != nil {
			return fmt.Errorf("WRITE_BLOCK %s: finalize: %w", op.b, err)
		}
		op.w = nil
		if h := op.s.cfg.Hooks.Received; h != nil && !op.replacing {
			h(blocks.Replica{ID: op.b.BlockID(), State: blocks.Finalized, Length: n})
		}
	}
	return nil
}

// respondAcks is HDFS's PacketResponder: for each stored packet, in order,
// the downstream's ack (if there is a downstream and it has not failed),
// then this DataNode's status prepended, sent upstream. A downstream that
// fails is reported as ERROR at its index, after this DataNode's SUCCESS.
func (op *writeOpState) respondAcks() error {
	s, c := op.s, op.c
	for it := range op.acks {
		statuses := []hadoop.Status{it.status}
		if op.mirror != nil && !op.mirrorErr.Load() && it.status == hadoop.Status_SUCCESS {
			op.mirror.SetReadDeadline(time.Now().Add(s.cfg.Timeout))
			a, err := ReadAck(op.mirrorR)
			switch {
			case err != nil:
				op.mirrorErr.Store(true)
				s.log.Info("dataxfer: no ack from downstream", "block", op.b, "downstream", op.mirrorAddr, "err", err)
			case a.Seqno != it.seqno:
				return fmt.Errorf("WRITE_BLOCK %s: downstream %s acked seqno %d, expected %d", op.b, op.mirrorAddr, a.Seqno, it.seqno)
			default:
				statuses = append(statuses, a.Status...)
			}
		}
		if op.mirror != nil && op.mirrorErr.Load() && it.status == hadoop.Status_SUCCESS {
			statuses = append(statuses, hadoop.Status_ERROR)
		}
		c.writeDeadline(s.cfg.Timeout)
		if err := writeAck(c.w, Ack{Seqno: it.seqno, Status: statuses}); err != nil {
			return err
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		if it.status != hadoop.Status_SUCCESS {
			return fmt.Errorf("WRITE_BLOCK %s: packet %d: %v", op.b, it.seqno, it.status)
		}
		if it.last {
			return nil
		}
	}
	return nil
}

// finish closes the mirror and the writer: a replica whose op failed keeps
// what it stored (synced, so that the acknowledged bytes are durable and a
// recovery finds them), except one this op created for a transfer, which
// is dropped.
func (op *writeOpState) finish(ok bool) {
	if op.mirror != nil {
		op.mirror.Close()
	}
	if op.w == nil {
		return
	}
	if !ok && op.created && (op.isTransfer || !op.isClient || op.replacing) {
		op.w.Abort()
		if h := op.s.cfg.Hooks.Deleted; h != nil {
			h(op.b.BlockID())
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), op.s.cfg.Timeout)
	defer cancel()
	op.w.Sync(ctx)
	op.w.Close()
}
