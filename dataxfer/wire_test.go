package dataxfer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// TestPacketHeaderBytes pins the packet framing to Hadoop's: an ordinary
// header is 25 bytes (four fixed-width fields), the sync flag adds 2 and
// is only sent when set; the payload length counts itself, the checksums
// and the data.
func TestPacketHeaderBytes(t *testing.T) {
	b := AppendPacket(nil, PacketHeader{Offset: 512, Seqno: 3}, make([]byte, 1000), true)
	if got := binary.BigEndian.Uint32(b); got != 4+2*4+1000 {
		t.Fatalf("payload length %d", got)
	}
	if got := binary.BigEndian.Uint16(b[4:]); got != 25 {
		t.Fatalf("header length %d, want 25", got)
	}
	want := []byte{0x09, 0, 2, 0, 0, 0, 0, 0, 0, 0x11, 3, 0, 0, 0, 0, 0, 0, 0, 0x18, 0, 0x25, 0xe8, 3, 0, 0}
	if !bytes.Equal(b[6:31], want) {
		t.Fatalf("header % x, want % x", b[6:31], want)
	}
	s := AppendPacket(nil, PacketHeader{Sync: true, Last: true}, nil, true)
	if got := binary.BigEndian.Uint16(s[4:]); got != 27 || len(s) != 6+27 {
		t.Fatalf("sync header length %d, packet %d bytes", got, len(s))
	}
	if packetMaxHeader != 6+proto.Size(&hadoop.PacketHeaderProto{OffsetInBlock: proto.Int64(0), Seqno: proto.Int64(0), LastPacketInBlock: proto.Bool(false), DataLen: proto.Int32(0), SyncBlock: proto.Bool(false)}) {
		t.Fatal("packetMaxHeader is not HDFS's PKT_MAX_HEADER_LEN")
	}
}

func TestPacketRoundTrip(t *testing.T) {
	var buf []byte
	datas := [][]byte{nil, randBytes(1, 1), randBytes(2, 512), randBytes(3, 513), randBytes(4, 64512)}
	for i, d := range datas {
		buf = AppendPacket(buf, PacketHeader{Offset: int64(i * 1000), Seqno: int64(i), Sync: i == 2}, d, true)
	}
	pr := NewPacketReader(bufio.NewReader(bytes.NewReader(buf)), CRC32C)
	for i, d := range datas {
		p, err := pr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p.Seqno != int64(i) || p.Offset != int64(i*1000) || !bytes.Equal(p.Data, d) || p.Sync != (i == 2) {
			t.Fatalf("packet %d: %+v", i, p.PacketHeader)
		}
	}
	if _, err := pr.Next(); err != io.EOF {
		t.Fatalf("after the last packet: %v", err)
	}
}

// TestPacketLies: bounds and consistency are checked before allocation
// and before any data is trusted.
func TestPacketLies(t *testing.T) {
	good := AppendPacket(nil, PacketHeader{Seqno: 1}, randBytes(5, 1500), true)
	cases := map[string]func([]byte) []byte{
		"payload too large": func(b []byte) []byte { binary.BigEndian.PutUint32(b, 1<<30); return b },
		"payload negative":  func(b []byte) []byte { binary.BigEndian.PutUint32(b, 0xffffff00); return b },
		"header too long":   func(b []byte) []byte { binary.BigEndian.PutUint16(b[4:], 5000); return b },
		"short":             func(b []byte) []byte { return b[:len(b)-10] },
		"flipped data bit":  func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"flipped checksum":  func(b []byte) []byte { b[6+25] ^= 1; return b },
		"data longer than payload": func(b []byte) []byte {
			b[6+25-4] = 0xff // dataLen's low byte
			return b
		},
	}
	for name, mut := range cases {
		b := mut(append([]byte(nil), good...))
		_, err := NewPacketReader(bufio.NewReader(bytes.NewReader(b)), CRC32C).Next()
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if name == "flipped data bit" && !errors.Is(err, ErrChecksum) {
			t.Errorf("%s: %v, want ErrChecksum", name, err)
		}
	}
}

func TestAckRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	a := Ack{Seqno: 9, Status: []hadoop.Status{hadoop.Status_SUCCESS, hadoop.Status_ERROR, hadoop.Status_ERROR_CHECKSUM}}
	if err := writeAck(&buf, a); err != nil {
		t.Fatal(err)
	}
	// An ack without flags (HDFS 2) takes its statuses from the replies.
	writeDelimited(&buf, &hadoop.PipelineAckProto{Seqno: proto.Int64(10), Reply: []hadoop.Status{hadoop.Status_SUCCESS}})
	r := bufio.NewReader(&buf)
	got, err := ReadAck(r)
	if err != nil || got.Seqno != 9 || len(got.Status) != 3 || got.Status[2] != hadoop.Status_ERROR_CHECKSUM {
		t.Fatalf("ack %+v %v", got, err)
	}
	got, err = ReadAck(r)
	if err != nil || got.Seqno != 10 || len(got.Status) != 1 || !got.ok() {
		t.Fatalf("ack %+v %v", got, err)
	}
}

// FuzzPacket: the packet decoder never panics, never allocates beyond the
// bytes it was given (plus its step), and what it accepts re-encodes to
// the same bytes.
func FuzzPacket(f *testing.F) {
	f.Add(AppendPacket(nil, PacketHeader{Seqno: 0, Offset: 0}, randBytes(1, 700), true))
	f.Add(AppendPacket(nil, PacketHeader{Seqno: 5, Offset: 1024, Last: true, Sync: true}, nil, true))
	f.Add(AppendPacket(nil, PacketHeader{Seqno: -1}, nil, true))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 25})
	f.Fuzz(func(t *testing.T, b []byte) {
		pr := NewPacketReader(bufio.NewReader(bytes.NewReader(b)), CRC32C)
		p, err := pr.Next()
		if cap(pr.buf) > len(b)+growStep {
			t.Fatalf("buffer of %d bytes for %d input bytes", cap(pr.buf), len(b))
		}
		if err != nil {
			return
		}
		re := AppendPacket(nil, p.PacketHeader, p.Data, true)
		if len(re) > len(b) {
			t.Fatalf("accepted packet re-encodes to %d bytes from %d", len(re), len(b))
		}
	})
}

// FuzzOpRequest: an op header and its message, as the server reads them.
func FuzzOpRequest(f *testing.F) {
	c := &Client{Name: "DFSClient_fuzz"}
	b := Block{Pool: testPool, ID: 1, GenStamp: 2}
	var buf bytes.Buffer
	writeOp(&buf, OpReadBlock, &hadoop.OpReadBlockProto{Header: c.header(b, blocktoken.Token{}), Offset: proto.Uint64(0), Len: proto.Uint64(10)})
	f.Add(buf.Bytes())
	buf.Reset()
	writeOp(&buf, OpWriteBlock, &hadoop.OpWriteBlockProto{
		Header: c.header(b, blocktoken.Token{}), Targets: []*hadoop.DatanodeInfoProto{Target{Addr: "127.0.0.1:9866"}.proto()},
		Stage: StageCreate.Enum(), PipelineSize: proto.Uint32(2), MinBytesRcvd: proto.Uint64(0), MaxBytesRcvd: proto.Uint64(0),
		LatestGenerationStamp: proto.Uint64(2), RequestedChecksum: CRC32C.proto(),
	})
	f.Add(buf.Bytes())
	buf.Reset()
	writeOp(&buf, OpBlockChecksum, &hadoop.OpBlockChecksumProto{Header: &hadoop.BaseHeaderProto{Block: b.proto(), Token: tokenFor(nil)}})
	f.Add(buf.Bytes())
	f.Add([]byte{0, 28, 80, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		op, err := ReadOpHeader(r)
		if err != nil {
			return
		}
		var m proto.Message
		switch op {
		case OpReadBlock:
			m = &hadoop.OpReadBlockProto{}
		case OpWriteBlock:
			m = &hadoop.OpWriteBlockProto{}
		case OpBlockChecksum:
			m = &hadoop.OpBlockChecksumProto{}
		case OpTransferBlock:
			m = &hadoop.OpTransferBlockProto{}
		case OpCopyBlock:
			m = &hadoop.OpCopyBlockProto{}
		case OpReplaceBlock:
			m = &hadoop.OpReplaceBlockProto{}
		default:
			return
		}
		if err := ReadDelimited(r, m); err != nil {
			return
		}
		if rp, ok := m.(*hadoop.OpReplaceBlockProto); ok {
			targetOf(rp.GetSource(), nil, nil, 0)
		}
		if w, ok := m.(*hadoop.OpWriteBlockProto); ok {
			for i, tp := range w.Targets {
				targetOf(tp, w.TargetStorageTypes, w.TargetStorageIds, i)
			}
			checksumOf(w.GetRequestedChecksum())
		}
	})
}

// FuzzAck: the ack decoder of both the client and a DataNode reading its
// downstream.
func FuzzAck(f *testing.F) {
	var buf bytes.Buffer
	writeAck(&buf, Ack{Seqno: 3, Status: []hadoop.Status{0, 0, 1}})
	f.Add(buf.Bytes())
	buf.Reset()
	writeDelimited(&buf, &hadoop.PipelineAckProto{Seqno: proto.Int64(-2), Reply: []hadoop.Status{8}})
	f.Add(buf.Bytes())
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ReadAck(bufio.NewReader(bytes.NewReader(in)))
		if err != nil {
			return
		}
		// What was accepted is sent on upstream by a DataNode: it must
		// encode, and decode to the same statuses (4-bit flags).
		var out bytes.Buffer
		if err := writeAck(&out, a); err != nil {
			t.Fatal(err)
		}
		b, err := ReadAck(bufio.NewReader(&out))
		if err != nil || b.Seqno != a.Seqno || len(b.Status) != len(a.Status) {
			t.Fatalf("re-read ack %+v: %+v %v", a, b, err)
		}
	})
}

func tokenFor(b []byte) *hadoop.TokenProto {
	return &hadoop.TokenProto{Identifier: b, Password: []byte{}, Kind: proto.String(""), Service: proto.String("")}
}
