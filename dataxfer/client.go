package dataxfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// Target is a DataNode an op is sent to or names: its DataTransferProtocol
// address and what HDFS's DatanodeInfoProto carries about it.
type Target struct {
	Addr        string // host:port of its data transfer server (ipAddr:xferPort)
	UUID        string // DataNode UUID
	Hostname    string
	StorageType hadoop.StorageTypeProto // 0: DISK
	StorageID   string
}

func (t Target) proto() *hadoop.DatanodeInfoProto {
	host, port, _ := net.SplitHostPort(t.Addr)
	p, _ := strconv.ParseUint(port, 10, 16)
	hn := t.Hostname
	if hn == "" {
		hn = host
	}
	return &hadoop.DatanodeInfoProto{Id: &hadoop.DatanodeIDProto{
		IpAddr: proto.String(host), HostName: proto.String(hn), DatanodeUuid: proto.String(t.UUID),
		XferPort: proto.Uint32(uint32(p)), InfoPort: proto.Uint32(0), IpcPort: proto.Uint32(0),
	}}
}

func targetOf(p *hadoop.DatanodeInfoProto, types []hadoop.StorageTypeProto, ids []string, i int) Target {
	id := p.GetId()
	t := Target{
		Addr:     net.JoinHostPort(id.GetIpAddr(), strconv.FormatUint(uint64(id.GetXferPort()), 10)),
		UUID:     id.GetDatanodeUuid(),
		Hostname: id.GetHostName(),
	}
	if i < len(types) {
		t.StorageType = types[i]
	}
	if i < len(ids) {
		t.StorageID = ids[i]
	}
	return t
}

func (t Target) storageType() hadoop.StorageTypeProto {
	if t.StorageType == 0 {
		return hadoop.StorageTypeProto_DISK
	}
	return t.StorageType
}

// ErrAccessToken is wrapped by the error of an op a DataNode refused for
// its block token (status ERROR_ACCESS_TOKEN).
var ErrAccessToken = errors.New("dataxfer: block token refused")

// StatusError is an op a DataNode answered with a status other than
// SUCCESS.
type StatusError struct {
	Op      Op
	Addr    string
	Block   Block
	Status  hadoop.Status
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("dataxfer: %s %s at %s: %v: %s", e.Op, e.Block, e.Addr, e.Status, e.Message)
}

// Is makes errors.Is(err, ErrAccessToken) hold for a token refusal.
func (e *StatusError) Is(target error) bool {
	return target == ErrAccessToken && e.Status == hadoop.Status_ERROR_ACCESS_TOKEN
}

// Client sends ops to DataNodes.
type Client struct {
	// Name is the client name sent with ops (HDFS's DFSClient name). A
	// DataNode writing to another sends "" (a DataNode's own transfer).
	Name string
	// Dial connects; nil: net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds each read and write on a connection; 0: 60 s.
	Timeout time.Duration
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 60 * time.Second
	}
	return c.Timeout
}

func (c *Client) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := c.Dial
	if d == nil {
		var nd net.Dialer
		d = nd.DialContext
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	return d(ctx, "tcp", addr)
}

// closeOnDone closes nc when ctx ends before stop is called.
func closeOnDone(ctx context.Context, nc net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { nc.Close() })
}

func (c *Client) header(b Block, tok blocktoken.Token) *hadoop.ClientOperationHeaderProto {
	return &hadoop.ClientOperationHeaderProto{
		BaseHeader: &hadoop.BaseHeaderProto{Block: b.proto(), Token: tokenProto(tok)},
		ClientName: proto.String(c.Name),
	}
}

// call sends one op and reads its response on a new connection, which it
// returns open for what follows.
func (c *Client) call(ctx context.Context, addr string, op Op, b Block, req proto.Message) (net.Conn, *bufio.Reader, *hadoop.BlockOpResponseProto, error) {
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dataxfer: %s %s: connect %s: %w", op, b, addr, err)
	}
	nc.SetDeadline(time.Now().Add(c.timeout()))
	w := bufio.NewWriter(nc)
	err = writeOp(w, op, req)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("dataxfer: %s %s to %s: %w", op, b, addr, err)
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	var resp hadoop.BlockOpResponseProto
	if err := ReadDelimited(r, &resp); err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("dataxfer: %s %s at %s: response: %w", op, b, addr, err)
	}
	if resp.GetStatus() != hadoop.Status_SUCCESS {
		nc.Close()
		return nil, nil, &resp, &StatusError{Op: op, Addr: addr, Block: b, Status: resp.GetStatus(), Message: resp.GetMessage()}
	}
	return nc, r, &resp, nil
}

// BlockChecksum asks a DataNode for its replica's block checksum (MD5 of
// the chunk CRC32Cs). b.NumBytes, when smaller than the replica, asks for
// the checksum of that prefix.
func (c *Client) BlockChecksum(ctx context.Context, addr string, b Block, tok blocktoken.Token) (blocks.BlockChecksum, error) {
	req := &hadoop.OpBlockChecksumProto{Header: &hadoop.BaseHeaderProto{Block: b.proto(), Token: tokenProto(tok)}}
	nc, _, resp, err := c.call(ctx, addr, OpBlockChecksum, b, req)
	if err != nil {
		return blocks.BlockChecksum{}, err
	}
	nc.Close()
	cr := resp.GetChecksumResponse()
	if cr == nil || len(cr.BlockChecksum) != 16 {
		return blocks.BlockChecksum{}, fmt.Errorf("dataxfer: BLOCK_CHECKSUM %s at %s: %w", b, addr, protoErr("no MD5 in the response"))
	}
	bc := blocks.BlockChecksum{Length: b.NumBytes, BytesPerCRC: int(cr.GetBytesPerCrc()), CRCCount: int64(cr.GetCrcPerBlock())}
	copy(bc.MD5[:], cr.BlockChecksum)
	return bc, nil
}

// TransferBlock asks the DataNode at addr to send its replica of b (up to
// b.NumBytes) to targets (HDFS's transferBlock, how a client adds a
// DataNode to a pipeline). It returns once the DataNode reports success.
func (c *Client) TransferBlock(ctx context.Context, addr string, b Block, tok blocktoken.Token, targets []Target) error {
	req := &hadoop.OpTransferBlockProto{Header: c.header(b, tok)}
	for _, t := range targets {
		req.Targets = append(req.Targets, t.proto())
		req.TargetStorageTypes = append(req.TargetStorageTypes, t.storageType())
		req.TargetStorageIds = append(req.TargetStorageIds, t.StorageID)
	}
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("dataxfer: TRANSFER_BLOCK %s: connect %s: %w", b, addr, err)
	}
	defer nc.Close()
	defer closeOnDone(ctx, nc)()
	// The answer comes after the whole replica was sent: no deadline but
	// the context's on it.
	nc.SetWriteDeadline(time.Now().Add(c.timeout()))
	w := bufio.NewWriter(nc)
	err = writeOp(w, OpTransferBlock, req)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("dataxfer: TRANSFER_BLOCK %s to %s: %w", b, addr, err)
	}
	var resp hadoop.BlockOpResponseProto
	if err := ReadDelimited(bufio.NewReader(nc), &resp); err != nil {
		return fmt.Errorf("dataxfer: TRANSFER_BLOCK %s at %s: %w", b, addr, errors.Join(ctx.Err(), err))
	}
	if resp.GetStatus() != hadoop.Status_SUCCESS {
		return &StatusError{Op: OpTransferBlock, Addr: addr, Block: b, Status: resp.GetStatus(), Message: resp.GetMessage()}
	}
	return nil
}

// ReplaceBlock asks the DataNode at addr to copy its replica of b from
// source (COPY_BLOCK) and store it (HDFS's replaceBlock, what the balancer
// and the mover send); delHint names the DataNode whose replica the
// NameNode may then delete. It returns once the DataNode stored the
// replica.
func (c *Client) ReplaceBlock(ctx context.Context, addr string, b Block, tok blocktoken.Token, delHint string, source Target) error {
	req := &hadoop.OpReplaceBlockProto{
		Header:      &hadoop.BaseHeaderProto{Block: b.proto(), Token: tokenProto(tok)},
		DelHint:     proto.String(delHint),
		Source:      source.proto(),
		StorageType: source.storageType().Enum(),
	}
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("dataxfer: REPLACE_BLOCK %s: connect %s: %w", b, addr, err)
	}
	defer nc.Close()
	defer closeOnDone(ctx, nc)()
	nc.SetWriteDeadline(time.Now().Add(c.timeout()))
	w := bufio.NewWriter(nc)
	err = writeOp(w, OpReplaceBlock, req)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("dataxfer: REPLACE_BLOCK %s to %s: %w", b, addr, err)
	}
	var resp hadoop.BlockOpResponseProto
	if err := ReadDelimited(bufio.NewReader(nc), &resp); err != nil {
		return fmt.Errorf("dataxfer: REPLACE_BLOCK %s at %s: %w", b, addr, errors.Join(ctx.Err(), err))
	}
	if resp.GetStatus() != hadoop.Status_SUCCESS {
		return &StatusError{Op: OpReplaceBlock, Addr: addr, Block: b, Status: resp.GetStatus(), Message: resp.GetMessage()}
	}
	return nil
}

// ReadError is a read that failed: which DataNode, which block, at which
// offset of the block, and why (an ErrChecksum for bytes that did not match
// their checksum; those bytes are never returned).
type ReadError struct {
	Addr   string
	Block  Block
	Offset int64
	Err    error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("dataxfer: READ_BLOCK %s from %s at offset %d: %v", e.Block, e.Addr, e.Offset, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// BlockReader streams a range of a block from one DataNode, verifying
// every chunk before returning its bytes.
type BlockReader struct {
	nc       net.Conn
	r        *bufio.Reader
	pr       *PacketReader
	addr     string
	b        Block
	timeout  time.Duration
	next     int64 // block offset of the next packet's data
	pos, end int64 // the next byte to return; the end of the range
	cur      []byte
	err      error
	stop     func() bool
	seq      int64
}

// ReadBlock opens [offset, offset+length) of b on the DataNode at addr.
func (c *Client) ReadBlock(ctx context.Context, addr string, b Block, tok blocktoken.Token, offset, length int64) (*BlockReader, error) {
	req := &hadoop.OpReadBlockProto{Header: c.header(b, tok), Offset: proto.Uint64(uint64(offset)), Len: proto.Uint64(uint64(length)), SendChecksums: proto.Bool(true)}
	nc, r, resp, err := c.call(ctx, addr, OpReadBlock, b, req)
	if err != nil {
		return nil, err
	}
	info := resp.GetReadOpChecksumInfo()
	sum, err := checksumOf(info.GetChecksum())
	start := int64(info.GetChunkOffset())
	if err == nil && (info == nil || start > offset || offset-start >= int64(max(sum.BytesPerChecksum, 1))) {
		err = protoErr("chunk offset %d for a read at %d", start, offset)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("dataxfer: READ_BLOCK %s at %s: %w", b, addr, err)
	}
	br := &BlockReader{nc: nc, r: r, pr: NewPacketReader(r, sum), addr: addr, b: b, timeout: c.timeout(), next: start, pos: offset, end: offset + length}
	br.stop = closeOnDone(ctx, nc)
	return br, nil
}

func (br *BlockReader) fail(off int64, err error) error {
	br.err = &ReadError{Addr: br.addr, Block: br.b, Offset: off, Err: err}
	br.nc.Close()
	return br.err
}

// Read returns verified bytes of the range; io.EOF at its end.
func (br *BlockReader) Read(p []byte) (int, error) {
	for len(br.cur) == 0 {
		if br.err != nil {
			return 0, br.err
		}
		br.nc.SetReadDeadline(time.Now().Add(br.timeout))
		pkt, err := br.pr.Next()
		if err != nil {
			var ce *ChecksumError
			if errors.As(err, &ce) {
				return 0, br.fail(ce.Offset, err)
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, br.fail(br.next, err)
		}
		if pkt.Offset != br.next || pkt.Seqno != br.seq {
			return 0, br.fail(br.next, protoErr("packet %d at offset %d, expected packet %d at %d", pkt.Seqno, pkt.Offset, br.seq, br.next))
		}
		br.seq++
		if pkt.Last {
			if br.pos < br.end {
				return 0, br.fail(br.pos, fmt.Errorf("%w: the block ended at %d", io.ErrUnexpectedEOF, br.next))
			}
			// Tell the DataNode every byte verified (HDFS's CHECKSUM_OK).
			br.nc.SetWriteDeadline(time.Now().Add(br.timeout))
			writeDelimited(br.nc, &hadoop.ClientReadStatusProto{Status: hadoop.Status_CHECKSUM_OK.Enum()})
			br.err = io.EOF
			return 0, io.EOF
		}
		lo, hi := pkt.Offset, pkt.Offset+int64(len(pkt.Data))
		br.next = hi
		a, z := max(lo, br.pos), min(hi, br.end)
		if a < z {
			br.cur = pkt.Data[a-lo : z-lo]
		}
	}
	n := copy(p, br.cur)
	br.cur = br.cur[n:]
	br.pos += int64(n)
	return n, nil
}

// Close ends the read.
func (br *BlockReader) Close() error {
	br.stop()
	return br.nc.Close()
}

// SendOptions tunes SendReplica.
type SendOptions struct {
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	Timeout time.Duration
	// Length is how much of the replica to send; 0 (or more than the
	// replica has): all of it.
	Length int64
}

// SendReplica writes a replica of a local store to targets, as a DataNode
// does for re-replication (clientName "": stage PIPELINE_SETUP_CREATE, no
// acks) or for a client's TRANSFER_BLOCK (stage TRANSFER_RBW or
// TRANSFER_FINALIZED by the replica's state, then the target's answer).
func SendReplica(ctx context.Context, store blocks.Store, b Block, tok blocktoken.Token, clientName string, targets []Target, opts SendOptions) error {
	c := &Client{Name: clientName, Dial: opts.Dial, Timeout: opts.Timeout}
	id := b.BlockID()
	rep, err := store.Stat(ctx, id)
	if err != nil {
		return fmt.Errorf("dataxfer: send %s: %w", b, err)
	}
	n := rep.Length
	if opts.Length > 0 && opts.Length < n {
		n = opts.Length
	}
	st := StageCreate
	if clientName != "" {
		st = StageTransferFinalized
		if rep.State != blocks.Finalized {
			st = StageTransferRBW
		}
	}
	b.NumBytes = n
	req := &hadoop.OpWriteBlockProto{
		Header:                c.header(b, tok),
		Stage:                 st.Enum(),
		PipelineSize:          proto.Uint32(uint32(len(targets))),
		MinBytesRcvd:          proto.Uint64(0),
		MaxBytesRcvd:          proto.Uint64(0),
		LatestGenerationStamp: proto.Uint64(b.GenStamp),
		RequestedChecksum:     CRC32C.proto(),
		StorageType:           targets[0].storageType().Enum(),
	}
	for _, t := range targets[1:] {
		req.Targets = append(req.Targets, t.proto())
		req.TargetStorageTypes = append(req.TargetStorageTypes, t.storageType())
	}
	addr := targets[0].Addr
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return fmt.Errorf("dataxfer: send %s: connect %s: %w", b, addr, err)
	}
	defer nc.Close()
	defer closeOnDone(ctx, nc)()
	cw := &deadlineConn{nc: nc, d: c.timeout()}
	w := bufio.NewWriterSize(cw, 64<<10)
	if err := writeOp(w, OpWriteBlock, req); err != nil {
		return fmt.Errorf("dataxfer: send %s to %s: %w", b, addr, err)
	}
	var rd io.Reader = eofReader{}
	if n > 0 {
		r, err := store.Read(ctx, id, 0, n)
		if err != nil {
			return fmt.Errorf("dataxfer: send %s: %w", b, err)
		}
		defer r.Close()
		rd = r
	}
	buf := make([]byte, readPacketData)
	var pkt []byte
	var seq, off int64
	for ; off < n; seq++ {
		k := int(min(int64(len(buf)), n-off))
		if _, err := io.ReadFull(rd, buf[:k]); err != nil {
			return fmt.Errorf("dataxfer: send %s: read at %d: %w", b, off, err)
		}
		pkt = AppendPacket(pkt[:0], PacketHeader{Offset: off, Seqno: seq}, buf[:k], true)
		if _, err := w.Write(pkt); err != nil {
			return fmt.Errorf("dataxfer: send %s to %s: %w", b, addr, err)
		}
		off += int64(k)
	}
	pkt = AppendPacket(pkt[:0], PacketHeader{Offset: n, Seqno: seq, Last: true}, nil, true)
	_, err = w.Write(pkt)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return fmt.Errorf("dataxfer: send %s to %s: %w", b, addr, err)
	}
	if clientName == "" {
		return nil
	}
	nc.SetReadDeadline(time.Now().Add(c.timeout()))
	var ack hadoop.DNTransferAckProto
	if err := ReadDelimited(bufio.NewReader(nc), &ack); err != nil {
		return fmt.Errorf("dataxfer: send %s to %s: answer: %w", b, addr, err)
	}
	if ack.GetStatus() != hadoop.Status_SUCCESS {
		return &StatusError{Op: OpWriteBlock, Addr: addr, Block: b, Status: ack.GetStatus()}
	}
	return nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// deadlineConn sets a write deadline before each write.
type deadlineConn struct {
	nc net.Conn
	d  time.Duration
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.nc.SetWriteDeadline(time.Now().Add(c.d))
	return c.nc.Write(p)
}
