package local

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/nimbus-fs/nimbus/blocks"
)

// Recover implements blocks.Store.
func (s *Store) Recover(ctx context.Context, id blocks.ID, newGenStamp uint64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if newGenStamp <= id.GenStamp {
		return 0, opErr("recover", id, fmt.Errorf("%w: new generation stamp %d is not above %d", blocks.ErrBadState, newGenStamp, id.GenStamp))
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return 0, opErr("recover", id, err)
	}
	defer r.mu.Unlock()
	newID := blocks.ID{Block: id.Block, GenStamp: newGenStamp}
	if r.state == blocks.Finalized {
		dir := filepath.Join(s.dir, r.relDir())
		if err := os.Rename(filepath.Join(dir, metaName(id)), filepath.Join(dir, metaName(newID))); err != nil {
			return 0, opErr("recover", id, err)
		}
		if err := s.syncDir(r.relDir()); err != nil {
			return 0, opErr("recover", id, err)
		}
		s.publish(func() { r.id = newID })
		return r.length, nil
	}
	if w := r.writer; w != nil {
		w.stop(fmt.Errorf("%w: writer stopped by recovery of %s", blocks.ErrBadState, id))
	}
	n, tail, err := s.cutToVerified(r)
	if err != nil {
		return 0, opErr("recover", id, err)
	}
	s.publish(func() { r.length, r.tailCRC, r.tailKnown = n, tail, true })
	if err := s.moveToFinalized(r, newGenStamp); err != nil {
		return 0, opErr("recover", id, err)
	}
	s.m.recoveries.Inc()
	s.log.Info("blocks/local: recovered replica", "block", id.Block, "genstamp", newGenStamp, "length", n)
	return n, nil
}

// OpenAppend implements blocks.Store.
func (s *Store) OpenAppend(ctx context.Context, id blocks.ID, newGenStamp uint64) (blocks.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if newGenStamp <= id.GenStamp {
		return nil, opErr("append", id, fmt.Errorf("%w: new generation stamp %d is not above %d", blocks.ErrBadState, newGenStamp, id.GenStamp))
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return nil, opErr("append", id, err)
	}
	defer r.mu.Unlock()
	if r.writer != nil {
		return nil, opErr("append", id, fmt.Errorf("%w: replica has an open writer", blocks.ErrBadState))
	}
	newID := blocks.ID{Block: id.Block, GenStamp: newGenStamp}
	var n int64
	var tail uint32
	if r.state == blocks.Finalized {
		n = r.length
		// Verify the partial last chunk before continuing its checksum, so
		// that an append never launders corrupt bytes into a valid chunk.
		if tail, err = s.chunkPrefixCRC(r, n); err != nil {
			return nil, opErr("append", id, err)
		}
		if err := s.moveToRBW(r, newGenStamp); err != nil {
			return nil, opErr("append", id, err)
		}
	} else {
		if n, tail, err = s.cutToVerified(r); err != nil {
			return nil, opErr("append", id, err)
		}
		dir := filepath.Join(s.dir, rbwDir)
		if err := os.Rename(filepath.Join(dir, metaName(id)), filepath.Join(dir, metaName(newID))); err != nil {
			return nil, opErr("append", id, err)
		}
		if err := s.syncDir(rbwDir); err != nil {
			return nil, opErr("append", id, err)
		}
		s.publish(func() { r.id = newID })
	}
	dir := filepath.Join(s.dir, rbwDir)
	data, err := os.OpenFile(filepath.Join(dir, dataName(id.Block)), os.O_RDWR, 0)
	if err != nil {
		return nil, opErr("append", newID, err)
	}
	meta, err := os.OpenFile(filepath.Join(dir, metaName(newID)), os.O_RDWR, 0)
	if err != nil {
		data.Close()
		return nil, opErr("append", newID, err)
	}
	w := s.newWriter(r, data, meta, n, tail)
	w.dirSynced = true
	s.publish(func() { r.writer, r.length, r.tailCRC, r.tailKnown = w, n, tail, true })
	return w, nil
}

// Truncate implements blocks.Store: in place, under the new generation
// stamp. The replica passes through rbw; the checksum of the new partial
// last chunk is written and the meta file cut before the data file, so that
// at every step a crash leaves a replica whose verified prefix is at least
// newLength.
func (s *Store) Truncate(ctx context.Context, id blocks.ID, newLength int64, newGenStamp uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if newGenStamp <= id.GenStamp {
		return opErr("truncate", id, fmt.Errorf("%w: new generation stamp %d is not above %d", blocks.ErrBadState, newGenStamp, id.GenStamp))
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return opErr("truncate", id, err)
	}
	defer r.mu.Unlock()
	if r.state != blocks.Finalized {
		return opErr("truncate", id, fmt.Errorf("%w: replica is %s, not finalized", blocks.ErrBadState, r.state))
	}
	if newLength < 0 || newLength > r.length {
		return opErr("truncate", id, fmt.Errorf("%w: new length %d, replica has %d bytes", blocks.ErrRange, newLength, r.length))
	}
	tail, err := s.chunkPrefixCRC(r, newLength)
	if err != nil {
		return opErr("truncate", id, err)
	}
	if err := s.moveToRBW(r, newGenStamp); err != nil {
		return opErr("truncate", id, err)
	}
	if err := s.cutFiles(r, newLength, tail); err != nil {
		return opErr("truncate", r.id, err)
	}
	s.publish(func() { r.length, r.tailCRC, r.tailKnown = newLength, tail, true })
	if err := s.moveToFinalized(r, newGenStamp); err != nil {
		return opErr("truncate", r.id, err)
	}
	return nil
}

// cutFiles cuts r's rbw files to n bytes whose partial last chunk has
// checksum tail: checksum, meta cut, meta sync, data cut, data sync.
func (s *Store) cutFiles(r *replica, n int64, tail uint32) error {
	dir := filepath.Join(s.dir, rbwDir)
	meta, err := os.OpenFile(filepath.Join(dir, metaName(r.id)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer meta.Close()
	if n&chunkOffsetMask != 0 {
		var b [crcSize]byte
		binary.BigEndian.PutUint32(b[:], tail)
		if _, err := meta.WriteAt(b[:], crcOffset(n>>chunkShift)); err != nil {
			return err
		}
	}
	if err := meta.Truncate(metaSize(n)); err != nil {
		return err
	}
	if err := meta.Sync(); err != nil {
		return err
	}
	s.m.fsyncs.Inc()
	data, err := os.OpenFile(filepath.Join(dir, dataName(r.id.Block)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer data.Close()
	if err := data.Truncate(n); err != nil {
		return err
	}
	if err := data.Sync(); err != nil {
		return err
	}
	s.m.fsyncs.Inc()
	return nil
}

// chunkPrefixCRC verifies the stored chunk that contains offset n of a
// replica whose files are in place (r.mu held), and returns the CRC32C of
// its first n%512 bytes (0 if n is a multiple of 512).
func (s *Store) chunkPrefixCRC(r *replica, n int64) (uint32, error) {
	if n&chunkOffsetMask == 0 {
		return 0, nil
	}
	dir := filepath.Join(s.dir, r.relDir())
	start := n &^ chunkOffsetMask
	end := min(start+bytesPerCRC, r.length)
	var chunk [bytesPerCRC]byte
	var stored [crcSize]byte
	if err := readAt(filepath.Join(dir, dataName(r.id.Block)), chunk[:end-start], start); err != nil {
		return 0, err
	}
	if err := readAt(filepath.Join(dir, metaName(r.id)), stored[:], crcOffset(n>>chunkShift)); err != nil {
		return 0, err
	}
	want := binary.BigEndian.Uint32(stored[:])
	if got := crc32.Checksum(chunk[:end-start], castagnoli); got != want {
		s.m.checksumFailures.Inc()
		return 0, &blocks.CorruptError{ID: r.id, Offset: start, Want: want, Got: got}
	}
	return crc32.Checksum(chunk[:n-start], castagnoli), nil
}

func readAt(path string, b []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(b, off); err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: %s is shorter than %d bytes", blocks.ErrCorrupt, filepath.Base(path), off+int64(len(b)))
		}
		return err
	}
	return nil
}

// cutToVerified cuts r's rbw files to their longest verified prefix, makes
// the cut durable and returns its length and the checksum of its partial
// last chunk. r.mu is held and r has no writer.
func (s *Store) cutToVerified(r *replica) (int64, uint32, error) {
	dir := filepath.Join(s.dir, rbwDir)
	data, err := os.Open(filepath.Join(dir, dataName(r.id.Block)))
	if err != nil {
		return 0, 0, err
	}
	defer data.Close()
	flag := os.O_RDWR
	if s.cfg.ReadOnly {
		flag = os.O_RDONLY
	}
	meta, err := os.OpenFile(filepath.Join(dir, metaName(r.id)), flag, 0)
	if err != nil {
		return 0, 0, err
	}
	defer meta.Close()
	n, tail, err := s.verifiedLength(data, meta)
	if err != nil || s.cfg.ReadOnly {
		return n, tail, err // read-only: the length found, files left as they are
	}
	if err := s.cutFiles(r, n, tail); err != nil {
		return 0, 0, err
	}
	return n, tail, nil
}

// verifiedLength returns the length of the longest prefix of a being-written
// replica whose chunks all verify, and the CRC32C of its partial last chunk.
// A chunk that does not verify as a whole may verify as a prefix: its
// stored checksum was written when the chunk was shorter (the last Sync
// ended inside it), so the search tries every prefix of the last chunk.
// A meta file cut inside its header (a crash right after Create) is
// rewritten: the replica is empty.
func (s *Store) verifiedLength(data, meta *os.File) (int64, uint32, error) {
	di, err := data.Stat()
	if err != nil {
		return 0, 0, err
	}
	mi, err := meta.Stat()
	if err != nil {
		return 0, 0, err
	}
	if mi.Size() < metaHeaderSize {
		if s.cfg.ReadOnly {
			return 0, 0, nil
		}
		if _, err := meta.WriteAt(AppendMetaHeader(nil, metaHeader), 0); err != nil {
			return 0, 0, err
		}
		return 0, 0, nil
	}
	var hdr [metaHeaderSize]byte
	if _, err := meta.ReadAt(hdr[:], 0); err != nil {
		return 0, 0, err
	}
	if _, _, err := ParseMeta(hdr[:]); err != nil {
		return 0, 0, err
	}
	dlen := di.Size()
	total := min(chunks(dlen), (mi.Size()-metaHeaderSize)/crcSize)
	bufp := s.getBuf()
	defer s.putBuf(bufp)
	buf := *bufp
	per := int64(len(buf) / bytesPerCRC)
	crcs := make([]byte, per*crcSize)
	for c := int64(0); c < total; c += per {
		k := min(per, total-c)
		off := c << chunkShift
		want := min(k<<chunkShift, dlen-off)
		if _, err := data.ReadAt(buf[:want], off); err != nil {
			return 0, 0, err
		}
		if _, err := meta.ReadAt(crcs[:k*crcSize], crcOffset(c)); err != nil {
			return 0, 0, err
		}
		for i := int64(0); i < k; i++ {
			chunk := buf[i<<chunkShift : min((i+1)<<chunkShift, want)]
			stored := binary.BigEndian.Uint32(crcs[i*crcSize:])
			at := off + i<<chunkShift
			if crc32.Checksum(chunk, castagnoli) == stored {
				if len(chunk) < bytesPerCRC {
					return at + int64(len(chunk)), stored, nil
				}
				continue
			}
			best, crc := 0, uint32(0)
			for j := range chunk[:len(chunk)-1] {
				if crc = crc32.Update(crc, castagnoli, chunk[j:j+1]); crc == stored {
					best = j + 1
				}
			}
			if best == 0 {
				return at, 0, nil
			}
			return at + int64(best), stored, nil
		}
	}
	return total << chunkShift, 0, nil
}

// moveToFinalized moves r's files from rbw to its finalized sub-directory,
// renaming the meta file to newGenStamp: data first, then meta (Open
// finishes a move cut between the two), then both directories are synced.
func (s *Store) moveToFinalized(r *replica, newGenStamp uint64) error {
	newID := blocks.ID{Block: r.id.Block, GenStamp: newGenStamp}
	sub := subdirs(r.id.Block)
	if err := s.ensureSubdir(sub); err != nil {
		return err
	}
	if err := s.rename(rbwDir, sub, dataName(r.id.Block), dataName(r.id.Block)); err != nil {
		return err
	}
	if err := s.rename(rbwDir, sub, metaName(r.id), metaName(newID)); err != nil {
		return err
	}
	s.publish(func() { r.state, r.id = blocks.Finalized, newID })
	if err := s.syncDir(sub); err != nil {
		return err
	}
	return s.syncDir(rbwDir)
}

// moveToRBW moves a finalized replica's files back to rbw under
// newGenStamp: data first, then meta (Open undoes a move cut between the
// two), then both directories are synced.
func (s *Store) moveToRBW(r *replica, newGenStamp uint64) error {
	newID := blocks.ID{Block: r.id.Block, GenStamp: newGenStamp}
	sub := subdirs(r.id.Block)
	if err := s.rename(sub, rbwDir, dataName(r.id.Block), dataName(r.id.Block)); err != nil {
		return err
	}
	if err := s.rename(sub, rbwDir, metaName(r.id), metaName(newID)); err != nil {
		return err
	}
	s.publish(func() { r.state, r.id = blocks.BeingWritten, newID })
	if err := s.syncDir(rbwDir); err != nil {
		return err
	}
	return s.syncDir(sub)
}

func (s *Store) rename(fromDir, toDir, from, to string) error {
	return os.Rename(filepath.Join(s.dir, fromDir, from), filepath.Join(s.dir, toDir, to))
}

// RecoverTo implements blocks.LengthRecoverer.
func (s *Store) RecoverTo(ctx context.Context, id blocks.ID, newGenStamp uint64, length int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if newGenStamp <= id.GenStamp {
		return opErr("recover", id, fmt.Errorf("%w: new generation stamp %d is not above %d", blocks.ErrBadState, newGenStamp, id.GenStamp))
	}
	if length < 0 {
		return opErr("recover", id, fmt.Errorf("%w: length %d", blocks.ErrRange, length))
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return opErr("recover", id, err)
	}
	defer r.mu.Unlock()
	if r.state == blocks.Finalized {
		if length > r.length {
			return opErr("recover", id, fmt.Errorf("%w: length %d, replica has %d bytes", blocks.ErrRange, length, r.length))
		}
		if length == r.length {
			newID := blocks.ID{Block: id.Block, GenStamp: newGenStamp}
			dir := filepath.Join(s.dir, r.relDir())
			if err := os.Rename(filepath.Join(dir, metaName(id)), filepath.Join(dir, metaName(newID))); err != nil {
				return opErr("recover", id, err)
			}
			if err := s.syncDir(r.relDir()); err != nil {
				return opErr("recover", id, err)
			}
			s.publish(func() { r.id = newID })
			return nil
		}
		tail, err := s.chunkPrefixCRC(r, length)
		if err != nil {
			return opErr("recover", id, err)
		}
		if err := s.moveToRBW(r, newGenStamp); err != nil {
			return opErr("recover", id, err)
		}
		if err := s.cutFiles(r, length, tail); err != nil {
			return opErr("recover", r.id, err)
		}
		s.publish(func() { r.length, r.tailCRC, r.tailKnown = length, tail, true })
		if err := s.moveToFinalized(r, newGenStamp); err != nil {
			return opErr("recover", r.id, err)
		}
		return nil
	}
	if w := r.writer; w != nil {
		w.stop(fmt.Errorf("%w: writer stopped by recovery of %s", blocks.ErrBadState, id))
	}
	n, tail, err := s.cutToVerified(r)
	if err != nil {
		return opErr("recover", id, err)
	}
	s.publish(func() { r.length, r.tailCRC, r.tailKnown = n, tail, true })
	if length > n {
		return opErr("recover", id, fmt.Errorf("%w: length %d, replica has %d verified bytes", blocks.ErrRange, length, n))
	}
	if length < n {
		if tail, err = s.chunkPrefixCRC(r, length); err != nil {
			return opErr("recover", id, err)
		}
		if err := s.cutFiles(r, length, tail); err != nil {
			return opErr("recover", id, err)
		}
		s.publish(func() { r.length, r.tailCRC, r.tailKnown = length, tail, true })
	}
	if err := s.moveToFinalized(r, newGenStamp); err != nil {
		return opErr("recover", id, err)
	}
	s.m.recoveries.Inc()
	s.log.Info("blocks/local: recovered replica", "block", id.Block, "genstamp", newGenStamp, "length", length)
	return nil
}
