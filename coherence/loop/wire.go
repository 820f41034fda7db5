package loop

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
)

// The wire format of a batch of peer messages (the body of POST
// /coherence), compact and versioned:
//
//	version:1 count:uvarint message*
//	message  = type:1 from:str to:str since:varint deployment:uvarint
//	           writer:str seq:uvarint ntargets:uvarint target*
//	target   = kind:1 parent:uvarint name:str id:uvarint
//	str      = len:uvarint bytes
//
// It is internal to the servers of one cluster (which run one build), so
// the version byte only guards against talking to a different one.
const wireVersion = 1

// errWire: a batch that does not decode.
var errWire = errors.New("coherence/loop: malformed message batch")

// maxBatch bounds what one decoded batch may claim, against garbage.
const maxBatch = 1 << 16

// appendBatch encodes ms after dst.
func appendBatch(dst []byte, ms []coherence.Message) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ms)))
	for i := range ms {
		m := &ms[i]
		dst = append(dst, byte(m.Type))
		dst = appendStr(dst, string(m.From))
		dst = appendStr(dst, string(m.To))
		dst = binary.AppendVarint(dst, m.Since)
		dst = binary.AppendUvarint(dst, uint64(m.Deployment))
		dst = appendStr(dst, string(m.Op.Writer))
		dst = binary.AppendUvarint(dst, m.Op.Seq)
		dst = binary.AppendUvarint(dst, uint64(len(m.Targets)))
		for _, t := range m.Targets {
			dst = append(dst, byte(t.Kind))
			dst = binary.AppendUvarint(dst, t.Parent)
			dst = appendStr(dst, t.Name)
			dst = binary.AppendUvarint(dst, t.ID)
		}
	}
	return dst
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeBatch decodes a batch encoded by appendBatch.
func decodeBatch(b []byte) ([]coherence.Message, error) {
	d := decoder{b: b}
	if v := d.byte(); v != wireVersion {
		return nil, fmt.Errorf("%w: version %d", errWire, v)
	}
	n := d.uvarint()
	if n > maxBatch {
		return nil, fmt.Errorf("%w: %d messages", errWire, n)
	}
	ms := make([]coherence.Message, 0, min(n, 64))
	for range n {
		var m coherence.Message
		m.Type = coherence.MsgType(d.byte())
		m.From = coherence.NodeID(d.str())
		m.To = coherence.NodeID(d.str())
		m.Since = d.varint()
		m.Deployment = int(d.uvarint())
		m.Op.Writer = coherence.NodeID(d.str())
		m.Op.Seq = d.uvarint()
		nt := d.uvarint()
		if nt > maxBatch {
			return nil, fmt.Errorf("%w: %d targets", errWire, nt)
		}
		for range nt {
			var t cache.Target
			t.Kind = cache.Kind(d.byte())
			t.Parent = d.uvarint()
			t.Name = d.str()
			t.ID = d.uvarint()
			m.Targets = append(m.Targets, t)
		}
		if d.err != nil {
			return nil, d.err
		}
		ms = append(ms, m)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errWire, len(d.b))
	}
	return ms, d.err
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = errWire, nil }

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if uint64(len(d.b)) < n {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
