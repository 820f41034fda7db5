package blocks

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
)

// Castagnoli is the CRC32C table every implementation uses; crc32.Update
// with it runs on the CPU's CRC32 instructions where they exist.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BlockChecksum is one replica's contribution to HDFS's file checksum.
type BlockChecksum struct {
	// Length of the replica in bytes.
	Length int64
	// BytesPerCRC is the chunk size (ChunkSize).
	BytesPerCRC int
	// CRCCount is the number of chunk checksums digested: ceil(Length/BytesPerCRC).
	CRCCount int64
	// MD5 is the MD5 of the big-endian CRC32C values of the chunks, in order
	// (the last one over a partial chunk if Length is not a multiple).
	MD5 [16]byte
}

// ChunkCRCsMD5 computes a BlockChecksum from data held in memory; tests and
// small inline files use it. It agrees with what a Store's Checksum returns
// for a replica holding data.
func ChunkCRCsMD5(data []byte) BlockChecksum {
	h := md5.New()
	var be [4]byte
	var n int64
	for off := 0; off < len(data); off += ChunkSize {
		end := min(off+ChunkSize, len(data))
		binary.BigEndian.PutUint32(be[:], crc32.Checksum(data[off:end], Castagnoli))
		h.Write(be[:])
		n++
	}
	bc := BlockChecksum{Length: int64(len(data)), BytesPerCRC: ChunkSize, CRCCount: n}
	copy(bc.MD5[:], h.Sum(nil))
	return bc
}

// FileChecksum is HDFS's MD5MD5CRC32CastagnoliFileChecksum, what
// GETFILECHECKSUM returns.
type FileChecksum struct {
	BytesPerCRC int32
	// CRCPerBlock is the first block's CRC count when the file has more than
	// one block, else 0 (as HDFS's FileChecksumHelper computes it).
	CRCPerBlock int64
	// MD5 is the MD5 of the concatenated block MD5s.
	MD5 [16]byte
}

// FileChecksumOf combines the checksums of a file's blocks, in file order.
func FileChecksumOf(blocks []BlockChecksum) FileChecksum {
	h := md5.New()
	for _, b := range blocks {
		h.Write(b.MD5[:])
	}
	fc := FileChecksum{BytesPerCRC: ChunkSize}
	if len(blocks) > 1 {
		fc.CRCPerBlock = blocks[0].CRCCount
	}
	copy(fc.MD5[:], h.Sum(nil))
	return fc
}

// Algorithm is the name WebHDFS reports, e.g. "MD5-of-0MD5-of-512CRC32C".
func (f FileChecksum) Algorithm() string {
	return fmt.Sprintf("MD5-of-%dMD5-of-%dCRC32C", f.CRCPerBlock, f.BytesPerCRC)
}

// Bytes is the Writable serialization HDFS reports in WebHDFS's "bytes"
// (hex): bytesPerCRC (int32), crcPerBlock (int64), the MD5, all big-endian;
// 28 bytes.
func (f FileChecksum) Bytes() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(f.BytesPerCRC))
	b = binary.BigEndian.AppendUint64(b, uint64(f.CRCPerBlock))
	return append(b, f.MD5[:]...)
}

// Hex is Bytes in lower-case hex, WebHDFS's FileChecksum.bytes field.
func (f FileChecksum) Hex() string { return hex.EncodeToString(f.Bytes()) }
