package dataxfer

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// readPacketData is the data carried by one packet of a read: 128 chunks,
// 64 KiB (HDFS's BlockSender with transferTo).
const readPacketData = 128 * blocks.ChunkSize

// readBlock serves READ_BLOCK as HDFS's BlockSender: a response with the
// checksum and the chunk-aligned start, packets of verified data with
// their CRC32C, an empty last packet, then the client's read status.
func (s *Server) readBlock(c *conn, req *hadoop.OpReadBlockProto) (bool, error) {
	hdr := req.GetHeader().GetBaseHeader()
	b := blockOf(hdr.GetBlock())
	if err := s.checkToken(c, OpReadBlock, b, hdr.GetToken(), blocktoken.Read); err != nil {
		return false, err
	}
	ctx := s.ctx
	id := b.BlockID()
	rep, err := s.cfg.Store.Stat(ctx, id)
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "READ_BLOCK %s: %v", b, err))
		return false, fmt.Errorf("READ_BLOCK %s: %w", b, err)
	}
	offset, length := int64(req.GetOffset()), int64(req.GetLen())
	if offset < 0 || length < 0 || offset > rep.Length || length > rep.Length-offset {
		s.respond(c, errResponse(hadoop.Status_ERROR, "READ_BLOCK %s: offset %d and length %d do not fit the replica's %d bytes", b, offset, length, rep.Length))
		return false, fmt.Errorf("READ_BLOCK %s: range %d+%d outside %d bytes", b, offset, length, rep.Length)
	}
	start := offset - offset%blocks.ChunkSize
	end := offset + length
	if r := end % blocks.ChunkSize; r != 0 {
		end = min(end+blocks.ChunkSize-r, rep.Length)
	}
	sendSums := req.SendChecksums == nil || req.GetSendChecksums()
	var rd io.ReadCloser
	if end > start {
		rd, err = s.cfg.Store.Read(ctx, id, start, end-start)
		if err != nil {
			s.respond(c, errResponse(hadoop.Status_ERROR, "READ_BLOCK %s: %v", b, err))
			return false, fmt.Errorf("READ_BLOCK %s: %w", b, err)
		}
		defer rd.Close()
	}
	sum := CRC32C
	if !sendSums {
		sum.Table = nil
	}
	if err := s.respond(c, &hadoop.BlockOpResponseProto{
		Status: hadoop.Status_SUCCESS.Enum(),
		ReadOpChecksumInfo: &hadoop.ReadOpChecksumInfoProto{
			Checksum:    CRC32C.proto(),
			ChunkOffset: proto.Uint64(uint64(start)),
		},
	}); err != nil {
		return false, err
	}
	if err := s.sendPackets(c, rd, b, start, end, sendSums); err != nil {
		return false, err
	}
	// The client says whether it verified everything (HDFS reads it when
	// the whole range was sent); a client that just closes is not an error.
	c.readDeadline(s.cfg.Timeout)
	var st hadoop.ClientReadStatusProto
	if err := ReadDelimited(c.r, &st); err != nil {
		return false, nil
	}
	if st.GetStatus() == hadoop.Status_ERROR_CHECKSUM {
		s.log.Warn("dataxfer: client reports a checksum error reading", "block", b, "remote", c.RemoteAddr())
	}
	return true, nil
}

// sendPackets streams [start, end) of a replica from rd as packets, then the
// empty last packet. A chunk of the replica that fails its stored
// checksum ends the stream without its bytes: the Corrupt hook is told,
// the reader gets the good bytes before it and then, in place of the
// chunk, one that fails its checksum (sendCorrupt), and the connection is
// closed.
func (s *Server) sendPackets(c *conn, rd io.Reader, b Block, start, end int64, sums bool) error {
	buf := make([]byte, readPacketData)
	pkt := make([]byte, 0, readPacketData+readPacketData/blocks.ChunkSize*crcSize+64)
	var seq int64
	for off := start; off < end; seq++ {
		n := int(min(int64(len(buf)), end-off))
		if k, err := io.ReadFull(rd, buf[:n]); err != nil {
			var ce *blocks.CorruptError
			if errors.As(err, &ce) {
				s.log.Warn("dataxfer: corrupt replica not served", "block", b, "offset", ce.Offset)
				if s.cfg.Hooks.Corrupt != nil {
					s.cfg.Hooks.Corrupt(ce.ID, ce.Offset)
				}
				if sums && ce.Offset >= off && ce.Offset < end {
					s.sendCorrupt(c, buf[:min(int64(k), ce.Offset-off)], off, ce.Offset, end, seq)
				}
			}
			return fmt.Errorf("READ_BLOCK %s at offset %d: %w", b, off, err)
		}
		pkt = AppendPacket(pkt[:0], PacketHeader{Offset: off, Seqno: seq}, buf[:n], sums)
		c.writeDeadline(s.cfg.Timeout)
		if _, err := c.w.Write(pkt); err != nil {
			return err
		}
		off += int64(n)
		s.met.bytesOut.Add(float64(n))
	}
	pkt = AppendPacket(pkt[:0], PacketHeader{Offset: end, Seqno: seq, Last: true}, nil, sums)
	c.writeDeadline(s.cfg.Timeout)
	if _, err := c.w.Write(pkt); err != nil {
		return err
	}
	return c.w.Flush()
}

// blockChecksum serves BLOCK_CHECKSUM: the MD5 of the replica's chunk CRCs
// (HDFS's MD5CRC block checksum). When the op asks for fewer bytes than the
// replica has (a checksum of a file prefix), the CRCs of that prefix are
// computed from a verified read, as HDFS does.
func (s *Server) blockChecksum(c *conn, req *hadoop.OpBlockChecksumProto) error {
	hdr := req.GetHeader()
	b := blockOf(hdr.GetBlock())
	if err := s.checkToken(c, OpBlockChecksum, b, hdr.GetToken(), blocktoken.Read); err != nil {
		return err
	}
	if o := req.GetBlockChecksumOptions(); o != nil && o.GetBlockChecksumType() != hadoop.BlockChecksumTypeProto_MD5CRC {
		return s.respond(c, errResponse(hadoop.Status_ERROR_UNSUPPORTED, "BLOCK_CHECKSUM %s: checksum type %v is not supported (MD5CRC only)", b, o.GetBlockChecksumType()))
	}
	ctx := s.ctx
	id := b.BlockID()
	rep, err := s.cfg.Store.Stat(ctx, id)
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "BLOCK_CHECKSUM %s: %v", b, err))
		return fmt.Errorf("BLOCK_CHECKSUM %s: %w", b, err)
	}
	var bc blocks.BlockChecksum
	if b.NumBytes > 0 && b.NumBytes < rep.Length {
		bc, err = s.prefixChecksum(id, b.NumBytes)
	} else {
		bc, err = s.cfg.Store.Checksum(ctx, id)
	}
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "BLOCK_CHECKSUM %s: %v", b, err))
		return fmt.Errorf("BLOCK_CHECKSUM %s: %w", b, err)
	}
	return s.respond(c, &hadoop.BlockOpResponseProto{
		Status: hadoop.Status_SUCCESS.Enum(),
		ChecksumResponse: &hadoop.OpBlockChecksumResponseProto{
			BytesPerCrc:   proto.Uint32(uint32(bc.BytesPerCRC)),
			CrcPerBlock:   proto.Uint64(uint64(bc.CRCCount)),
			BlockChecksum: bc.MD5[:],
			CrcType:       hadoop.ChecksumTypeProto_CHECKSUM_CRC32C.Enum(),
		},
	})
}

func (s *Server) prefixChecksum(id blocks.ID, n int64) (blocks.BlockChecksum, error) {
	rd, err := s.cfg.Store.Read(s.ctx, id, 0, n)
	if err != nil {
		return blocks.BlockChecksum{}, err
	}
	defer rd.Close()
	h := md5.New()
	buf := make([]byte, blocks.ChunkSize)
	var count int64
	for off := int64(0); off < n; off += blocks.ChunkSize {
		k := int(min(blocks.ChunkSize, n-off))
		if _, err := io.ReadFull(rd, buf[:k]); err != nil {
			return blocks.BlockChecksum{}, err
		}
		h.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(buf[:k], blocks.Castagnoli)))
		count++
	}
	bc := blocks.BlockChecksum{Length: n, BytesPerCRC: blocks.ChunkSize, CRCCount: count}
	copy(bc.MD5[:], h.Sum(nil))
	return bc, nil
}

// transferBlock serves TRANSFER_BLOCK (a client adding a DataNode to its
// pipeline): this DataNode sends its replica of the block, up to the
// block's length in the op, to the targets with stage TRANSFER_RBW or
// TRANSFER_FINALIZED, and answers once the target has it.
func (s *Server) transferBlock(c *conn, req *hadoop.OpTransferBlockProto) error {
	hdr := req.GetHeader().GetBaseHeader()
	b := blockOf(hdr.GetBlock())
	if err := s.checkToken(c, OpTransferBlock, b, hdr.GetToken(), blocktoken.Copy); err != nil {
		return err
	}
	if len(req.Targets) == 0 {
		return s.respond(c, errResponse(hadoop.Status_ERROR_INVALID, "TRANSFER_BLOCK %s: no targets", b))
	}
	targets := make([]Target, len(req.Targets))
	for i, t := range req.Targets {
		targets[i] = targetOf(t, req.TargetStorageTypes, req.TargetStorageIds, i)
	}
	// A client asks for a transfer after its pipeline broke: a write of the
	// block that is still being served here ends first, so that the bytes
	// it stored are synced and readable.
	release := s.claimBlock(c, b.ID, true)
	defer release()
	tok := tokenOf(hdr.GetToken())
	if s.cfg.IssueToken != nil {
		tok = s.cfg.IssueToken(b.Pool, b.ID, blocktoken.Write)
	}
	err := SendReplica(s.ctx, s.cfg.Store, b, tok, req.GetHeader().GetClientName(), targets, SendOptions{Dial: s.cfg.Dial, Timeout: s.cfg.Timeout, Length: b.NumBytes})
	if err != nil {
		s.respond(c, errResponse(hadoop.Status_ERROR, "TRANSFER_BLOCK %s: %v", b, err))
		return err
	}
	return s.respond(c, &hadoop.BlockOpResponseProto{Status: hadoop.Status_SUCCESS.Enum()})
}

// sendCorrupt ends a read that met a corrupt chunk at offset bad: the good
// bytes read before it (from off), then a chunk of zeros whose checksum
// does not match them. A reader that verifies (every DTP client by
// default) fails with a checksum error naming the block and the offset,
// as when an HDFS DataNode sends a corrupt replica's bytes with their
// stored checksums, and goes to another replica; none of the replica's
// corrupt bytes are sent.
func (s *Server) sendCorrupt(c *conn, good []byte, off, bad, end, seq int64) {
	var pkt []byte
	if len(good) > 0 {
		pkt = AppendPacket(pkt, PacketHeader{Offset: off, Seqno: seq}, good, true)
		seq++
	}
	zeros := make([]byte, min(blocks.ChunkSize, end-bad))
	sum := binary.BigEndian.AppendUint32(nil, ^crc32.Checksum(zeros, blocks.Castagnoli))
	pkt = appendPacketSums(pkt, PacketHeader{Offset: bad, Seqno: seq}, sum, zeros)
	c.writeDeadline(s.cfg.Timeout)
	if _, err := c.w.Write(pkt); err == nil {
		c.w.Flush()
	}
}
