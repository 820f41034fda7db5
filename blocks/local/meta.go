package local

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nimbus-fs/nimbus/blocks"
)

// The meta file is HDFS's BlockMetadataHeader followed by the checksums:
//
//	offset 0  uint16  version            1
//	offset 2  uint8   checksum type      2 (CRC32C)
//	offset 3  uint32  bytes per checksum 512
//	offset 7  uint32  CRC32C of chunk 0, chunk 1, ... (big-endian)
//
// A replica of n bytes has ceil(n/512) checksums; the last covers a partial
// chunk when n is not a multiple of 512. A being-written replica may have
// more checksums than its durable length needs (Recover cuts them).
const (
	metaVersion     = 1
	checksumCRC32C  = 2
	metaHeaderSize  = 7
	crcSize         = 4
	bytesPerCRC     = blocks.ChunkSize
	chunkShift      = 9 // log2(bytesPerCRC)
	chunkOffsetMask = bytesPerCRC - 1
)

// ErrMetaFormat is wrapped by ParseMeta's errors.
var ErrMetaFormat = errors.New("local: bad meta file")

// MetaHeader is the decoded header of a meta file.
type MetaHeader struct {
	Version          uint16
	ChecksumType     uint8
	BytesPerChecksum uint32
}

// metaHeader is the only header this package writes.
var metaHeader = MetaHeader{Version: metaVersion, ChecksumType: checksumCRC32C, BytesPerChecksum: bytesPerCRC}

// AppendMetaHeader appends h's 7-byte encoding to b.
func AppendMetaHeader(b []byte, h MetaHeader) []byte {
	b = binary.BigEndian.AppendUint16(b, h.Version)
	b = append(b, h.ChecksumType)
	return binary.BigEndian.AppendUint32(b, h.BytesPerChecksum)
}

// ParseMeta decodes a meta file's bytes: the header, which must be the one
// this package writes (version 1, CRC32C, 512 bytes per checksum), and the
// checksums that follow, returned as a sub-slice of b (4 big-endian bytes
// each). A trailing partial checksum is an error.
func ParseMeta(b []byte) (MetaHeader, []byte, error) {
	if len(b) < metaHeaderSize {
		return MetaHeader{}, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrMetaFormat, len(b), metaHeaderSize)
	}
	h := MetaHeader{
		Version:          binary.BigEndian.Uint16(b[0:2]),
		ChecksumType:     b[2],
		BytesPerChecksum: binary.BigEndian.Uint32(b[3:7]),
	}
	if h != metaHeader {
		return h, nil, fmt.Errorf("%w: header version %d, checksum type %d, %d bytes per checksum; want %d, %d, %d",
			ErrMetaFormat, h.Version, h.ChecksumType, h.BytesPerChecksum, metaVersion, checksumCRC32C, bytesPerCRC)
	}
	crcs := b[metaHeaderSize:]
	if len(crcs)%crcSize != 0 {
		return h, nil, fmt.Errorf("%w: %d checksum bytes, not a multiple of %d", ErrMetaFormat, len(crcs), crcSize)
	}
	return h, crcs, nil
}

// chunks is the number of checksums of n data bytes.
func chunks(n int64) int64 { return (n + bytesPerCRC - 1) >> chunkShift }

// metaSize is the size of the meta file of a replica of n bytes.
func metaSize(n int64) int64 { return metaHeaderSize + crcSize*chunks(n) }

// crcOffset is where chunk i's checksum lives in the meta file.
func crcOffset(i int64) int64 { return metaHeaderSize + crcSize*i }
