package blocks

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

func TestChunkCRCsMD5(t *testing.T) {
	data := make([]byte, 1300)
	for i := range data {
		data[i] = byte(i)
	}
	var crcs []byte
	for _, r := range [][2]int{{0, 512}, {512, 1024}, {1024, 1300}} {
		crcs = binary.BigEndian.AppendUint32(crcs, crc32.Checksum(data[r[0]:r[1]], crc32.MakeTable(crc32.Castagnoli)))
	}
	got := ChunkCRCsMD5(data)
	if got.MD5 != md5.Sum(crcs) || got.CRCCount != 3 || got.Length != 1300 || got.BytesPerCRC != 512 {
		t.Fatalf("ChunkCRCsMD5 = %+v", got)
	}
	if e := ChunkCRCsMD5(nil); e.CRCCount != 0 || e.MD5 != md5.Sum(nil) {
		t.Fatalf("ChunkCRCsMD5(nil) = %+v", e)
	}
}

func TestFileChecksum(t *testing.T) {
	a, b := ChunkCRCsMD5([]byte("first block")), ChunkCRCsMD5([]byte("second"))
	a.CRCCount = 262144 // a full 128 MB block
	one := FileChecksumOf([]BlockChecksum{a})
	if one.CRCPerBlock != 0 || one.Algorithm() != "MD5-of-0MD5-of-512CRC32C" || one.MD5 != md5.Sum(a.MD5[:]) {
		t.Fatalf("one block: %+v %s", one, one.Algorithm())
	}
	two := FileChecksumOf([]BlockChecksum{a, b})
	if two.CRCPerBlock != 262144 || two.Algorithm() != "MD5-of-262144MD5-of-512CRC32C" ||
		two.MD5 != md5.Sum(append(a.MD5[:], b.MD5[:]...)) {
		t.Fatalf("two blocks: %+v %s", two, two.Algorithm())
	}
	h := two.Hex()
	if len(two.Bytes()) != 28 || h[:8] != "00000200" || h[8:24] != "0000000000040000" || h[24:] != hex.EncodeToString(two.MD5[:]) {
		t.Fatalf("Bytes = %s", h)
	}
}

func TestErrors(t *testing.T) {
	err := fmt.Errorf("read: %w", &CorruptError{ID: ID{Block: 5, GenStamp: 2}, Offset: 1024, Want: 1, Got: 2})
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Offset != 1024 {
		t.Fatalf("CorruptError does not unwrap: %v", err)
	}
	if want := "read: blocks: blk_5_2: checksum mismatch in chunk at offset 1024 (stored 00000001, computed 00000002)"; err.Error() != want {
		t.Fatalf("message %q", err.Error())
	}
	if BeingWritten.String() != "rbw" || Finalized.String() != "finalized" {
		t.Fatal("State names")
	}
}
