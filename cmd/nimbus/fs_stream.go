package main

import (
	"context"
	"errors"
	"io"

	"github.com/nimbus-fs/nimbus/meta"
)

// streamChunk is how many bytes streamFS moves per Read or Write call.
const streamChunk = 64 << 10

// streamFS gives a plain meta.FileSystem (the in-process engine) the
// streaming methods of remoteFS, with constant memory: chunks of
// streamChunk bytes through Read, and Create / Write / Complete.
type streamFS struct {
	meta.FileSystem
	client string // lease holder name for the files it writes
}

// OpenReader returns a reader over path's completed content.
func (s streamFS) OpenReader(ctx context.Context, u meta.User, path string) (io.ReadCloser, error) {
	st, err := s.Stat(ctx, u, path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, meta.Errorf("open", path, meta.ErrIsDir, "")
	}
	return &chunkReader{ctx: ctx, fs: s.FileSystem, u: u, path: path}, nil
}

type chunkReader struct {
	ctx  context.Context // the caller's: a reader lives only within its call
	fs   meta.FileSystem
	u    meta.User
	path string
	off  int64
	buf  []byte
	eof  bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		data, err := r.fs.Read(r.ctx, r.u, r.path, r.off, streamChunk)
		if err != nil {
			return 0, err
		}
		r.off += int64(len(data))
		r.buf = data
		if len(data) < streamChunk {
			r.eof = true
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

// CreateWriter creates path (leased to s.client) and returns a writer whose
// Close completes it.
func (s streamFS) CreateWriter(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (io.WriteCloser, error) {
	opts.Client = s.client
	st, err := s.Create(ctx, u, path, opts)
	if err != nil {
		return nil, err
	}
	return &chunkWriter{ctx: ctx, fs: s.FileSystem, u: u, path: st.Path, client: s.client,
		buf: make([]byte, 0, streamChunk)}, nil
}

type chunkWriter struct {
	ctx    context.Context // the caller's: a writer lives only within its call
	fs     meta.FileSystem
	u      meta.User
	path   string
	client string
	off    int64
	buf    []byte
	err    error // sticky
	closed bool
}

var errWriterClosed = errors.New("nimbus fs: write after close")

func (w *chunkWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, errWriterClosed
	}
	n := 0
	for len(p) > 0 && w.err == nil {
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p, n = p[k:], n+k
		if len(w.buf) == cap(w.buf) {
			w.flush()
		}
	}
	return n, w.err
}

func (w *chunkWriter) flush() {
	if w.err != nil || len(w.buf) == 0 {
		return
	}
	w.err = w.fs.Write(w.ctx, w.u, w.path, w.client, w.off, w.buf)
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
}

// Close writes what is buffered and completes the file; after an error the
// file stays under construction and the caller decides what to do with it.
func (w *chunkWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.flush()
	if w.err == nil {
		_, w.err = w.fs.Complete(w.ctx, w.u, w.path, w.client)
	}
	return w.err
}
