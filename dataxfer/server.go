package dataxfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/nimbus-fs/nimbus/api/hadoop"
	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// Verifier checks a block access token (blocktoken.Manager implements it).
type Verifier interface {
	Verify(tok blocktoken.Token, pool string, block uint64, mode blocktoken.AccessMode) error
}

// Hooks are the DataNode's callbacks. Each may be nil. They are called from
// connection goroutines, without locks held, and must not block for long.
type Hooks struct {
	// Receiving: a replica is being written (HDFS's RECEIVING_BLOCK
	// incremental report).
	Receiving func(id blocks.ID)
	// Received: a replica was finalized, by a pipeline or a transfer
	// (RECEIVED_BLOCK).
	Received func(r blocks.Replica)
	// Deleted: the server dropped a replica it was receiving (a failed
	// create or transfer).
	Deleted func(id blocks.ID)
	// Corrupt: a read found a chunk of a stored replica that does not match
	// its checksum; the DataNode reports the replica as corrupt.
	Corrupt func(id blocks.ID, offset int64)
	// Replaced: REPLACE_BLOCK stored a replica copied from another
	// DataNode; delHint names the DataNode whose replica may go
	// (RECEIVED_BLOCK with its delete hint).
	Replaced func(id blocks.ID, delHint string)
	// Xceivers: the number of ops in progress changed by delta (HDFS's
	// xceiver count, for heartbeats and placement).
	Xceivers func(delta int)
}

// TokenIssuer makes a block token a DataNode sends on when it writes to
// another DataNode itself (TRANSFER_BLOCK, re-replication).
type TokenIssuer func(pool string, block uint64, modes ...blocktoken.AccessMode) blocktoken.Token

// Config configures a Server.
type Config struct {
	// Store keeps the replicas. Required.
	Store blocks.Store
	// Tokens verifies block tokens; nil accepts every op (HDFS with
	// dfs.block.access.token.enable false).
	Tokens Verifier
	// IssueToken makes the token a transfer sends downstream; nil sends on
	// the token the op came with.
	IssueToken TokenIssuer
	Hooks      Hooks
	// Dial connects to downstream DataNodes. Nil: net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds every read and write of a connection (HDFS's
	// dfs.client.socket-timeout, 60 s): a peer silent for longer loses its
	// op, a stalled pipeline times out.
	Timeout time.Duration
	// KeepAlive is how long a connection waits for another op after a read
	// or checksum op (HDFS's dfs.datanode.socket.reuse.keepalive, 4 s).
	KeepAlive time.Duration
	// MaxConns bounds the connections served at once (HDFS's
	// dfs.datanode.max.transfer.threads); one over it is closed at once.
	MaxConns int
	// AckWindow bounds the packets received and not yet acknowledged per
	// write; the receiver stops reading when it is full.
	AckWindow int
	// MaxPacket bounds the payload of a packet a peer sends (HDFS's own
	// bound, 16 MiB, by default: Hadoop clients send 64 KiB unless
	// dfs.client-write-packet-size is raised). A connection holds at most
	// one packet plus about 400 KiB of buffers (its reader and writer, a
	// downstream connection's, a read's packet), so the server's memory for
	// connections is at most MaxConns x (MaxPacket + 400 KiB), and in
	// practice the packets' real sizes: a buffer grows only with bytes
	// that arrive.
	MaxPacket int
	Logger    *slog.Logger
	// Registerer receives the server's metrics (metrics.go). Nil: not
	// registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns HDFS's defaults for timeouts and 4096 connections.
func DefaultConfig(store blocks.Store) Config {
	return Config{Store: store, Timeout: 60 * time.Second, KeepAlive: 4 * time.Second, MaxConns: 4096, AckWindow: 128, MaxPacket: MaxPacketSize}
}

// ErrConfig is wrapped by Validate's errors.
var ErrConfig = errors.New("dataxfer: invalid config")

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Store is nil", ErrConfig)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: Timeout %v", ErrConfig, c.Timeout)
	case c.KeepAlive < 0:
		return fmt.Errorf("%w: KeepAlive %v", ErrConfig, c.KeepAlive)
	case c.MaxConns <= 0:
		return fmt.Errorf("%w: MaxConns %d", ErrConfig, c.MaxConns)
	case c.AckWindow <= 0:
		return fmt.Errorf("%w: AckWindow %d", ErrConfig, c.AckWindow)
	case c.MaxPacket < 64<<10 || c.MaxPacket > MaxPacketSize:
		return fmt.Errorf("%w: MaxPacket %d, want [64 KiB, %d]", ErrConfig, c.MaxPacket, MaxPacketSize)
	}
	return nil
}

// Server serves the DataTransferProtocol over a blocks.Store: the DataNode
// side of reads, pipelined writes, block checksums and transfers.
type Server struct {
	cfg   Config
	log   *slog.Logger
	met   *metrics
	slots chan struct{}
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu struct {
		sync.Mutex
		lns     map[net.Listener]struct{}
		conns   map[net.Conn]struct{}
		writers map[uint64]*activeWrite
		closed  bool
	}
}

// activeWrite is a write op in progress on a block: a recovery of the
// block stops it first (HDFS's recoverRbw stops the old writer).
type activeWrite struct {
	conn net.Conn
	done chan struct{}
}

// New returns a Server; Serve starts it on a listener.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	s := &Server{cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxConns)}
	met, err := newMetrics(cfg.Registerer, func() float64 { return float64(s.Active()) })
	if err != nil {
		return nil, fmt.Errorf("dataxfer: metrics: %w", err)
	}
	s.met = met
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.mu.lns = map[net.Listener]struct{}{}
	s.mu.conns = map[net.Conn]struct{}{}
	s.mu.writers = map[uint64]*activeWrite{}
	return s, nil
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("dataxfer: server closed")

// Serve accepts connections on ln until ln fails or Close is called, and
// serves each on its own goroutine. It returns ErrServerClosed after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.mu.lns, ln)
		s.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.met.refused.Inc()
			s.log.Warn("dataxfer: connection refused: too many connections", "remote", c.RemoteAddr(), "max", s.cfg.MaxConns)
			c.Close()
			continue
		}
		if !s.track(c) {
			<-s.slots
			c.Close()
			return ErrServerClosed
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer s.untrack(c)
			s.serveConn(c)
		}()
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
}

// Active is the number of connections being served.
func (s *Server) Active() int { return len(s.slots) }

// Close stops the listeners, closes every connection (writes in progress
// leave their replicas being written, with what was acknowledged), waits
// for the connection goroutines and unregisters the metrics. The Store is
// the caller's to close.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.stop()
	for ln := range s.mu.lns {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.met.unregister()
	return nil
}

// conn is one served connection.
type conn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func (c *conn) readDeadline(d time.Duration)  { c.SetReadDeadline(time.Now().Add(d)) }
func (c *conn) writeDeadline(d time.Duration) { c.SetWriteDeadline(time.Now().Add(d)) }

func (s *Server) serveConn(nc net.Conn) {
	c := &conn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10)}
	wait := s.cfg.Timeout
	for {
		c.readDeadline(wait)
		op, err := ReadOpHeader(c.r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
				s.log.Info("dataxfer: bad op header", "remote", nc.RemoteAddr(), "err", err)
			}
			return
		}
		c.readDeadline(s.cfg.Timeout)
		if s.cfg.Hooks.Xceivers != nil {
			s.cfg.Hooks.Xceivers(1)
		}
		again, err := s.serveOp(c, op)
		s.met.op(op, err)
		if s.cfg.Hooks.Xceivers != nil {
			s.cfg.Hooks.Xceivers(-1)
		}
		if err != nil {
			s.log.Info("dataxfer: op failed", "op", op, "remote", nc.RemoteAddr(), "err", err)
			return
		}
		if !again || s.cfg.KeepAlive == 0 {
			return
		}
		wait = s.cfg.KeepAlive
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serveOp serves one op; again says whether the connection may carry
// another (after reads and checksums, as HDFS's DataXceiver loop).
func (s *Server) serveOp(c *conn, op Op) (again bool, err error) {
	switch op {
	case OpReadBlock:
		var req hadoop.OpReadBlockProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return s.readBlock(c, &req)
	case OpWriteBlock:
		var req hadoop.OpWriteBlockProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return false, s.writeBlock(c, &req)
	case OpBlockChecksum:
		var req hadoop.OpBlockChecksumProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return true, s.blockChecksum(c, &req)
	case OpCopyBlock:
		var req hadoop.OpCopyBlockProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return false, s.copyBlock(c, &req)
	case OpReplaceBlock:
		var req hadoop.OpReplaceBlockProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return false, s.replaceBlock(c, &req)
	case OpTransferBlock:
		var req hadoop.OpTransferBlockProto
		if err := ReadDelimited(c.r, &req); err != nil {
			return false, fmt.Errorf("%s: %w", op, err)
		}
		return false, s.transferBlock(c, &req)
	}
	return false, s.respond(c, &hadoop.BlockOpResponseProto{
		Status:  hadoop.Status_ERROR_UNSUPPORTED.Enum(),
		Message: proto.String(fmt.Sprintf("%s is not supported by this DataNode", op)),
	})
}

// respond writes a BlockOpResponseProto and flushes.
func (s *Server) respond(c *conn, r *hadoop.BlockOpResponseProto) error {
	c.writeDeadline(s.cfg.Timeout)
	if err := writeDelimited(c.w, r); err != nil {
		return err
	}
	return c.w.Flush()
}

func errResponse(st hadoop.Status, format string, args ...any) *hadoop.BlockOpResponseProto {
	return &hadoop.BlockOpResponseProto{Status: st.Enum(), Message: proto.String(fmt.Sprintf(format, args...))}
}

// Block is an HDFS ExtendedBlock: the block pool, the block id, its
// generation stamp and a length (its meaning depends on the op: the bytes
// the client has, or the bytes to checksum).
type Block struct {
	Pool     string
	ID       uint64
	GenStamp uint64
	NumBytes int64
}

// BlockID is the replica name in a blocks.Store.
func (b Block) BlockID() blocks.ID { return blocks.ID{Block: b.ID, GenStamp: b.GenStamp} }

func (b Block) String() string { return b.BlockID().String() }

func blockOf(p *hadoop.ExtendedBlockProto) Block {
	return Block{Pool: p.GetPoolId(), ID: p.GetBlockId(), GenStamp: p.GetGenerationStamp(), NumBytes: int64(p.GetNumBytes())}
}

func (b Block) proto() *hadoop.ExtendedBlockProto {
	return &hadoop.ExtendedBlockProto{PoolId: proto.String(b.Pool), BlockId: proto.Uint64(b.ID), GenerationStamp: proto.Uint64(b.GenStamp), NumBytes: proto.Uint64(uint64(b.NumBytes))}
}

func tokenOf(p *hadoop.TokenProto) blocktoken.Token {
	if p == nil {
		return blocktoken.Token{}
	}
	return blocktoken.Token{Identifier: p.Identifier, Password: p.Password, Kind: p.GetKind(), Service: p.GetService()}
}

// tokenProto is the token sent with an op; HDFS sends an empty one when
// block tokens are off (its four fields are required).
func tokenProto(t blocktoken.Token) *hadoop.TokenProto {
	return &hadoop.TokenProto{
		Identifier: append([]byte{}, t.Identifier...), Password: append([]byte{}, t.Password...),
		Kind: proto.String(t.Kind), Service: proto.String(t.Service),
	}
}

// checkToken verifies the op's token; on refusal it answers
// ERROR_ACCESS_TOKEN (HDFS's DataXceiver.checkAccess) and returns the
// error.
func (s *Server) checkToken(c *conn, op Op, b Block, tok *hadoop.TokenProto, mode blocktoken.AccessMode) error {
	if s.cfg.Tokens == nil {
		return nil
	}
	err := s.cfg.Tokens.Verify(tokenOf(tok), b.Pool, b.ID, mode)
	if err == nil {
		return nil
	}
	s.respond(c, errResponse(hadoop.Status_ERROR_ACCESS_TOKEN, "%s %s: access denied: %v", op, b, err))
	return fmt.Errorf("%s %s: %w", op, b, err)
}

// StopWrite stops a write op of block in progress, if any: its connection
// is closed, and StopWrite returns once the op has ended (its replica
// synced and left being written, with every byte it received) or after
// Timeout. Block recovery calls it before it reads the replica's length
// (HDFS's initReplicaRecovery stops the writer).
func (s *Server) StopWrite(block uint64) {
	s.mu.Lock()
	w := s.mu.writers[block]
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.conn.Close()
	select {
	case <-w.done:
	case <-time.After(s.cfg.Timeout):
	}
}
