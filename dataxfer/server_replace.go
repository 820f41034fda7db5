package dataxfer

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// copyBlock serves COPY_BLOCK, what a balancer's REPLACE_BLOCK target asks
// of the DataNode it copies from: the whole finalized replica as a read
// stream (response with checksum info, packets, empty last packet), with
// no read status after it.
func (s *Server) copyBlock(c *conn, req *hadoop.OpCopyBlockProto) error {
	hdr := req.GetHeader()
	b := blockOf(hdr.GetBlock())
	if err := s.checkToken(c, OpCopyBlock, b, hdr.GetToken(), blocktoken.Copy); err != nil {
		return err
	}
	id := b.BlockID()
	rep, err := s.cfg.Store.Stat(s.ctx, id)
	if err == nil && rep.State != blocks.Finalized {
		err = fmt.Errorf("%w: replica is %v", blocks.ErrBadState, rep.State)
	}
	var rd io.ReadCloser
	if err == nil && rep.Length > 0 {
		rd, err = s.cfg.Store.Read(s.ctx, id, 0, rep.Length)
	}
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "COPY_BLOCK %s: %v", b, err))
		return fmt.Errorf("COPY_BLOCK %s: %w", b, err)
	}
	if rd != nil {
		defer rd.Close()
	}
	if err := s.respond(c, &hadoop.BlockOpResponseProto{
		Status:             hadoop.Status_SUCCESS.Enum(),
		ReadOpChecksumInfo: &hadoop.ReadOpChecksumInfoProto{Checksum: CRC32C.proto(), ChunkOffset: proto.Uint64(0)},
	}); err != nil {
		return err
	}
	return s.sendPackets(c, rd, b, 0, rep.Length, true)
}

// replaceBlock serves REPLACE_BLOCK (the balancer and mover moving a
// replica here): copy the finalized replica from the source DataNode with
// COPY_BLOCK, store it, report it with the delete hint (the DataNode whose
// replica the NameNode then deletes), answer.
func (s *Server) replaceBlock(c *conn, req *hadoop.OpReplaceBlockProto) error {
	hdr := req.GetHeader()
	b := blockOf(hdr.GetBlock())
	if err := s.checkToken(c, OpReplaceBlock, b, hdr.GetToken(), blocktoken.Replace); err != nil {
		return err
	}
	src := targetOf(req.GetSource(), nil, nil, 0)
	err := s.copyFrom(b, hdr.GetToken(), src)
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "REPLACE_BLOCK %s from %s: %v", b, src.Addr, err))
		return fmt.Errorf("REPLACE_BLOCK %s from %s: %w", b, src.Addr, err)
	}
	if h := s.cfg.Hooks.Replaced; h != nil {
		h(b.BlockID(), req.GetDelHint())
	}
	return s.respond(c, &hadoop.BlockOpResponseProto{Status: hadoop.Status_SUCCESS.Enum()})
}

func (s *Server) copyFrom(b Block, tok *hadoop.TokenProto, src Target) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	nc, err := s.cfg.Dial(ctx, "tcp", src.Addr)
	cancel()
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := closeOnDone(s.ctx, nc)
	defer stop()
	pc := &conn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriter(nc)}
	pc.writeDeadline(s.cfg.Timeout)
	if err := writeOp(pc.w, OpCopyBlock, &hadoop.OpCopyBlockProto{Header: &hadoop.BaseHeaderProto{Block: b.proto(), Token: tok}}); err != nil {
		return err
	}
	if err := pc.w.Flush(); err != nil {
		return err
	}
	pc.readDeadline(s.cfg.Timeout)
	var resp hadoop.BlockOpResponseProto
	if err := ReadDelimited(pc.r, &resp); err != nil {
		return err
	}
	if resp.GetStatus() != hadoop.Status_SUCCESS {
		return &StatusError{Op: OpCopyBlock, Addr: src.Addr, Block: b, Status: resp.GetStatus(), Message: resp.GetMessage()}
	}
	sum, err := checksumOf(resp.GetReadOpChecksumInfo().GetChecksum())
	if err != nil {
		return err
	}
	if resp.GetReadOpChecksumInfo().GetChunkOffset() != 0 {
		return protoErr("COPY_BLOCK answer starts at %d", resp.GetReadOpChecksumInfo().GetChunkOffset())
	}
	w, err := s.cfg.Store.Create(s.ctx, b.BlockID())
	if err != nil {
		return err
	}
	if h := s.cfg.Hooks.Receiving; h != nil {
		h(b.BlockID())
	}
	op := &writeOpState{s: s, c: pc, req: &hadoop.OpWriteBlockProto{Stage: StageCreate.Enum()}, b: b, w: w, created: true, replacing: true}
	ok := false
	defer func() { op.finish(ok) }()
	if err := op.receivePackets(sum); err != nil {
		return err
	}
	ok = true
	return nil
}
