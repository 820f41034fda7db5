package rpc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxFrameSize bounds one frame: large enough for a 1 MiB read result
// or a long listing page, small enough that a bad length prefix cannot make a
// peer allocate much.
const DefaultMaxFrameSize = 4 << 20

// pooledBufCap is the largest buffer returned to the pool; bigger ones (large
// reads and writes) are left to the garbage collector so the pool stays small.
const pooledBufCap = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > pooledBufCap {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

var marshalOpts = proto.MarshalOptions{UseCachedSize: true}

// AppendFrame appends m as one frame (uvarint length, then the message) to buf.
// It fails with ErrFrameTooLarge when the message exceeds max bytes (max <= 0:
// DefaultMaxFrameSize).
func AppendFrame(buf []byte, m proto.Message, max int) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	if vm, ok := m.(vtMessage); ok {
		size := vm.SizeVT()
		if size > max {
			return buf, fmt.Errorf("%w: message of %d bytes, limit %d", ErrFrameTooLarge, size, max)
		}
		buf = binary.AppendUvarint(buf, uint64(size))
		n := len(buf)
		buf = slices.Grow(buf, size)[:n+size]
		if _, err := vm.MarshalToSizedBufferVT(buf[n:]); err != nil {
			return buf[:n], err
		}
		return buf, nil
	}
	size := proto.Size(m)
	if size > max {
		return buf, fmt.Errorf("%w: message of %d bytes, limit %d", ErrFrameTooLarge, size, max)
	}
	buf = binary.AppendUvarint(buf, uint64(size))
	return marshalOpts.MarshalAppend(buf, m)
}

// vtMessage is implemented by the api messages through the generated
// vtprotobuf code: marshalling without reflection, several times cheaper
// than the generic path on every request and response.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
}

// unmarshal decodes b into m, without reflection when m supports it.
func unmarshal(b []byte, m proto.Message) error {
	if vm, ok := m.(interface{ UnmarshalVT([]byte) error }); ok {
		return vm.UnmarshalVT(b)
	}
	return proto.Unmarshal(b, m)
}

// ReadFrame reads one frame from r into buf (reusing its capacity) and returns
// the message bytes. A length above max (<= 0: DefaultMaxFrameSize) fails with
// ErrFrameTooLarge before anything is allocated; a stream that ends inside a
// frame fails with io.ErrUnexpectedEOF; a clean end between frames is io.EOF.
func ReadFrame(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	n, err := readUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// walkFields calls fn with each top-level field of the encoded message b
// (its number, wire type and encoded value) until fn returns false. It
// reports false if b is malformed before fn stopped. The frame peeks below
// use it to look at a field or two without decoding the message.
func walkFields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		if !fn(num, typ, b[:n]) {
			return true
		}
		b = b[n:]
	}
	return true
}

// peekRequestID returns field 1 (request_id) of an encoded Request or Response
// without decoding the rest, so a connection's reader can route a frame to its
// caller and leave the full decode to the caller's goroutine. proto3 omits a
// zero request_id, so a well-formed frame without field 1 gives 0, true.
func peekRequestID(b []byte) (uint64, bool) {
	var id uint64
	ok := walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num == 1 && typ == protowire.VarintType {
			id, _ = protowire.ConsumeVarint(v)
			return false
		}
		return true
	})
	if !ok {
		return 0, false
	}
	return id, true
}

// readUvarint reads the length prefix. Unlike binary.ReadUvarint it tells a
// malformed prefix (ErrProtocol) apart from a failing reader (its error, with
// io.EOF only before the first byte).
func readUvarint(r io.ByteReader) (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				break
			}
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, fmt.Errorf("%w: bad frame length: varint overflows 64 bits", ErrProtocol)
}

// Field numbers of the request bodies the reader may run itself.
const (
	fieldRead     = 15
	fieldStat     = 16
	fieldList     = 17
	fieldDefaults = 30
	fieldEcho     = 40
)

// quickReadLimit bounds the reads the connection reader runs itself.
const quickReadLimit = 128 << 10

// isQuick reports whether the request frame b asks for something short that
// changes nothing and never waits for a disk sync: a stat, a listing page,
// server defaults, an echo, or a read of at most quickReadLimit bytes. Only
// the body's field number is looked at (and a read's length); a frame that
// does not parse is not quick, and the worker that takes it reports why.
func isQuick(b []byte) bool {
	quick := false
	walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num < 10 {
			return true // the envelope's own fields
		}
		switch num {
		case fieldStat, fieldList, fieldDefaults, fieldEcho:
			quick = typ == protowire.BytesType
		case fieldRead:
			body, n := protowire.ConsumeBytes(v)
			quick = n >= 0 && typ == protowire.BytesType && readLength(body) <= quickReadLimit
		}
		return false
	})
	return quick
}

// readLength returns the length field of an encoded ReadRequest, or a value
// above quickReadLimit when it is absent (0 means "to the end") or invalid.
func readLength(b []byte) int64 {
	const tooLong = quickReadLimit + 1
	length := int64(tooLong)
	ok := walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num == 3 && typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(v)
			length = int64(x)
		}
		return length > 0
	})
	if !ok || length <= 0 {
		return tooLong
	}
	return length
}
