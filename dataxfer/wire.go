package dataxfer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
)

// Version is the DataTransferProtocol version every op request starts with
// (HDFS's DataTransferProtocol.DATA_TRANSFER_VERSION).
const Version = 28

// Op is an op code of the DataTransferProtocol (HDFS's Op enum).
type Op byte

// The op codes. Only the ones the server serves and the client sends have
// behaviour here; the others are answered ERROR_UNSUPPORTED.
const (
	OpWriteBlock         Op = 80
	OpReadBlock          Op = 81
	OpReadMetadata       Op = 82
	OpReplaceBlock       Op = 83
	OpCopyBlock          Op = 84
	OpBlockChecksum      Op = 85
	OpTransferBlock      Op = 86
	OpRequestShortCircFd Op = 87
	OpReleaseShortCircFd Op = 88
	OpRequestShortCircSh Op = 89
	OpBlockGroupChecksum Op = 90
	OpCustom             Op = 127
)

func (o Op) String() string {
	switch o {
	case OpWriteBlock:
		return "WRITE_BLOCK"
	case OpReadBlock:
		return "READ_BLOCK"
	case OpReadMetadata:
		return "READ_METADATA"
	case OpReplaceBlock:
		return "REPLACE_BLOCK"
	case OpCopyBlock:
		return "COPY_BLOCK"
	case OpBlockChecksum:
		return "BLOCK_CHECKSUM"
	case OpTransferBlock:
		return "TRANSFER_BLOCK"
	case OpBlockGroupChecksum:
		return "BLOCK_GROUP_CHECKSUM"
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

// Wire limits. A peer that announces more is refused before anything of
// that size is allocated.
const (
	// MaxOpSize bounds a varint-delimited message (op request, response,
	// ack). HDFS's largest, a WRITE_BLOCK with its targets and token, is a
	// few hundred bytes.
	MaxOpSize = 64 << 10
	// MaxPacketSize bounds a packet's payload (HDFS's PacketReceiver
	// MAX_PACKET_SIZE, 16 MiB).
	MaxPacketSize = 16 << 20
	// maxHeaderLen bounds a packet header proto; HDFS's largest is 27 bytes
	// (PacketHeader.MAX_PROTO_SIZE), some slack for unknown fields.
	maxHeaderLen = 1024
	// packetMaxHeader is HDFS's PKT_MAX_HEADER_LEN: the two length fields and
	// the largest header proto; the client sizes packets with it as
	// DFSOutputStream does.
	packetMaxHeader = 6 + 27
	// HeartbeatSeqno is the seqno of a client's keep-alive packet
	// (DFSPacket.HEART_BEAT_SEQNO): no data, acknowledged but not stored.
	HeartbeatSeqno = -1
	// unknownSeqno is PipelineAck.UNKOWN_SEQNO: the seqno of an ack sent
	// when a DataNode lost its downstream and does not know which packet.
	unknownSeqno = -2
	crcSize      = 4
)

// ErrProtocol is wrapped by errors about bytes that do not follow the
// protocol: bad version, lengths out of bounds, undecodable messages,
// checksum mismatches of a packet, packets out of order.
var ErrProtocol = errors.New("dataxfer: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// writeOp writes an op request: the version, the op code and the message,
// varint-delimited (HDFS's Sender.send).
func writeOp(w io.Writer, op Op, m proto.Message) error {
	b := make([]byte, 3, 3+binary.MaxVarintLen64+proto.Size(m))
	binary.BigEndian.PutUint16(b, Version)
	b[2] = byte(op)
	b, err := appendDelimited(b, m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// ReadOpHeader reads an op request's version and op code.
func ReadOpHeader(r io.Reader) (Op, error) {
	var h [3]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	if v := binary.BigEndian.Uint16(h[:2]); v != Version {
		return 0, protoErr("version %d, want %d", v, Version)
	}
	return Op(h[2]), nil
}

func appendDelimited(b []byte, m proto.Message) ([]byte, error) {
	b = protowire.AppendVarint(b, uint64(proto.Size(m)))
	return proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, m)
}

// writeDelimited writes m prefixed by its varint length (Java's
// writeDelimitedTo).
func writeDelimited(w io.Writer, m proto.Message) error {
	b, err := appendDelimited(make([]byte, 0, 16+proto.Size(m)), m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// ReadDelimited reads a varint-length-prefixed message of at most MaxOpSize
// bytes into m (Java's parseDelimitedFrom / vintPrefixed). Required fields
// are checked, as Java does.
func ReadDelimited(r io.ByteReader, m proto.Message) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if n > MaxOpSize {
		return protoErr("message of %d bytes (limit %d)", n, MaxOpSize)
	}
	b := make([]byte, n)
	if rr, ok := r.(io.Reader); ok {
		if _, err := io.ReadFull(rr, b); err != nil {
			return err
		}
	} else {
		for i := range b {
			if b[i], err = r.ReadByte(); err != nil {
				return err
			}
		}
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return protoErr("%T: %v", m, err)
	}
	return nil
}

// PacketHeader is a packet's PacketHeaderProto.
type PacketHeader struct {
	Offset  int64 // offset in the block of the packet's first data byte
	Seqno   int64
	Last    bool // lastPacketInBlock: the empty packet that ends a block
	DataLen int32
	Sync    bool // syncBlock: make the data durable before acknowledging
}

// Packet is one decoded packet. Data aliases the reader's buffer until the
// next ReadPacket.
type Packet struct {
	PacketHeader
	Sums []byte // CRC32C of each 512-byte chunk of Data, big-endian; empty if the stream carries no checksums
	Data []byte
}

// chunks is the number of 512-byte checksum chunks of n bytes.
func chunks(n int) int { return (n + blocks.ChunkSize - 1) / blocks.ChunkSize }

// AppendPacket appends a packet to b: payload length (4 + checksums +
// data), header length, header, the CRC32C of each 512-byte chunk of data
// (when withSums) and data.
func AppendPacket(b []byte, h PacketHeader, data []byte, withSums bool) []byte {
	var sums []byte
	if withSums {
		sums = make([]byte, 0, chunks(len(data))*crcSize)
		for off := 0; off < len(data); off += blocks.ChunkSize {
			c := data[off:min(off+blocks.ChunkSize, len(data))]
			sums = binary.BigEndian.AppendUint32(sums, crc32.Checksum(c, blocks.Castagnoli))
		}
	}
	return appendPacketSums(b, h, sums, data)
}

// appendPacketSums appends a packet whose checksums are given (a packet
// relayed down a pipeline as received).
func appendPacketSums(b []byte, h PacketHeader, sums, data []byte) []byte {
	b = appendPacketHead(b, h, len(sums), len(data))
	b = append(b, sums...)
	return append(b, data...)
}

// appendPacketHead appends a packet's lengths and header, for sums and
// data bytes that follow.
func appendPacketHead(b []byte, h PacketHeader, sums, data int) []byte {
	hp := &hadoop.PacketHeaderProto{
		OffsetInBlock:     proto.Int64(h.Offset),
		Seqno:             proto.Int64(h.Seqno),
		LastPacketInBlock: proto.Bool(h.Last),
		DataLen:           proto.Int32(int32(data)),
	}
	if h.Sync {
		// Set only when true, as HDFS does: the header of an ordinary
		// packet stays 25 bytes.
		hp.SyncBlock = proto.Bool(true)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(4+sums+data))
	b = binary.BigEndian.AppendUint16(b, uint16(proto.Size(hp)))
	b, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, hp)
	return b
}

// Checksum is how a stream's packets are checksummed (ChecksumProto): a CRC
// per BytesPerChecksum bytes of data, CRC32C (the HDFS default) or CRC32;
// a nil Table means no checksums (CHECKSUM_NULL, or a READ_BLOCK with
// sendChecksums false).
type Checksum struct {
	Table            *crc32.Table
	BytesPerChecksum int
}

// CRC32C is the checksum Nimbus sends and stores: CRC32C per 512 bytes.
var CRC32C = Checksum{Table: blocks.Castagnoli, BytesPerChecksum: blocks.ChunkSize}

var ieee = crc32.MakeTable(crc32.IEEE)

// checksumOf maps a ChecksumProto to a Checksum.
func checksumOf(p *hadoop.ChecksumProto) (Checksum, error) {
	n := int(p.GetBytesPerChecksum())
	switch p.GetType() {
	case hadoop.ChecksumTypeProto_CHECKSUM_NULL:
		return Checksum{BytesPerChecksum: max(n, 1)}, nil
	case hadoop.ChecksumTypeProto_CHECKSUM_CRC32C, hadoop.ChecksumTypeProto_CHECKSUM_CRC32:
		if n <= 0 || n > 1<<20 {
			return Checksum{}, protoErr("bytesPerChecksum %d", n)
		}
		t := blocks.Castagnoli
		if p.GetType() == hadoop.ChecksumTypeProto_CHECKSUM_CRC32 {
			t = ieee
		}
		return Checksum{Table: t, BytesPerChecksum: n}, nil
	}
	return Checksum{}, protoErr("checksum type %v", p.GetType())
}

func (c Checksum) proto() *hadoop.ChecksumProto {
	t := hadoop.ChecksumTypeProto_CHECKSUM_CRC32C
	switch c.Table {
	case nil:
		t = hadoop.ChecksumTypeProto_CHECKSUM_NULL
	case ieee:
		t = hadoop.ChecksumTypeProto_CHECKSUM_CRC32
	}
	return &hadoop.ChecksumProto{Type: t.Enum(), BytesPerChecksum: proto.Uint32(uint32(c.BytesPerChecksum))}
}

// sumLen is the number of checksum bytes for n data bytes.
func (c Checksum) sumLen(n int) int {
	if c.Table == nil {
		return 0
	}
	return (n + c.BytesPerChecksum - 1) / c.BytesPerChecksum * crcSize
}

// PacketReader decodes packets from a stream. Its buffer grows with the
// bytes that actually arrive, up to MaxPacketSize: a peer that announces a
// large packet and sends nothing costs no memory.
type PacketReader struct {
	r   *bufio.Reader
	buf []byte
	sum Checksum
	// Max bounds a packet's payload; NewPacketReader sets MaxPacketSize.
	Max int
}

// NewPacketReader reads packets checksummed with sum from r.
func NewPacketReader(r *bufio.Reader, sum Checksum) *PacketReader {
	return &PacketReader{r: r, sum: sum, Max: MaxPacketSize}
}

const growStep = 64 << 10

// Next reads one packet and checks its framing: lengths within bounds, the
// checksum count matching the data length, and every chunk's CRC32C (a
// mismatch is an error wrapping ErrChecksum naming the packet's offset of
// the bad chunk).
func (pr *PacketReader) Next() (Packet, error) {
	var lens [6]byte
	if _, err := io.ReadFull(pr.r, lens[:]); err != nil {
		return Packet{}, err
	}
	payload := int64(int32(binary.BigEndian.Uint32(lens[:4])))
	hlen := int(int16(binary.BigEndian.Uint16(lens[4:])))
	if payload < 4 || payload > int64(pr.Max) {
		return Packet{}, protoErr("packet payload length %d outside [4, %d]", payload, pr.Max)
	}
	if hlen < 0 || hlen > maxHeaderLen {
		return Packet{}, protoErr("packet header length %d outside [0, %d]", hlen, maxHeaderLen)
	}
	body := int(payload) - 4
	if err := pr.fill(hlen + body); err != nil {
		return Packet{}, err
	}
	var hp hadoop.PacketHeaderProto
	if err := proto.Unmarshal(pr.buf[:hlen], &hp); err != nil {
		return Packet{}, protoErr("packet header: %v", err)
	}
	p := Packet{PacketHeader: PacketHeader{
		Offset: hp.GetOffsetInBlock(), Seqno: hp.GetSeqno(), Last: hp.GetLastPacketInBlock(),
		DataLen: hp.GetDataLen(), Sync: hp.GetSyncBlock(),
	}}
	if p.DataLen < 0 || int(p.DataLen) > body {
		return Packet{}, protoErr("packet %d: data length %d, payload %d", p.Seqno, p.DataLen, body)
	}
	if p.Offset < 0 {
		return Packet{}, protoErr("packet %d: offset %d", p.Seqno, p.Offset)
	}
	sums := body - int(p.DataLen)
	want := pr.sum.sumLen(int(p.DataLen))
	if sums != want {
		return Packet{}, protoErr("packet %d: %d checksum bytes for %d data bytes, want %d", p.Seqno, sums, p.DataLen, want)
	}
	p.Sums = pr.buf[hlen : hlen+sums]
	p.Data = pr.buf[hlen+sums : hlen+body]
	if pr.sum.Table != nil {
		if off, ok := pr.sum.verify(p.Sums, p.Data); !ok {
			return p, &ChecksumError{Offset: p.Offset + int64(off)}
		}
	}
	return p, nil
}

// fill reads n bytes into pr.buf, growing it as the bytes arrive.
func (pr *PacketReader) fill(n int) error {
	pr.buf = pr.buf[:0]
	for len(pr.buf) < n {
		step := min(n-len(pr.buf), growStep)
		if cap(pr.buf)-len(pr.buf) < step {
			nb := make([]byte, len(pr.buf), max(len(pr.buf)+step, min(2*cap(pr.buf), n)))
			copy(nb, pr.buf)
			pr.buf = nb
		}
		k := len(pr.buf)
		if _, err := io.ReadFull(pr.r, pr.buf[k:k+step]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		pr.buf = pr.buf[:k+step]
	}
	return nil
}

// verify checks data against its chunk CRCs; on a mismatch it returns
// the offset in data of the bad chunk.
func (c Checksum) verify(sums, data []byte) (int, bool) {
	n := c.BytesPerChecksum
	for i, off := 0, 0; off < len(data); i, off = i+1, off+n {
		d := data[off:min(off+n, len(data))]
		if crc32.Checksum(d, c.Table) != binary.BigEndian.Uint32(sums[i*crcSize:]) {
			return off, false
		}
	}
	return 0, true
}

// ErrChecksum is wrapped by a *ChecksumError.
var ErrChecksum = errors.New("dataxfer: checksum mismatch")

// ChecksumError is a chunk whose bytes do not match the CRC32C sent with
// them. Offset is the offset in the block of the chunk.
type ChecksumError struct {
	Offset int64
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("dataxfer: checksum mismatch in chunk at offset %d", e.Offset)
}

func (e *ChecksumError) Unwrap() error { return ErrChecksum }

// Ack is a PipelineAckProto: the seqno it acknowledges and one status per
// DataNode from the one that sends it to the end of the pipeline.
type Ack struct {
	Seqno  int64
	Status []hadoop.Status
}

// ok reports whether every DataNode succeeded.
func (a Ack) ok() bool {
	for _, s := range a.Status {
		if s != hadoop.Status_SUCCESS {
			return false
		}
	}
	return true
}

// writeAck writes an ack with both the reply statuses and the flags
// (status in the low 4 bits, ECN and SLOW bits zero), as HDFS 3 does.
func writeAck(w io.Writer, a Ack) error {
	m := &hadoop.PipelineAckProto{Seqno: proto.Int64(a.Seqno), Reply: a.Status, DownstreamAckTimeNanos: proto.Uint64(0)}
	m.Flag = make([]uint32, len(a.Status))
	for i, s := range a.Status {
		m.Flag[i] = uint32(s) & 0xf
	}
	return writeDelimited(w, m)
}

// ReadAck reads one PipelineAckProto. The status of each DataNode is taken
// from its flag when flags are present (HDFS's getHeaderFlag), else from the
// reply list.
func ReadAck(r io.ByteReader) (Ack, error) {
	var m hadoop.PipelineAckProto
	if err := ReadDelimited(r, &m); err != nil {
		return Ack{}, err
	}
	a := Ack{Seqno: m.GetSeqno()}
	if len(m.Flag) > 0 {
		if len(m.Flag) != len(m.Reply) && len(m.Reply) > 0 {
			return Ack{}, protoErr("ack %d: %d flags, %d replies", a.Seqno, len(m.Flag), len(m.Reply))
		}
		a.Status = make([]hadoop.Status, len(m.Flag))
		for i, f := range m.Flag {
			a.Status[i] = hadoop.Status(f & 0xf)
		}
	} else {
		a.Status = m.Reply
	}
	return a, nil
}
