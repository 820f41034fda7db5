package webhdfs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"net/http"

	"github.com/nimbus-fs/nimbus/meta"
)

// bytesPerCRC is HDFS's dfs.bytes-per-checksum: one CRC32C per 512 bytes.
const bytesPerCRC = 512

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileChecksummer computes HDFS's MD5MD5CRC32C file checksum over a stream:
// each block's MD5 is taken over the big-endian CRC32C of each 512-byte chunk
// of that block (the last chunk of a block may be short), and the file's MD5
// over the concatenated block MD5s zero-padded to 32·2^k bytes, as DataNodes
// and DFSClient compute it (the padding is a quirk of DFSClient that every
// HDFS release keeps; tests/hadoop/hdfs_checksum.py was checked against HDFS).
// Feed it with Write; it keeps O(1) state.
type fileChecksummer struct {
	blockSize int64
	blocks    int
	inBlock   int64 // bytes of the current block consumed
	chunkCRC  uint32
	inChunk   int // bytes of the current chunk consumed
	blockMD5  hash.Hash
	fileMD5   hash.Hash
	crcBuf    [4]byte
}

func newFileChecksummer(blockSize int64) *fileChecksummer {
	return &fileChecksummer{blockSize: blockSize, blockMD5: md5.New(), fileMD5: md5.New()}
}

func (c *fileChecksummer) endChunk() {
	if c.inChunk == 0 {
		return
	}
	binary.BigEndian.PutUint32(c.crcBuf[:], c.chunkCRC)
	c.blockMD5.Write(c.crcBuf[:])
	c.chunkCRC, c.inChunk = 0, 0
}

func (c *fileChecksummer) endBlock() {
	c.endChunk()
	if c.inBlock == 0 {
		return
	}
	c.fileMD5.Write(c.blockMD5.Sum(nil))
	c.blockMD5.Reset()
	c.blocks++
	c.inBlock = 0
}

// Write consumes the next bytes of the file. It never fails.
func (c *fileChecksummer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		take := min(len(p), bytesPerCRC-c.inChunk)
		if left := c.blockSize - c.inBlock; int64(take) > left {
			take = int(left)
		}
		c.chunkCRC = crc32.Update(c.chunkCRC, castagnoli, p[:take])
		c.inChunk += take
		c.inBlock += int64(take)
		p = p[take:]
		if c.inBlock == c.blockSize {
			c.endBlock()
		} else if c.inChunk == bytesPerCRC {
			c.endChunk()
		}
	}
	return n, nil
}

// result returns the algorithm name and the 28 bytes of
// MD5MD5CRC32FileChecksum.write: bytesPerCRC (int32), crcPerBlock (int64),
// MD5 — all big-endian.
func (c *fileChecksummer) result() fileChecksumJSON {
	c.endBlock()
	var b [28]byte
	if c.blocks == 0 {
		// HDFS-4090: a zero-length file has no block; DFSClient reports the
		// MD5 of 32 zero bytes with bytesPerCRC 0 and the CRC32 (gzip) type.
		sum := md5.Sum(make([]byte, 32))
		copy(b[12:], sum[:])
		return fileChecksumJSON{Algorithm: "MD5-of-0MD5-of-0CRC32", Bytes: hex.EncodeToString(b[:]), Length: len(b)}
	}
	// DFSClient takes crcPerBlock from the first block only when the file has
	// more than one block; for a single block it stays 0.
	var crcPerBlock int64
	if c.blocks > 1 {
		crcPerBlock = (c.blockSize + bytesPerCRC - 1) / bytesPerCRC
	}
	// DFSClient takes the MD5 of the whole backing array of the
	// DataOutputBuffer the block MD5s were written to: it starts at 32 bytes
	// and doubles, so the block MD5s are zero-padded to 32·2^k bytes.
	written, capacity := 16*c.blocks, 32
	for capacity < written {
		capacity *= 2
	}
	c.fileMD5.Write(make([]byte, capacity-written))
	binary.BigEndian.PutUint32(b[0:4], bytesPerCRC)
	binary.BigEndian.PutUint64(b[4:12], uint64(crcPerBlock))
	copy(b[12:], c.fileMD5.Sum(nil))
	return fileChecksumJSON{
		Algorithm: fmt.Sprintf("MD5-of-%dMD5-of-%dCRC32C", crcPerBlock, bytesPerCRC),
		Bytes:     hex.EncodeToString(b[:]),
		Length:    len(b),
	}
}

// getFileChecksum is two-step like HDFS (whose NameNode redirects it to a
// DataNode, and Hadoop's client expects the redirect); the data step reads
// the file in ReadChunk ranges and checksums it with the file's block size.
func (h *Handler) getFileChecksum(rq *request) error {
	st, err := h.fileOnly(rq)
	if err != nil {
		return err
	}
	if data, err := isDataStep(rq); err != nil || !data {
		if err != nil {
			return err
		}
		return h.redirect(rq)
	}
	bs := st.BlockSize
	if bs <= 0 {
		bs = max(st.Length, 1)
	}
	c := newFileChecksummer(bs)
	for pos := int64(0); pos < st.Length; {
		chunk, err := h.fs.Read(rq.ctx(), rq.user, rq.path, pos, min(int64(h.cfg.ReadChunk), st.Length-pos))
		if err != nil {
			return err
		}
		if len(chunk) == 0 {
			return meta.Errorf(rq.op.lower, rq.path, meta.ErrBusy, "file changed while being checksummed at offset %d", pos)
		}
		c.Write(chunk)
		pos += int64(len(chunk))
	}
	return writeJSON(rq.w, http.StatusOK, map[string]fileChecksumJSON{"FileChecksum": c.result()})
}
