package namespace

import (
	"context"
	"errors"
)

// The DataNode mode (Config.DataNodes set): files up to InlineThreshold
// keep their bytes in the store, written through Write as in the local
// mode; beyond it the client writes blocks to DataNodes itself, as an HDFS
// client does, and the engine keeps only the block rows: it allocates
// blocks and chooses their DataNodes (AddBlock), commits their lengths
// (AddBlock, Fsync, CompleteBlock), tells readers where the replicas are
// (GetBlockLocations) and issues the block tokens the DataNodes check.
// The engine reaches the DataNodes only through the DataNodes interface,
// so this package imports neither the registry nor the data transfer
// protocol (package datapath implements it over both).

// DataNodes is what the engine needs of the cluster's DataNodes in the
// DataNode mode. Implementations are safe for concurrent use; every call
// may block on the store and takes a context.
type DataNodes interface {
	// BlockPool is the cluster's block pool id, which every block the
	// engine hands out carries.
	BlockPool() string
	// ChooseTargets picks up to n DataNodes for a new replica of a block of
	// blockSize bytes written from writer, none of exclude and none of
	// chosen (the replicas the block already has), spread over zones. It
	// returns fewer when there are fewer eligible DataNodes, and none (nil
	// error) when there is none.
	ChooseTargets(ctx context.Context, n int, blockSize int64, writer Location, exclude, chosen []uint64) ([]DataNodeInfo, error)
	// Replicas returns the reported replicas of each of blocks, out[i]
	// those of blocks[i], ordered for a reader at reader (same host, same
	// zone, the rest; stale DataNodes last; dead ones left out).
	Replicas(ctx context.Context, blocks []uint64, reader Location) ([][]ReplicaInfo, error)
	// Token issues a block token for user on block allowing modes.
	Token(user string, block uint64, modes ...TokenMode) BlockToken
}

// Location is where a client runs, for placement and for ordering
// replicas.
type Location struct {
	Host string
	Zone string
}

// DataNodeInfo names a DataNode for a client: what HDFS's DatanodeInfo
// carries.
type DataNodeInfo struct {
	ID        uint64 // the registry's numeric id (exclude lists name these)
	UUID      string
	StorageID string
	DataAddr  string // host:port of its data transfer port
	HTTPAddr  string // host:port of its HTTP port
	Host      string
	Zone      string
}

// ReplicaState is a reported replica's state.
type ReplicaState uint8

const (
	ReplicaFinalized ReplicaState = iota + 1
	ReplicaBeingWritten
	ReplicaCorrupt
)

// ReplicaInfo is a reported replica with its DataNode.
type ReplicaInfo struct {
	Node     DataNodeInfo
	GenStamp uint64
	Length   int64
	State    ReplicaState
}

// TokenMode is an access a block token allows (HDFS's AccessMode).
type TokenMode uint8

const (
	TokenRead TokenMode = iota
	TokenWrite
	TokenCopy
	TokenReplace
)

// BlockToken is an issued block access token (HDFS's Token of a
// BlockTokenIdentifier).
type BlockToken struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// BlockRef names a block as a client knows it: id, generation stamp and
// the bytes the client wrote to it (HDFS's ExtendedBlock without its pool).
type BlockRef struct {
	ID       uint64
	GenStamp uint64
	NumBytes int64
}

// LocatedBlock is a block with where to read or write it (HDFS's
// LocatedBlock).
type LocatedBlock struct {
	Pool     string
	ID       uint64
	GenStamp uint64
	NumBytes int64
	Offset   int64 // the block's first byte in the file
	// Targets are the DataNodes to write to (AddBlock: the pipeline, in
	// order) or to read from (ordered for the reader).
	Targets []DataNodeInfo
	Token   BlockToken
	// Corrupt: every replica found is corrupt.
	Corrupt bool
}

// LocatedBlocks is a file's blocks for a reader (HDFS's LocatedBlocks).
type LocatedBlocks struct {
	FileLength        int64
	Blocks            []LocatedBlock // the blocks overlapping the range asked
	UnderConstruction bool
	// LastBlock is the file's last block (nil for an empty or inline
	// file); LastBlockComplete says whether its length is final.
	LastBlock         *LocatedBlock
	LastBlockComplete bool
	// Inline: the file keeps its bytes in the store; read them with Read.
	Inline bool
}

// ErrNotYetReplicated is wrapped (with meta.ErrBusy, so the client may
// send the call again) by CompleteBlock and AddBlock when the block to
// commit has no reported replica with its generation stamp and length
// yet: the DataNodes have not sent their reports. The client backs off
// and retries, as HDFS's DFSOutputStream.completeFile does.
var ErrNotYetReplicated = errors.New("namespace: the block has no reported replica yet")

// BlockRecovery is the DataNode commands lease recovery runs in the
// DataNode mode (HDFS's initReplicaRecovery and
// updateReplicaUnderRecovery), sent to a DataNode's HTTP port
// (DataNodeInfo.HTTPAddr). Package datanode/command's Client does this;
// the server adapts it. Safe for concurrent use.
type BlockRecovery interface {
	// InitRecovery stops any writer of replica block on the DataNode and
	// answers its stamp, length and state. recoveryID is the stamp the
	// recovery finalizes under; a smaller one than a recovery already
	// started is refused.
	InitRecovery(ctx context.Context, httpAddr string, block BlockRef, recoveryID uint64) (RecoveredReplica, error)
	// FinishRecovery cuts replica block to newLength and finalizes it
	// under recoveryID. Sending it again after it succeeded succeeds.
	FinishRecovery(ctx context.Context, httpAddr string, block BlockRef, recoveryID uint64, newLength int64) error
}

// RecoveredReplica is a replica as InitRecovery found it.
type RecoveredReplica struct {
	GenStamp uint64
	Length   int64
	State    ReplicaState
}
