// Package dfsio is the client side of the data path: HDFS's
// DFSOutputStream/DataStreamer (OutputStream) and DFSInputStream
// (InputStream) over the DataTransferProtocol of package dataxfer, with
// the NameNode behind the NameNode interface, so that the same streams
// serve Nimbus's client, the DataNode's WebHDFS handler and the FUSE
// mount whatever carries their NameNode calls (the engine in process, or
// RPC).
//
// A writer asks the NameNode for a block (AddBlock), writes it through a
// pipeline of DataNodes, and on a pipeline failure runs HDFS's pipeline
// recovery: the failed DataNode leaves, the block gets a new generation
// stamp (UpdateBlockForPipeline), a replacement DataNode is added when the
// replace-on-failure policy asks for one (AdditionalDataNode, then a
// TRANSFER_BLOCK from a surviving DataNode), the unacknowledged bytes are
// sent again under PIPELINE_SETUP_STREAMING_RECOVERY, and the NameNode
// records the new pipeline (UpdatePipeline). A reader locates blocks in
// windows (GetBlockLocations), reads each from its first live location,
// and fails over to the next one on a connection, read or checksum error;
// replicas that sent bytes failing their checksum are reported
// (ReportBadBlocks).
package dfsio

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/meta"
)

// Location is where a client runs, for placement and replica order.
type Location struct {
	Host string
	Zone string
}

// DataNodeInfo names a DataNode (HDFS's DatanodeInfo).
type DataNodeInfo struct {
	ID        uint64 // the registry's numeric id; exclude lists name these
	UUID      string
	StorageID string
	DataAddr  string // host:port of its data transfer port
	HTTPAddr  string
	Host      string
	Zone      string
}

// BlockRef names a block as the client wrote it: id, generation stamp and
// length (HDFS's ExtendedBlock without its pool).
type BlockRef struct {
	ID       uint64
	GenStamp uint64
	NumBytes int64
}

// LocatedBlock is a block with the DataNodes to write it to or read it
// from, and its token (HDFS's LocatedBlock).
type LocatedBlock struct {
	Pool     string
	ID       uint64
	GenStamp uint64
	NumBytes int64
	Offset   int64 // the block's first byte in the file
	// Targets: the pipeline, in order (writing), or the replicas ordered
	// for the reader (reading).
	Targets []DataNodeInfo
	Token   blocktoken.Token
	// Corrupt: every replica the NameNode knows is corrupt.
	Corrupt bool
}

// Ref is the block's BlockRef.
func (b *LocatedBlock) Ref() BlockRef {
	return BlockRef{ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes}
}

// LocatedBlocks is a range of a file's blocks (HDFS's LocatedBlocks).
type LocatedBlocks struct {
	FileLength        int64
	Blocks            []LocatedBlock
	UnderConstruction bool
	LastBlock         *LocatedBlock
	LastBlockComplete bool
	// Inline: the NameNode keeps the file's bytes itself; they are read
	// through it, not from DataNodes.
	Inline bool
}

// NameNode is what the streams need of the NameNode (HDFS's ClientProtocol
// data-path calls). path is the file's path and client the lease holder's
// name. Implementations adapt the engine (namespace.Engine) or an RPC
// client; they are safe for concurrent use.
type NameNode interface {
	// AddBlock commits previous (nil for the first block) and allocates
	// the next block with its pipeline, none of exclude.
	AddBlock(ctx context.Context, path, client string, previous *BlockRef, exclude []uint64, writer Location) (*LocatedBlock, error)
	// CompleteBlock commits last (nil: no block being written) and closes
	// the file; an error IsRetryable says the last block has no reported
	// replica yet.
	CompleteBlock(ctx context.Context, path, client string, last *BlockRef) error
	GetBlockLocations(ctx context.Context, path string, offset, length int64, reader Location) (*LocatedBlocks, error)
	// UpdateBlockForPipeline answers the block under a new generation
	// stamp with a write token.
	UpdateBlockForPipeline(ctx context.Context, path, client string, block BlockRef) (*LocatedBlock, error)
	UpdatePipeline(ctx context.Context, path, client string, old, updated BlockRef, nodes []uint64) error
	AbandonBlock(ctx context.Context, path, client string, block BlockRef) error
	// Fsync records the length of the block being written (hflush/hsync).
	Fsync(ctx context.Context, path, client string, lastBlockLength int64) error
	// AdditionalDataNode chooses n DataNodes to join the pipeline of
	// block (existing: the pipeline's, exclude: not to choose); the
	// answer's Targets are the new ones and its token allows copying.
	AdditionalDataNode(ctx context.Context, path, client string, block BlockRef, existing, exclude []uint64, n int, writer Location) (*LocatedBlock, error)
	// ReportBadBlocks tells the NameNode that the replicas of each block
	// on its Targets are corrupt.
	ReportBadBlocks(ctx context.Context, blocks []LocatedBlock) error
}

// IsRetryable reports whether a NameNode error asks the caller to send the
// call again later (the engine's "not yet replicated" wraps meta.ErrBusy).
func IsRetryable(err error) bool {
	return errors.Is(err, meta.ErrBusy)
}
