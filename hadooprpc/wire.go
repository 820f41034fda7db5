package hadooprpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
)

// The connection header Hadoop's client sends first: "hrpc", the IPC
// version, the service class and the auth protocol.
const (
	headerLen   = 7
	ipcVersion  = 9
	authNone    = 0
	authSASL    = 0xDF // -33 as a signed byte
	saslCallID  = -33
	contextCall = -3
	pingCall    = -4
)

// ConnHeader is the connection header.
type ConnHeader struct {
	Version      byte
	ServiceClass byte
	AuthProtocol byte
}

// ParseConnHeader checks the 7 bytes a connection starts with.
func ParseConnHeader(b []byte) (ConnHeader, error) {
	if len(b) != headerLen {
		return ConnHeader{}, fmt.Errorf("hadooprpc: connection header: %d bytes, want %d", len(b), headerLen)
	}
	if string(b[:4]) != "hrpc" {
		return ConnHeader{}, fmt.Errorf("hadooprpc: connection header: magic %q, want \"hrpc\"", b[:4])
	}
	h := ConnHeader{Version: b[4], ServiceClass: b[5], AuthProtocol: b[6]}
	if h.Version != ipcVersion {
		return h, fmt.Errorf("hadooprpc: connection header: IPC version %d, this server speaks %d", h.Version, ipcVersion)
	}
	if h.AuthProtocol != authNone && h.AuthProtocol != authSASL {
		return h, fmt.Errorf("hadooprpc: connection header: unknown auth protocol %d", int8(h.AuthProtocol))
	}
	return h, nil
}

// errFrameTooLarge is a frame longer than the server's bound.
var errFrameTooLarge = errors.New("hadooprpc: frame exceeds the maximum data length")

// readFrame reads one length-prefixed frame of at most max bytes.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if int64(n) > int64(max) || int32(n) < 0 {
		return nil, fmt.Errorf("%w: %d bytes, bound %d", errFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("hadooprpc: frame of %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// nextDelimited splits a varint-length-prefixed message off b.
func nextDelimited(b []byte) (msg, rest []byte, err error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return nil, nil, fmt.Errorf("hadooprpc: bad length prefix: %w", protowire.ParseError(k))
	}
	if n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("hadooprpc: message of %d bytes in %d remaining", n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// Request is one decoded call frame.
type Request struct {
	Header *hadoop.RpcRequestHeaderProto
	Method *hadoop.RequestHeaderProto // nil for the control calls (SASL, context, ping)
	Body   []byte                     // the request message (for control calls: what follows the header)
}

// DecodeRequest decodes a call frame: the RpcRequestHeaderProto, and for
// ordinary calls (callId >= 0) the RequestHeaderProto and the request
// message, each varint-delimited.
func DecodeRequest(frame []byte) (*Request, error) {
	hb, rest, err := nextDelimited(frame)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: RPC request header: %w", err)
	}
	h := &hadoop.RpcRequestHeaderProto{}
	if err := proto.Unmarshal(hb, h); err != nil {
		return nil, fmt.Errorf("hadooprpc: RPC request header: %w", err)
	}
	if h.CallId == nil {
		return nil, errors.New("hadooprpc: RPC request header without callId")
	}
	r := &Request{Header: h}
	if h.GetCallId() < 0 {
		if len(rest) == 0 {
			return r, nil // a ping is the header alone
		}
		r.Body, _, err = nextDelimited(rest)
		if err != nil {
			return nil, fmt.Errorf("hadooprpc: call %d: %w", h.GetCallId(), err)
		}
		return r, nil
	}
	if h.GetRpcKind() != hadoop.RpcKindProto_RPC_PROTOCOL_BUFFER {
		return nil, fmt.Errorf("hadooprpc: call %d: RPC kind %v, only RPC_PROTOCOL_BUFFER is served", h.GetCallId(), h.GetRpcKind())
	}
	mb, rest, err := nextDelimited(rest)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: call %d: request header: %w", h.GetCallId(), err)
	}
	m := &hadoop.RequestHeaderProto{}
	if err := proto.Unmarshal(mb, m); err != nil {
		return nil, fmt.Errorf("hadooprpc: call %d: request header: %w", h.GetCallId(), err)
	}
	r.Method = m
	if len(rest) == 0 {
		return r, nil // a message with no fields may be sent as nothing
	}
	r.Body, _, err = nextDelimited(rest)
	if err != nil {
		return nil, fmt.Errorf("hadooprpc: call %d (%s): request: %w", h.GetCallId(), m.GetMethodName(), err)
	}
	return r, nil
}

// encodeResponse builds a response frame: length, the delimited header and,
// when body is not nil, the delimited body.
func encodeResponse(h *hadoop.RpcResponseHeaderProto, body proto.Message) ([]byte, error) {
	hb, err := proto.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4, 4+len(hb)+16)
	out = protowire.AppendVarint(out, uint64(len(hb)))
	out = append(out, hb...)
	if body != nil {
		bb, err := proto.Marshal(body)
		if err != nil {
			return nil, err
		}
		out = protowire.AppendVarint(out, uint64(len(bb)))
		out = append(out, bb...)
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}
