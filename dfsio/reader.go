package dfsio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/nimbus-fs/nimbus/dataxfer"
)

// ErrInline is returned by Open for a file whose bytes the NameNode keeps
// itself: the caller reads them through the NameNode.
var ErrInline = errors.New("dfsio: the file's bytes are inline on the NameNode")

// ReaderConfig configures an InputStream.
type ReaderConfig struct {
	NameNode NameNode
	Data     *dataxfer.Client
	Path     string
	Reader   Location
	// Prefetch is the length of file the stream locates per
	// GetBlockLocations call (HDFS's dfs.client.read.prefetch.size, ten
	// blocks); 0: 10 × the first block's size, or 1 GiB.
	Prefetch int64
	// Refetches bounds how often the locations of a block are asked
	// again after every location failed (HDFS's
	// dfs.client.max.block.acquire.failures, 3).
	Refetches int
	Metrics   *Metrics // nil: none
	Logger    *slog.Logger
}

// InputStream reads a file from its DataNodes (HDFS's DFSInputStream).
// Read and Seek must not be called concurrently; ReadAt may be called
// concurrently with everything.
type InputStream struct {
	cfg ReaderConfig
	ctx context.Context
	log *slog.Logger

	mu     sync.Mutex // guards located, dead, length
	loc    *LocatedBlocks
	dead   map[string]bool // DataNodes (data addresses) that failed this stream
	length int64

	pos    int64
	br     *dataxfer.BlockReader // reads from pos on, to brEnd
	brAddr string
	brLB   LocatedBlock
	brEnd  int64
	closed bool
}

// Open opens cfg.Path for reading; ctx bounds every call Read makes.
func Open(ctx context.Context, cfg ReaderConfig) (*InputStream, error) {
	if cfg.NameNode == nil || cfg.Data == nil {
		return nil, fmt.Errorf("dfsio: open %s: NameNode and Data are required", cfg.Path)
	}
	if cfg.Refetches <= 0 {
		cfg.Refetches = 3
	}
	s := &InputStream{cfg: cfg, ctx: ctx, log: cfg.Logger, dead: map[string]bool{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	prefetch := cfg.Prefetch
	if prefetch <= 0 {
		prefetch = 1 << 30
	}
	loc, err := cfg.NameNode.GetBlockLocations(ctx, cfg.Path, 0, prefetch, cfg.Reader)
	if err != nil {
		return nil, fmt.Errorf("dfsio: open %s: %w", cfg.Path, err)
	}
	if loc.Inline && loc.FileLength == 0 {
		loc = &LocatedBlocks{UnderConstruction: loc.UnderConstruction}
	}
	if loc.Inline {
		return nil, fmt.Errorf("dfsio: open %s: %w", cfg.Path, ErrInline)
	}
	if s.cfg.Prefetch <= 0 {
		s.cfg.Prefetch = 1 << 30
		if len(loc.Blocks) > 0 && loc.Blocks[0].NumBytes > 0 {
			s.cfg.Prefetch = 10 * loc.Blocks[0].NumBytes
		}
	}
	s.loc, s.length = loc, fileLength(loc)
	return s, nil
}

// fileLength is the length a reader sees: a file being written is as long
// as its last block's length the NameNode recorded (its writer's last
// hflush/hsync or block end).
func fileLength(l *LocatedBlocks) int64 {
	n := l.FileLength
	if l.UnderConstruction && !l.LastBlockComplete && l.LastBlock != nil {
		n = max(n, l.LastBlock.Offset+l.LastBlock.NumBytes)
	}
	return n
}

// Len is the file's length as the stream sees it.
func (s *InputStream) Len() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.length
}

func (s *InputStream) errf(format string, args ...any) error {
	return fmt.Errorf("dfsio: read %s: "+format, append([]any{s.cfg.Path}, args...)...)
}

// blockAt returns the block holding file offset off, asking the NameNode
// for a window of blocks from off when it is not located yet (or refresh).
func (s *InputStream) blockAt(ctx context.Context, off int64, refresh bool) (LocatedBlock, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !refresh {
		if b, ok := find(s.loc, off); ok {
			return b, nil
		}
	}
	loc, err := s.cfg.NameNode.GetBlockLocations(ctx, s.cfg.Path, off, s.cfg.Prefetch, s.cfg.Reader)
	if err != nil {
		return LocatedBlock{}, s.errf("locating offset %d: %w", off, err)
	}
	s.loc = loc
	s.length = max(s.length, fileLength(loc))
	if b, ok := find(loc, off); ok {
		return b, nil
	}
	return LocatedBlock{}, s.errf("no block holds offset %d of %d bytes", off, s.length)
}

func find(l *LocatedBlocks, off int64) (LocatedBlock, bool) {
	for _, b := range l.Blocks {
		if b.Offset <= off && off < b.Offset+b.NumBytes {
			return b, true
		}
	}
	if lb := l.LastBlock; lb != nil && lb.Offset <= off && off < lb.Offset+lb.NumBytes {
		return *lb, true
	}
	return LocatedBlock{}, false
}

// open opens a reader of lb from file offset off to the block's end on
// its first DataNode not known dead, marking the ones that fail; when all
// failed it locates the block again, at most Refetches times.
func (s *InputStream) open(ctx context.Context, lb LocatedBlock, off int64) (*dataxfer.BlockReader, string, LocatedBlock, error) {
	var lastErr error
	for refetch := 0; ; refetch++ {
		for _, t := range lb.Targets {
			if s.isDead(t.DataAddr) {
				continue
			}
			br, err := s.cfg.Data.ReadBlock(ctx, t.DataAddr, block(&lb, lb.NumBytes), lb.Token, off-lb.Offset, lb.NumBytes-(off-lb.Offset))
			if err == nil {
				return br, t.DataAddr, lb, nil
			}
			if ctx.Err() != nil {
				return nil, "", lb, s.errf("blk_%d: %w", lb.ID, err)
			}
			lastErr = err
			s.log.Info("dfsio: DataNode failed a read; trying the next", "path", s.cfg.Path, "block", lb.ID, "datanode", t.DataAddr, "err", err)
			s.cfg.Metrics.inc(mFailovers, 1)
			s.markDead(t.DataAddr)
		}
		if refetch >= s.cfg.Refetches {
			if lastErr == nil {
				lastErr = errors.New("no location")
			}
			return nil, "", lb, s.errf("blk_%d at offset %d: could not read from any DataNode (%d attempts): %w", lb.ID, off, refetch+1, lastErr)
		}
		// HDFS forgets the dead DataNodes and locates the block again.
		s.mu.Lock()
		clear(s.dead)
		s.mu.Unlock()
		nlb, err := s.blockAt(ctx, off, true)
		if err != nil {
			return nil, "", lb, err
		}
		lb = nlb
	}
}

func (s *InputStream) isDead(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead[addr]
}

func (s *InputStream) markDead(addr string) {
	s.mu.Lock()
	s.dead[addr] = true
	s.mu.Unlock()
}

// readFailed handles err from the replica of lb at addr: a checksum error
// is reported to the NameNode; either way the DataNode is dead for this
// stream.
func (s *InputStream) readFailed(ctx context.Context, lb LocatedBlock, addr string, err error) {
	s.cfg.Metrics.inc(mFailovers, 1)
	s.log.Info("dfsio: read from a DataNode failed; failing over", "path", s.cfg.Path, "block", lb.ID, "datanode", addr, "err", err)
	s.markDead(addr)
	var ce *dataxfer.ChecksumError
	if !errors.As(err, &ce) {
		return
	}
	bad := lb
	bad.Targets = nil
	for _, t := range lb.Targets {
		if t.DataAddr == addr {
			bad.Targets = append(bad.Targets, t)
		}
	}
	s.cfg.Metrics.inc(mBadReported, 1)
	if rerr := s.cfg.NameNode.ReportBadBlocks(ctx, []LocatedBlock{bad}); rerr != nil {
		s.log.Warn("dfsio: reporting a corrupt replica failed", "path", s.cfg.Path, "block", lb.ID, "datanode", addr, "err", rerr)
	}
}

// Read reads from the stream's position.
func (s *InputStream) Read(p []byte) (int, error) {
	if s.closed {
		return 0, s.errf("stream closed")
	}
	if len(p) == 0 {
		return 0, nil
	}
	if s.pos >= s.Len() {
		return 0, io.EOF
	}
	for failures := 0; ; failures++ {
		if s.br == nil {
			lb, err := s.blockAt(s.ctx, s.pos, false)
			if err != nil {
				return 0, err
			}
			br, addr, lb, err := s.open(s.ctx, lb, s.pos)
			if err != nil {
				return 0, err
			}
			s.br, s.brAddr, s.brLB, s.brEnd = br, addr, lb, lb.Offset+lb.NumBytes
		}
		n, err := s.br.Read(p[:min(int64(len(p)), s.brEnd-s.pos)])
		s.pos += int64(n)
		if s.pos == s.brEnd || err == io.EOF {
			s.dropReader()
		}
		if n > 0 {
			s.cfg.Metrics.inc(mBytesRead, n)
			return n, nil
		}
		if err == io.EOF {
			continue
		}
		if err != nil {
			s.dropReader()
			if failures > len(s.brLB.Targets)*(s.cfg.Refetches+1) {
				return 0, s.errf("blk_%d: %w", s.brLB.ID, err)
			}
			s.readFailed(s.ctx, s.brLB, s.brAddr, err)
		}
	}
}

func (s *InputStream) dropReader() {
	if s.br != nil {
		s.br.Close()
		s.br = nil
	}
}

// ReadAt reads len(p) bytes at off, locating and failing over as Read
// does, with its own connections.
func (s *InputStream) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, s.errf("negative offset %d", off)
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= s.Len() {
			return n, io.EOF
		}
		lb, err := s.blockAt(s.ctx, at, false)
		if err != nil {
			return n, err
		}
		want := p[n:min(len(p), n+int(lb.Offset+lb.NumBytes-at))]
		k, err := s.readRange(lb, at, want)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readRange fills p from file offset at, all inside lb, failing over.
func (s *InputStream) readRange(lb LocatedBlock, at int64, p []byte) (int, error) {
	n := 0
	for failures := 0; n < len(p); failures++ {
		br, addr, nlb, err := s.open(s.ctx, lb, at+int64(n))
		if err != nil {
			return n, err
		}
		lb = nlb
		k, err := io.ReadFull(br, p[n:])
		br.Close()
		n += k
		s.cfg.Metrics.inc(mBytesRead, k)
		if err == nil {
			break
		}
		if failures > len(lb.Targets)*(s.cfg.Refetches+1) {
			return n, s.errf("blk_%d: %w", lb.ID, err)
		}
		s.readFailed(s.ctx, lb, addr, err)
	}
	return n, nil
}

// Seek sets the position of Read.
func (s *InputStream) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = s.pos + offset
	case io.SeekEnd:
		abs = s.Len() + offset
	default:
		return 0, s.errf("seek: whence %d", whence)
	}
	if abs < 0 {
		return 0, s.errf("seek to %d", abs)
	}
	if abs != s.pos {
		s.dropReader()
		s.pos = abs
	}
	return abs, nil
}

// Close ends the stream's reads.
func (s *InputStream) Close() error {
	s.closed = true
	s.dropReader()
	return nil
}
