package store

import (
	"encoding/binary"
	"fmt"
)

// Block is a row of the block table: block number Index of a file kept in
// block storage. The replica holding its bytes is named (ID, GenStamp) in the
// blocks.Store. Rows change in the same transaction as their inode.
type Block struct {
	File     uint64 // the file's inode id (from the key)
	Index    uint32 // position in the file (from the key)
	ID       uint64 // block id, never reused
	GenStamp uint64 // generation stamp of the replica; bumped by append, truncate, recovery
	// Length is the block's length once Complete; while the block is being
	// written it is the length at the last point the engine recorded.
	Length   int64
	Complete bool
}

// EncodeBlock appends the value of b (without its key) to dst.
func EncodeBlock(dst []byte, b *Block) []byte {
	var flags byte
	if b.Complete {
		flags = 1
	}
	dst = append(dst, 1, flags)
	dst = binary.AppendUvarint(dst, b.ID)
	dst = binary.AppendUvarint(dst, b.GenStamp)
	return binary.AppendVarint(dst, b.Length)
}

// DecodeBlock decodes a block row.
func DecodeBlock(key, value []byte, b *Block) error {
	file, index, ok := DecodeBlockKey(key)
	if !ok {
		return fmt.Errorf("%w: %s is not a block key", ErrCorrupt, FormatKey(key))
	}
	d := decoder{b: value}
	if v := d.byte(); v != 1 {
		return fmt.Errorf("%w: %s: unknown block format %d", ErrCorrupt, FormatKey(key), v)
	}
	flags := d.byte()
	*b = Block{File: file, Index: index, Complete: flags&1 != 0, ID: d.uvarint(), GenStamp: d.uvarint(), Length: d.varint()}
	if d.err != nil || len(d.b) != 0 || b.Length < 0 {
		return fmt.Errorf("%w: %s: malformed block row", ErrCorrupt, FormatKey(key))
	}
	return nil
}
