#!/usr/bin/env python3
"""HDFS's file checksum of a local file, as `hadoop fs -checksum` prints it for a replicated file
written with the given block size: MD5 of the (zero-padded, see below) per-block MD5s of the CRC32C of every 512-byte chunk
(MD5MD5CRC32FileChecksum with CRC32C). Usage: hdfs_checksum.py FILE BLOCKSIZE [BYTES_PER_CRC]
Prints: ALGORITHM<TAB>HEX  where HEX = bytesPerCRC (int32) + crcPerBlock (int64) + md5 (16 bytes),
the bytes of MD5MD5CRC32FileChecksum.getBytes()."""
import hashlib
import struct
import sys

POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def main():
    path, block_size = sys.argv[1], int(sys.argv[2])
    bpc = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    data = open(path, "rb").read()
    blocks = [data[i:i + block_size] for i in range(0, len(data), block_size)]
    block_md5s = b""
    for blk in blocks:
        crcs = b"".join(struct.pack(">I", crc32c(blk[j:j + bpc])) for j in range(0, len(blk), bpc))
        block_md5s += hashlib.md5(crcs).digest()
    # HDFS reports crcPerBlock only when the file has more than one block (taken from the first).
    crc_per_block = (len(blocks[0]) + bpc - 1) // bpc if len(blocks) > 1 else 0
    # HDFS's quirk (FileChecksumHelper: MD5Hash.digest(blockChecksumBuf.getData())): the file MD5 is
    # taken over the whole backing array of a DataOutputBuffer, which starts at 32 bytes and doubles,
    # so the concatenated block MD5s are zero-padded to 32 * 2^k bytes.
    cap = 32
    while cap < len(block_md5s):
        cap *= 2
    md5 = hashlib.md5(block_md5s + b"\0" * (cap - len(block_md5s))).digest()
    algo = "MD5-of-%dMD5-of-%dCRC32C" % (crc_per_block, bpc)
    if not blocks:
        # An empty file has no block to take the checksum type from: HDFS reports bytesPerCRC 0
        # and the default type CRC32 (MD5 of 32 zero bytes).
        bpc, algo = 0, "MD5-of-0MD5-of-0CRC32"
    print("%s\t%s" % (algo, (struct.pack(">iq", bpc, crc_per_block) + md5).hex()))


if __name__ == "__main__":
    main()
