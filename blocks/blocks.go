package blocks

import (
	"context"
	"fmt"
	"io"
)

// ChunkSize is the number of data bytes covered by one CRC32C checksum
// (HDFS's dfs.bytes-per-checksum default). Every implementation checksums
// in chunks of this size.
const ChunkSize = 512

// ID names a replica: the block id and its generation stamp. A Store holds
// at most one replica per block id; an ID whose GenStamp differs from the
// stored replica's names no replica (ErrNotFound).
type ID struct {
	Block    uint64
	GenStamp uint64
}

// String returns HDFS's spelling, blk_<id>_<genstamp>.
func (id ID) String() string { return fmt.Sprintf("blk_%d_%d", id.Block, id.GenStamp) }

// State is a replica's place in its life.
type State uint8

const (
	// BeingWritten (HDFS "rbw"): a writer may still add bytes; readers see the
	// synced prefix only. After a crash the replica stays in this state until
	// Recover (or OpenAppend) decides its length.
	BeingWritten State = iota + 1
	// Finalized: complete and immutable until a later OpenAppend or Truncate
	// under a new generation stamp.
	Finalized
)

func (s State) String() string {
	switch s {
	case BeingWritten:
		return "rbw"
	case Finalized:
		return "finalized"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Replica describes one stored replica, as Stat and Report return it.
type Replica struct {
	ID    ID
	State State
	// Length is the number of bytes a reader may read: the whole replica when
	// finalized, the synced (durable and visible) prefix when being written.
	Length int64
	// DiskBytes is the space the replica takes on its DataNode (data plus
	// checksums), for reports and quotas; 0 if the implementation cannot tell.
	DiskBytes int64
}

// Store keeps block replicas. All methods are safe for concurrent use; the
// operations on one replica are serialized by the Store, and a Writer is
// owned by the goroutine that obtained it (its methods must not be called
// concurrently with each other).
//
// Durability: a method that changes a replica's state (Finalize, Recover,
// OpenAppend, Truncate) returns only once the change is on stable storage:
// after a crash the replica is in the new state or, for an operation cut
// short, in a state from which Recover produces a correct prefix. Delete is
// not made durable by itself: after a crash a deleted replica may reappear,
// and the block report lists it as an orphan for the engine to delete again.
//
// Errors wrap the package's sentinels (ErrNotFound, ...) and name the
// operation and the replica; test them with errors.Is. A cancelled context
// returns its error before the operation changes anything.
type Store interface {
	// Create starts a new replica in state BeingWritten and returns its
	// writer. ErrExists if the block id has a replica in any state, with any
	// generation stamp.
	Create(ctx context.Context, id ID) (Writer, error)

	// OpenAppend reopens a replica for writing at its end under newGenStamp,
	// which must be larger than id.GenStamp (ErrBadState otherwise). A
	// finalized replica goes back to BeingWritten; a being-written replica
	// with no open writer (closed, or left by a crash) is first cut to the
	// longest prefix whose checksums verify, as Recover would. ErrBadState if
	// a writer is open. Afterwards the replica is named (id.Block,
	// newGenStamp) and the old ID names nothing. The checksum of a partial
	// last chunk is continued, so appended replicas verify like written ones.
	OpenAppend(ctx context.Context, id ID, newGenStamp uint64) (Writer, error)

	// Read streams length bytes from offset (length < 0: to the end). A
	// finalized replica can be read whole; a being-written one up to the
	// length of its last Sync (ErrBadState beyond it). A range outside a
	// finalized replica is ErrRange. Every 512-byte chunk the range touches
	// is verified against its CRC32C before any of its bytes are returned;
	// a mismatch ends the stream with a *CorruptError (errors.Is ErrCorrupt)
	// naming the block and the chunk's offset, never with wrong bytes.
	//
	// The stream reads the bytes as they were when Read was called, even if
	// the replica is appended to meanwhile; if the replica is truncated or
	// deleted under it, it may end with an error wrapping ErrBadState or
	// ErrNotFound. The caller must Close it. The context bounds the whole
	// stream: each Read of the stream checks it.
	Read(ctx context.Context, id ID, offset, length int64) (io.ReadCloser, error)

	// Recover is HDFS lease recovery for one replica: it stops the replica's
	// writer if one is open (its later calls fail with ErrBadState), cuts a
	// being-written replica to the longest prefix whose chunks all verify,
	// which is never shorter than its last Sync, finalizes it under
	// newGenStamp and returns that length. A replica already finalized under
	// id is renamed to newGenStamp and keeps its length, so a recovery that
	// is retried after a crash of its caller still succeeds.
	Recover(ctx context.Context, id ID, newGenStamp uint64) (length int64, err error)

	// Truncate cuts a finalized replica to newLength (ErrRange if longer than
	// the replica) and renames it to newGenStamp (> id.GenStamp). The
	// replica stays finalized. Implementations may truncate in place or copy;
	// blocks/local truncates in place. A crash part way leaves the replica
	// being written under newGenStamp with a length of at least newLength:
	// the caller recovers it and truncates again.
	Truncate(ctx context.Context, id ID, newLength int64, newGenStamp uint64) error

	// Delete removes the replica named id in any state; an open writer of it
	// fails afterwards. Deleting a replica that does not exist (or exists
	// under another generation stamp) is not an error: the engine deletes
	// after the transaction that dropped the block row committed, and may
	// repeat the delete after a crash.
	Delete(ctx context.Context, id ID) error

	// Stat describes the replica named id (ErrNotFound if none).
	Stat(ctx context.Context, id ID) (Replica, error)

	// Report calls fn for every replica in the store, in increasing block id
	// order, from a snapshot taken when Report starts (the block report a
	// DataNode sends; fsck compares it with the store's rows). fn is called
	// without locks held and may call the Store; an error from fn stops the
	// report and is returned.
	Report(ctx context.Context, fn func(Replica) error) error

	// Checksum returns the replica's block checksum for HDFS's
	// MD5-of-MD5-of-CRC32C file checksum. The replica must be finalized
	// (ErrBadState otherwise). Like HDFS it digests the stored checksums
	// without reading the data.
	Checksum(ctx context.Context, id ID) (BlockChecksum, error)

	// Close releases the store. Open writers stop: bytes they wrote but did
	// not Sync may be lost, their replicas stay being written. Later calls
	// return ErrClosed. Close is idempotent.
	Close() error
}

// Writer appends bytes to a replica being written. It is owned by one
// goroutine. Bytes are buffered: Write returning nil means the Store has
// them, not that they are durable or visible to readers; Sync makes them
// both. After Finalize, Abort or Close the writer is finished and its
// methods return ErrClosed (Abort and Close return nil when repeated).
type Writer interface {
	io.Writer

	// Sync makes every byte written so far durable, with its checksums: after
	// Sync returns nil they survive kill -9 and power loss (as far as the
	// disk honours fsync), Recover keeps them, and readers of the
	// being-written replica may read them.
	Sync(ctx context.Context) error

	// Len is the replica's length including bytes written and not yet
	// synced.
	Len() int64

	// Finalize syncs, then makes the replica finalized and immutable, and
	// returns its length. The state change is durable when it returns.
	Finalize(ctx context.Context) (length int64, err error)

	// Abort discards the replica (HDFS deletes a failed pipeline's replica).
	Abort() error

	// Close stops writing without finalizing: the replica stays being
	// written, its synced bytes readable, and Recover or OpenAppend can take
	// it up. Unsynced bytes may or may not survive.
	Close() error
}

// Corrupter is an optional capability of a Store, found by type assertion,
// for tests and fault injection: Corrupt flips the stored byte at offset of
// the replica's data, leaving its checksums as they are, so that the next
// read of that chunk fails with ErrCorrupt. The conformance suite needs it.
type Corrupter interface {
	Corrupt(ctx context.Context, id ID, offset int64) error
}

// LengthRecoverer is an optional capability of a Store, found by type
// assertion: HDFS's updateReplicaUnderRecovery, the second step of block
// recovery. RecoverTo does what Recover does (stop the writer, cut a
// being-written replica to its verified prefix) and then cuts the replica
// to length, finalized under newGenStamp (> id.GenStamp), in one step, so
// that the replicas of a block agree on the length the NameNode chose. A
// replica shorter than length is ErrRange (and left as it was, or cut to
// its verified prefix); a replica already finalized under id is cut and
// renamed the same way.
type LengthRecoverer interface {
	RecoverTo(ctx context.Context, id ID, newGenStamp uint64, length int64) error
}
