package local

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/nimbus-fs/nimbus/blocks"
)

// Read implements blocks.Store.
func (s *Store) Read(ctx context.Context, id blocks.ID, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.lockReplica(id)
	if err != nil {
		return nil, opErr("read", id, err)
	}
	defer r.mu.Unlock()
	end := r.length
	if length < 0 {
		length = end - offset
	}
	if offset < 0 || length < 0 || offset+length > end {
		kind := blocks.ErrRange
		if r.state == blocks.BeingWritten && offset >= 0 && length >= 0 {
			kind = blocks.ErrBadState
		}
		return nil, opErr("read", id, fmt.Errorf("%w: bytes [%d, %d) of a %s replica with %d readable bytes",
			kind, offset, offset+length, r.state, end))
	}
	if end&chunkOffsetMask != 0 && !r.tailKnown {
		tail, err := s.storedCRC(r, end>>chunkShift)
		if err != nil {
			return nil, opErr("read", id, err)
		}
		s.publish(func() { r.tailCRC, r.tailKnown = tail, true })
	}
	dir := filepath.Join(s.dir, r.relDir())
	data, err := os.Open(filepath.Join(dir, dataName(id.Block)))
	if err != nil {
		return nil, opErr("read", id, err)
	}
	meta, err := os.Open(filepath.Join(dir, metaName(id)))
	if err != nil {
		data.Close()
		return nil, opErr("read", id, err)
	}
	rd := &reader{
		s: s, ctx: ctx, id: id, data: data, meta: meta,
		end: end, tailCRC: r.tailCRC, pos: offset, stop: offset + length,
		bufp: s.getBuf(),
	}
	rd.crcs = make([]byte, crcSize*len(*rd.bufp)/bytesPerCRC)
	return rd, nil
}

// storedCRC reads chunk i's checksum from r's meta file (r.mu held).
func (s *Store) storedCRC(r *replica, i int64) (uint32, error) {
	var b [crcSize]byte
	if err := readAt(filepath.Join(s.dir, r.relDir(), metaName(r.id)), b[:], crcOffset(i)); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

// reader streams a verified range of one replica. It reads the data in
// units of Config.BufferSize (one pread for the data, one for the
// checksums) into a pooled buffer and verifies every chunk of the unit
// before handing out any of its bytes; it allocates nothing per chunk.
//
// The replica's files may change under an open reader: an append rewrites
// the checksum of the partial last chunk, so the reader checks that chunk
// against the checksum taken when the stream was opened (tailCRC). Every
// other chunk below end is immutable until a truncate or delete.
type reader struct {
	s          *Store
	ctx        context.Context // bounds the stream (see blocks.Store.Read)
	id         blocks.ID
	data, meta *os.File
	end        int64  // readable length when opened
	tailCRC    uint32 // checksum of the partial chunk ending at end
	pos, stop  int64  // next byte to hand out, end of the range
	bufp       *[]byte
	crcs       []byte
	avail      []byte // verified bytes not yet handed out
	err        error  // sticky error after avail drains
}

// Read implements io.Reader.
func (rd *reader) Read(p []byte) (int, error) {
	if len(rd.avail) == 0 {
		if rd.err != nil {
			return 0, rd.err
		}
		if rd.pos >= rd.stop {
			return 0, io.EOF
		}
		if rd.bufp == nil {
			return 0, fmt.Errorf("blocks/local: read %s: %w: stream closed", rd.id, blocks.ErrClosed)
		}
		rd.fill()
		if len(rd.avail) == 0 {
			return 0, rd.err
		}
	}
	n := copy(p, rd.avail)
	rd.avail = rd.avail[n:]
	rd.pos += int64(n)
	rd.s.m.bytesRead.Add(float64(n))
	return n, nil
}

// fill reads and verifies the next unit, setting avail and/or err.
func (rd *reader) fill() {
	if err := rd.ctx.Err(); err != nil {
		rd.err = err
		return
	}
	buf := *rd.bufp
	start := rd.pos &^ chunkOffsetMask
	stop := min(start+int64(len(buf)), (rd.stop+chunkOffsetMask)&^chunkOffsetMask, rd.end)
	n := stop - start
	first := start >> chunkShift
	k := chunks(n)
	got, err := rd.data.ReadAt(buf[:n], start)
	if err == nil || (err == io.EOF && int64(got) == n) {
		_, err = rd.meta.ReadAt(rd.crcs[:k*crcSize], crcOffset(first))
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			// The files are shorter than the replica: cut under us, or lost.
			err = rd.changed(fmt.Errorf("%w: files end before byte %d", blocks.ErrCorrupt, stop))
		}
		rd.err = fmt.Errorf("blocks/local: read %s: %w", rd.id, err)
		return
	}
	good := n
	for i := int64(0); i < k; i++ {
		chunk := buf[i<<chunkShift : min((i+1)<<chunkShift, n)]
		want := binary.BigEndian.Uint32(rd.crcs[i*crcSize:])
		if start+i<<chunkShift+int64(len(chunk)) == rd.end && len(chunk) < bytesPerCRC {
			want = rd.tailCRC
		}
		if got := crc32.Checksum(chunk, castagnoli); got != want {
			rd.s.m.checksumFailures.Inc()
			good = i << chunkShift
			rd.err = rd.changed(&blocks.CorruptError{ID: rd.id, Offset: start + good, Want: want, Got: got})
			break
		}
	}
	lo := rd.pos - start
	hi := min(good, rd.stop-start)
	if hi > lo {
		rd.avail = buf[lo:hi]
	}
}

// changed turns a verification failure into ErrBadState when the replica
// no longer has the stream's generation stamp (truncated and appended, or
// deleted, while the stream was open): the bytes changed, they did not rot.
func (rd *reader) changed(err error) error {
	if _, serr := rd.s.snapshot(rd.id); serr != nil {
		return fmt.Errorf("%w: replica changed while being read (%v)", blocks.ErrBadState, serr)
	}
	return err
}

// Close implements io.Closer.
func (rd *reader) Close() error {
	if rd.bufp == nil {
		return nil
	}
	rd.s.putBuf(rd.bufp)
	rd.bufp, rd.avail = nil, nil
	rd.data.Close()
	rd.meta.Close()
	return nil
}
