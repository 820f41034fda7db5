package local

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/nimbus-fs/nimbus/blocks"
)

// writer implements blocks.Writer for one replica in rbw.
//
// Bytes collect in buf (Config.BufferSize); a full buffer is written with
// one pwrite to the data file and its checksums with one pwrite to the meta
// file, computed over the whole buffer. Large writes skip the copy.
//
// The checksum of the chunk that was partial at the last Sync is durable and
// is what Recover falls back on after a power loss, so a flush never
// overwrites it in place: its new value waits (deferCRC) until the next
// Sync has fsynced the data it covers. Otherwise the new checksum could
// reach the disk before the bytes it covers, and a power loss would leave a
// chunk matching neither its old nor its new length, losing synced bytes.
type writer struct {
	s          *Store
	r          *replica
	data, meta *os.File
	bufp       *[]byte
	buf        []byte // pending bytes, cap Config.BufferSize
	crcs       []byte // scratch for encoded checksums
	flushed    int64  // bytes in the data file
	partCRC    uint32 // CRC32C of the partial chunk at the end of the flushed bytes

	deferChunk   int64 // chunk whose durable partial checksum must not be overwritten yet; -1: none
	deferPending bool
	deferCRC     uint32
	dirSynced    bool  // rbw's directory entry for these files is durable
	err          error // set once the writer is finished
}

var castagnoli = blocks.Castagnoli

// Create implements blocks.Store.
func (s *Store) Create(ctx context.Context, id blocks.ID) (blocks.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &replica{id: id, state: blocks.BeingWritten, tailKnown: true}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, opErr("create", id, blocks.ErrClosed)
	}
	if have := s.mu.replicas[id.Block]; have != nil {
		hid, hstate := have.id, have.state // published fields: read under s.mu
		s.mu.Unlock()
		return nil, opErr("create", id, fmt.Errorf("%w (as %s, %s)", blocks.ErrExists, hid, hstate))
	}
	s.mu.replicas[id.Block] = r
	s.mu.Unlock()

	w, err := s.createFiles(r)
	if err != nil {
		s.publish(func() {
			r.gone = true
			delete(s.mu.replicas, id.Block)
		})
		return nil, opErr("create", id, err)
	}
	closed := false
	s.publish(func() { r.writer, closed = w, s.mu.closed })
	if closed { // Close ran meanwhile and did not see this writer
		w.stop(fmt.Errorf("%w: store closed", blocks.ErrClosed))
		return nil, opErr("create", id, blocks.ErrClosed)
	}
	return w, nil
}

func (s *Store) createFiles(r *replica) (*writer, error) {
	dir := filepath.Join(s.dir, rbwDir)
	data, err := os.OpenFile(filepath.Join(dir, dataName(r.id.Block)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	meta, err := os.OpenFile(filepath.Join(dir, metaName(r.id)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		_, err = meta.WriteAt(AppendMetaHeader(nil, metaHeader), 0)
	}
	if err != nil {
		data.Close()
		os.Remove(data.Name())
		if meta != nil {
			meta.Close()
			os.Remove(meta.Name())
		}
		return nil, err
	}
	return s.newWriter(r, data, meta, 0, 0), nil
}

// newWriter starts a writer at length whose partial last chunk has CRC
// partCRC; that checksum is on disk and durable if length%512 != 0.
func (s *Store) newWriter(r *replica, data, meta *os.File, length int64, partCRC uint32) *writer {
	bufp := s.getBuf()
	w := &writer{
		s: s, r: r, data: data, meta: meta, bufp: bufp, buf: (*bufp)[:0],
		crcs:    make([]byte, 0, crcSize*(s.cfg.BufferSize/bytesPerCRC+1)),
		flushed: length, partCRC: partCRC, deferChunk: -1,
	}
	if length&chunkOffsetMask != 0 {
		w.deferChunk = length >> chunkShift
	}
	return w
}

// Write implements io.Writer.
func (w *writer) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= cap(w.buf) {
			if err := w.flushBytes(p); err != nil {
				return n - len(p), w.fail(err)
			}
			break
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return n - len(p), w.fail(err)
			}
		}
	}
	return n, nil
}

// fail finishes the writer after an I/O error: its replica stays being
// written and recoverable.
func (w *writer) fail(err error) error {
	err = opErr("write", w.r.id, err)
	w.stop(err)
	return err
}

// flush writes the buffered bytes (not synced). r.mu is held.
func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.flushBytes(w.buf)
	w.buf = w.buf[:0]
	return err
}

// flushBytes writes p at the end of the data file and its checksums to the
// meta file, one pwrite each.
func (w *writer) flushBytes(p []byte) error {
	if _, err := w.data.WriteAt(p, w.flushed); err != nil {
		return err
	}
	first := w.flushed >> chunkShift
	fill := int(w.flushed & chunkOffsetMask)
	crc := w.partCRC
	crcs := w.crcs[:0]
	for i := 0; i < len(p); {
		n := min(bytesPerCRC-fill, len(p)-i)
		crc = crc32.Update(crc, castagnoli, p[i:i+n])
		crcs = binary.BigEndian.AppendUint32(crcs, crc)
		i += n
		if fill += n; fill == bytesPerCRC {
			crc, fill = 0, 0
		}
	}
	w.crcs = crcs[:0]
	at := first
	if first == w.deferChunk {
		w.deferCRC, w.deferPending = binary.BigEndian.Uint32(crcs), true
		crcs, at = crcs[crcSize:], at+1
	}
	if len(crcs) > 0 {
		if _, err := w.meta.WriteAt(crcs, crcOffset(at)); err != nil {
			return err
		}
	}
	w.flushed += int64(len(p))
	w.partCRC = crc
	w.s.m.bytesWritten.Add(float64(len(p)))
	return nil
}

// sync makes everything written durable and visible. r.mu is held.
func (w *writer) sync() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.data.Sync(); err != nil {
		return err
	}
	w.s.m.fsyncs.Inc()
	if w.deferPending {
		var b [crcSize]byte
		binary.BigEndian.PutUint32(b[:], w.deferCRC)
		if _, err := w.meta.WriteAt(b[:], crcOffset(w.deferChunk)); err != nil {
			return err
		}
		w.deferPending = false
	}
	if err := w.meta.Sync(); err != nil {
		return err
	}
	w.s.m.fsyncs.Inc()
	if !w.dirSynced {
		if err := w.s.syncDir(rbwDir); err != nil {
			return err
		}
		w.dirSynced = true
	}
	w.deferChunk = -1
	if w.flushed&chunkOffsetMask != 0 {
		w.deferChunk = w.flushed >> chunkShift
	}
	w.s.publish(func() {
		w.r.length, w.r.tailCRC, w.r.tailKnown = w.flushed, w.partCRC, true
	})
	return nil
}

// Sync implements blocks.Writer.
func (w *writer) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := w.sync(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Len implements blocks.Writer.
func (w *writer) Len() int64 {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.flushed + int64(len(w.buf))
}

// Finalize implements blocks.Writer.
func (w *writer) Finalize(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if err := w.sync(); err != nil {
		return 0, w.fail(err)
	}
	n := w.flushed
	w.stop(fmt.Errorf("%w: writer finalized", blocks.ErrClosed))
	if err := w.s.moveToFinalized(w.r, w.r.id.GenStamp); err != nil {
		return 0, opErr("finalize", w.r.id, err)
	}
	return n, nil
}

// Abort implements blocks.Writer.
func (w *writer) Abort() error {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.err != nil {
		return nil
	}
	w.stop(fmt.Errorf("%w: writer aborted", blocks.ErrClosed))
	var errs []error
	for _, name := range []string{metaName(w.r.id), dataName(w.r.id.Block)} {
		if err := os.Remove(filepath.Join(w.s.dir, rbwDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	w.s.publish(func() {
		w.r.gone = true
		delete(w.s.mu.replicas, w.r.id.Block)
	})
	if err := errors.Join(errs...); err != nil {
		return opErr("abort", w.r.id, err)
	}
	return nil
}

// Close implements blocks.Writer.
func (w *writer) Close() error {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if w.err != nil {
		return nil
	}
	err := w.flush()
	w.stop(fmt.Errorf("%w: writer closed", blocks.ErrClosed))
	if err != nil {
		return opErr("close", w.r.id, err)
	}
	return nil
}

// stop finishes the writer with err (what its later calls return), closes
// its files and detaches it from the replica. r.mu is held. Unflushed bytes
// are dropped.
func (w *writer) stop(err error) {
	if w.err != nil {
		return
	}
	w.err = err
	w.data.Close()
	w.meta.Close()
	w.s.putBuf(w.bufp)
	w.buf, w.bufp = nil, nil
	w.s.publish(func() {
		if w.r.writer == w {
			w.r.writer = nil
		}
	})
}
