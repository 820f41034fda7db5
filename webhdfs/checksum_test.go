package webhdfs

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
	"testing"
)

// referenceChecksum computes HDFS's MD5MD5CRC32C the plain way, whole slices
// at a time, to check the streaming implementation against.
func referenceChecksum(data []byte, blockSize int) (string, string) {
	if len(data) == 0 {
		sum := md5.Sum(make([]byte, 32))
		return "MD5-of-0MD5-of-0CRC32", "000000000000000000000000" + hex.EncodeToString(sum[:])
	}
	var blockMD5s []byte
	nblocks := 0
	for start := 0; start < len(data); start += blockSize {
		blk := data[start:min(start+blockSize, len(data))]
		var crcs []byte
		for c := 0; c < len(blk); c += 512 {
			crcs = binary.BigEndian.AppendUint32(crcs, crc32.Checksum(blk[c:min(c+512, len(blk))], crc32.MakeTable(crc32.Castagnoli)))
		}
		s := md5.Sum(crcs)
		blockMD5s = append(blockMD5s, s[:]...)
		nblocks++
	}
	cpb := 0
	if nblocks > 1 {
		cpb = (blockSize + 511) / 512
	}
	padded := 32
	for padded < len(blockMD5s) {
		padded *= 2
	}
	file := md5.Sum(append(blockMD5s, make([]byte, padded-len(blockMD5s))...))
	b := binary.BigEndian.AppendUint32(nil, 512)
	b = binary.BigEndian.AppendUint64(b, uint64(cpb))
	b = append(b, file[:]...)
	return fmt.Sprintf("MD5-of-%dMD5-of-512CRC32C", cpb), hex.EncodeToString(b)
}

func TestChecksumKnownValues(t *testing.T) {
	// MD5 of 32 zero bytes: what HDFS reports for every empty file.
	c := newFileChecksummer(128 << 20)
	got := c.result()
	if got.Algorithm != "MD5-of-0MD5-of-0CRC32" || got.Bytes != "00000000000000000000000070bc8f4b72a86921468bf8e8441dce51" || got.Length != 28 {
		t.Errorf("empty file checksum %+v", got)
	}
	// CRC32C of "123456789" is 0xe3069283 (RFC 3720's check value), so one
	// short block's MD5 is md5(e3069283).
	c = newFileChecksummer(128 << 20)
	c.Write([]byte("123456789"))
	blockMD5 := md5.Sum([]byte{0xe3, 0x06, 0x92, 0x83})
	fileMD5 := md5.Sum(append(blockMD5[:], make([]byte, 16)...)) // padded to 32 bytes
	want := "00000200" + "0000000000000000" + hex.EncodeToString(fileMD5[:])
	if got := c.result(); got.Bytes != want || got.Algorithm != "MD5-of-0MD5-of-512CRC32C" {
		t.Errorf("checksum of 123456789 = %+v, want bytes %s", got, want)
	}
}

func TestChecksumStreamingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 511, 512, 513, 1024, 4095, 4096, 10000, 70001} {
		for _, bs := range []int{512, 1024, 1536, 4096, 128 << 20} {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(rng.IntN(256))
			}
			c := newFileChecksummer(int64(bs))
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(3000))
				c.Write(rest[:n])
				rest = rest[n:]
			}
			got := c.result()
			alg, bytes := referenceChecksum(data, bs)
			if got.Algorithm != alg || got.Bytes != bytes {
				t.Errorf("size %d block %d: got %s %s, want %s %s", size, bs, got.Algorithm, got.Bytes, alg, bytes)
			}
		}
	}
}

func TestGetFileChecksumOverHTTP(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReadChunk = 777 // not a multiple of 512: chunks straddle reads
	e := newEnv(t, nil, &cfg)
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	e.put("u", "/f", string(data), "blocksize=1024")
	r := e.do("GET", "/f", "op=GETFILECHECKSUM", nil)
	if r.status != http.StatusTemporaryRedirect {
		t.Fatalf("first step %d %s", r.status, r.body)
	}
	r = e.doURL("GET", r.header.Get("Location"), nil, "")
	fc := r.json(t)["FileChecksum"].(map[string]any)
	alg, bytes := referenceChecksum(data, 1024)
	if fc["algorithm"] != alg || fc["bytes"] != bytes || fc["length"] != 28.0 {
		t.Errorf("FileChecksum %v, want %s %s", fc, alg, bytes)
	}
	e.do("PUT", "/d", "op=MKDIRS&user.name=u", nil)
	wantError(t, e.do("GET", "/d", "op=GETFILECHECKSUM", nil), 404, "FileNotFoundException")
}

// TestChecksumMatchesHDFSScript pins values printed by
// tests/hadoop/hdfs_checksum.py, which was checked against a real HDFS.
func TestChecksumMatchesHDFSScript(t *testing.T) {
	data := make([]byte, 70001)
	for i := range data {
		data[i] = byte((i*i + 7*i) >> 3)
	}
	cases := []struct {
		data      []byte
		blockSize int64
		alg, hex  string
	}{
		{data, 1024, "MD5-of-2MD5-of-512CRC32C", "000002000000000000000002338d7dcf215bd0792b849c4f387a4cf5"},
		{data, 1536, "MD5-of-3MD5-of-512CRC32C", "000002000000000000000003bedcea1f732cce450c544535329bacfd"},
		{data, 128 << 20, "MD5-of-0MD5-of-512CRC32C", "000002000000000000000000456a3a4cb32a5118a45bafbc89a1dc74"},
		{[]byte("123456789"), 128 << 20, "MD5-of-0MD5-of-512CRC32C", "0000020000000000000000002faa18fc1637e6b4bad7e0e91b200a4d"},
	}
	for _, c := range cases {
		cs := newFileChecksummer(c.blockSize)
		cs.Write(c.data)
		if got := cs.result(); got.Algorithm != c.alg || got.Bytes != c.hex {
			t.Errorf("%d bytes, block %d: %s %s, want %s %s", len(c.data), c.blockSize, got.Algorithm, got.Bytes, c.alg, c.hex)
		}
	}
}
