// Package hrpctest is a minimal Hadoop IPC client for tests of Nimbus's
// Hadoop RPC port (package hadooprpc): it speaks the connection header, the
// connection context and ClientProtocol calls the way Hadoop's Client does,
// one call at a time, and lets a test choose the call id and retry count
// (to resend a call as Hadoop's retry policy does). Not for production use.
package hrpctest

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	h "github.com/nimbus-fs/nimbus/api/hadoop"
)

// Protocol is ClientProtocol's Java name.
const Protocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// Client is one connection.
type Client struct {
	c        net.Conn
	r        *bufio.Reader
	ClientID []byte // 16 bytes, as Hadoop's ClientId
	next     int32
}

// RemoteError is an error answer.
type RemoteError struct {
	Class, Msg string
	Fatal      bool
}

func (e *RemoteError) Error() string { return e.Class + ": " + e.Msg }

// Dial connects to addr as user (auth protocol NONE).
func Dial(addr, user string) (*Client, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	cl := &Client{c: c, r: bufio.NewReader(c), ClientID: id}
	if _, err := c.Write([]byte{'h', 'r', 'p', 'c', 9, 0, 0}); err != nil {
		c.Close()
		return nil, err
	}
	ctx := &h.IpcConnectionContextProto{UserInfo: &h.UserInformationProto{EffectiveUser: proto.String(user)}, Protocol: proto.String(Protocol)}
	if err := cl.write(-3, -1, ctx); err != nil {
		c.Close()
		return nil, err
	}
	return cl, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// NextCallID is the id Call will use.
func (c *Client) NextCallID() int32 { return c.next }

func (c *Client) write(callID, retry int32, parts ...proto.Message) error {
	hd := &h.RpcRequestHeaderProto{RpcKind: h.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(), RpcOp: h.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(),
		CallId: proto.Int32(callID), ClientId: c.ClientID, RetryCount: proto.Int32(retry)}
	b := make([]byte, 4)
	for _, p := range append([]proto.Message{hd}, parts...) {
		mb, err := proto.Marshal(p)
		if err != nil {
			return err
		}
		b = protowire.AppendVarint(b, uint64(len(mb)))
		b = append(b, mb...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := c.c.Write(b)
	return err
}

// Call sends method with a fresh call id and waits for its answer.
func (c *Client) Call(method string, req, resp proto.Message) error {
	id := c.next
	c.next++
	return c.CallAs(id, 0, method, req, resp)
}

// CallAs sends method with the given call id and retry count (a retry
// count above 0 is a resubmission) and waits for its answer.
func (c *Client) CallAs(callID, retry int32, method string, req, resp proto.Message) error {
	rh := &h.RequestHeaderProto{MethodName: proto.String(method), DeclaringClassProtocolName: proto.String(Protocol), ClientProtocolVersion: proto.Uint64(1)}
	if err := c.write(callID, retry, rh, req); err != nil {
		return err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(time.Minute))
	var lb [4]byte
	if _, err := io.ReadFull(c.r, lb[:]); err != nil {
		return fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	b := make([]byte, binary.BigEndian.Uint32(lb[:]))
	if _, err := io.ReadFull(c.r, b); err != nil {
		return fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	hb, rest, err := delimited(b)
	if err != nil {
		return err
	}
	var hdr h.RpcResponseHeaderProto
	if err := proto.Unmarshal(hb, &hdr); err != nil {
		return err
	}
	if int32(hdr.GetCallId()) != callID {
		return fmt.Errorf("%s: answer to call %d, sent %d", method, int32(hdr.GetCallId()), callID)
	}
	if hdr.GetStatus() != h.RpcResponseHeaderProto_SUCCESS {
		return &RemoteError{Class: hdr.GetExceptionClassName(), Msg: hdr.GetErrorMsg(), Fatal: hdr.GetStatus() == h.RpcResponseHeaderProto_FATAL}
	}
	body, _, err := delimited(rest)
	if err != nil {
		return err
	}
	return proto.Unmarshal(body, resp)
}

func delimited(b []byte) (msg, rest []byte, err error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("hrpctest: bad delimited message")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}
