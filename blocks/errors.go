package blocks

import (
	"errors"
	"fmt"
)

// Errors of the seam. Implementations wrap them with the operation and the
// replica; callers test with errors.Is.
var (
	// ErrNotFound: no replica has the given block id and generation stamp.
	ErrNotFound = errors.New("blocks: replica not found")
	// ErrExists: Create of a block id that already has a replica.
	ErrExists = errors.New("blocks: replica exists")
	// ErrCorrupt: stored bytes do not match their checksum. Returned as a
	// *CorruptError.
	ErrCorrupt = errors.New("blocks: checksum mismatch")
	// ErrClosed: the Store or the Writer was closed.
	ErrClosed = errors.New("blocks: closed")
	// ErrBadState: the replica is not in a state that allows the operation:
	// a read beyond a being-written replica's synced length, an append to a
	// replica that has a writer, a generation stamp that does not grow, a
	// writer stopped by Recover or Delete.
	ErrBadState = errors.New("blocks: replica in wrong state")
	// ErrRange: an offset or length outside a finalized replica.
	ErrRange = errors.New("blocks: range outside replica")
)

// CorruptError reports a chunk whose bytes do not match its stored CRC32C.
// It wraps ErrCorrupt.
type CorruptError struct {
	ID ID
	// Offset is the offset in the block of the first byte of the bad chunk.
	Offset int64
	// Want is the stored checksum, Got the checksum of the stored bytes.
	Want, Got uint32
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("blocks: %s: checksum mismatch in chunk at offset %d (stored %08x, computed %08x)",
		e.ID, e.Offset, e.Want, e.Got)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
