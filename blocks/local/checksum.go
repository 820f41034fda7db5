package local

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nimbus-fs/nimbus/blocks"
)

// Checksum implements blocks.Store: the MD5 of the stored checksums of a
// finalized replica, read from its meta file in one pass (the data is not
// read, as in HDFS).
func (s *Store) Checksum(ctx context.Context, id blocks.ID) (blocks.BlockChecksum, error) {
	if err := ctx.Err(); err != nil {
		return blocks.BlockChecksum{}, err
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return blocks.BlockChecksum{}, opErr("checksum", id, err)
	}
	n, state := r.length, r.state
	var meta *os.File
	if state == blocks.Finalized {
		meta, err = os.Open(filepath.Join(s.dir, r.relDir(), metaName(id)))
	}
	r.mu.Unlock() // the open file keeps the checksums even if the replica moves
	if state != blocks.Finalized {
		return blocks.BlockChecksum{}, opErr("checksum", id, fmt.Errorf("%w: replica is %s, not finalized", blocks.ErrBadState, state))
	}
	if err != nil {
		return blocks.BlockChecksum{}, opErr("checksum", id, err)
	}
	defer meta.Close()
	h := md5.New()
	bufp := s.getBuf()
	defer s.putBuf(bufp)
	buf := *bufp
	want := crcSize * chunks(n)
	for off := int64(0); off < want; {
		k := min(int64(len(buf)), want-off)
		if _, err := meta.ReadAt(buf[:k], metaHeaderSize+off); err != nil {
			return blocks.BlockChecksum{}, opErr("checksum", id, fmt.Errorf("%w: meta file: %v", blocks.ErrCorrupt, err))
		}
		h.Write(buf[:k])
		off += k
	}
	bc := blocks.BlockChecksum{Length: n, BytesPerCRC: bytesPerCRC, CRCCount: chunks(n)}
	copy(bc.MD5[:], h.Sum(nil))
	return bc, nil
}
