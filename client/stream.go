package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// Chunk sizes of the streaming helpers.
const (
	WriteChunk = 1 << 20 // bytes per Write call (the server cuts inline content into its own rows)
	ReadChunk  = 1 << 20 // bytes per Read call
	// ReadAhead is how many ranges a reader keeps in flight: the next range
	// travels while the caller consumes this one.
	ReadAhead = 3
	ListPage  = 1000 // entries asked per List call by Walk
)

// fileWriter streams a file under construction: Write buffers up to
// WriteChunk bytes and sends full chunks; Close sends the rest and completes
// the file. A background goroutine renews the lease while it is open.
type fileWriter struct {
	c      *Client
	ctx    context.Context
	u      meta.User
	path   string
	off    int64
	buf    []byte
	err    error // sticky: the first failure
	stop   chan struct{}
	wg     sync.WaitGroup
	closed bool
}

// CreateWriter creates path (with this client's ClientName as the lease
// holder; opts.Client is ignored) and returns a writer that streams its
// content in WriteChunk pieces. Nothing is visible to readers until Close
// completes the file. Not safe for concurrent use. ctx governs every call the
// writer makes, Close's included.
func (c *Client) CreateWriter(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (io.WriteCloser, error) {
	opts.Client = c.name
	st, err := c.Create(ctx, u, path, opts)
	if err != nil {
		return nil, err
	}
	p := st.Path
	if p == "" {
		p = path
	}
	return c.newWriter(ctx, u, p, 0), nil
}

// AppendWriter reopens a complete file for appending and returns a writer
// like CreateWriter's, starting at the file's current length.
func (c *Client) AppendWriter(ctx context.Context, u meta.User, path string) (io.WriteCloser, error) {
	st, err := c.Append(ctx, u, path, c.name)
	if err != nil {
		return nil, err
	}
	p := st.Path
	if p == "" {
		p = path
	}
	return c.newWriter(ctx, u, p, st.Length), nil
}

func (c *Client) newWriter(ctx context.Context, u meta.User, path string, off int64) *fileWriter {
	w := &fileWriter{c: c, ctx: ctx, u: u, path: path, off: off, buf: make([]byte, 0, WriteChunk), stop: make(chan struct{})}
	w.wg.Add(1)
	go w.renew()
	return w
}

func (w *fileWriter) renew() {
	defer w.wg.Done()
	t := time.NewTicker(w.c.opts.LeaseRenewInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		case <-t.C:
			if err := w.c.RenewLease(w.ctx, w.u, w.c.name); err != nil {
				w.c.log.Warn("client: lease renewal failed", "path", w.path, "err", err)
			}
		}
	}
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fs.ErrClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= WriteChunk {
			// Send straight from the caller's slice: no copy.
			if err := w.send(p[:WriteChunk]); err != nil {
				return n, err
			}
			p, n = p[WriteChunk:], n+WriteChunk
			continue
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p, n = p[k:], n+k
		if len(w.buf) == cap(w.buf) {
			if err := w.send(w.buf); err != nil {
				return n, err
			}
			w.buf = w.buf[:0]
		}
	}
	return n, nil
}

func (w *fileWriter) send(b []byte) error {
	if err := w.c.Write(w.ctx, w.u, w.path, w.c.name, w.off, b); err != nil {
		w.err = err
		return err
	}
	w.off += int64(len(b))
	return nil
}

// Close sends the buffered data and completes the file; the lease renewal
// stops either way. Closing twice returns fs.ErrClosed.
func (w *fileWriter) Close() error {
	if w.closed {
		return fs.ErrClosed
	}
	w.closed = true
	close(w.stop)
	w.wg.Wait()
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		if err := w.send(w.buf); err != nil {
			return err
		}
	}
	_, err := w.c.Complete(w.ctx, w.u, w.path, w.c.name)
	return err
}

// fileReader reads a complete file in ReadChunk ranges.
type fileReader struct {
	c      *Client
	ctx    context.Context
	u      meta.User
	path   string
	off    int64
	buf    []byte // unread part of the last range
	eof    bool
	closed bool

	size    int64            // the file's length when it was opened
	next    int64            // offset of the next range to ask for
	pending []chan readReply // ranges asked for, in order
	cancel  context.CancelFunc
}

type readReply struct {
	data []byte
	err  error
}

// OpenReader returns a reader of path's completed content that fetches it in
// ReadChunk ranges, holding at most one range in memory. It stats path first
// so that a missing file fails here rather than on the first Read.
func (c *Client) OpenReader(ctx context.Context, u meta.User, path string) (io.ReadCloser, error) {
	st, err := c.Stat(ctx, u, path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, meta.Errorf("open", path, meta.ErrIsDir, "")
	}
	rctx, cancel := context.WithCancel(ctx)
	return &fileReader{c: c, ctx: rctx, cancel: cancel, u: u, path: path, size: st.Length}, nil
}

// fill keeps up to ReadAhead ranges in flight, up to the length the file had
// when it was opened (a last range asked past it tells the reader where the
// end is now).
func (r *fileReader) fill() {
	for len(r.pending) < ReadAhead && (r.next < r.size || len(r.pending) == 0) {
		ch := make(chan readReply, 1)
		off := r.next
		go func() {
			data, err := r.c.Read(r.ctx, r.u, r.path, off, ReadChunk)
			ch <- readReply{data, err}
		}()
		r.pending = append(r.pending, ch)
		r.next += ReadChunk
	}
}

func (r *fileReader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fs.ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		r.fill()
		rep := <-r.pending[0]
		r.pending = r.pending[1:]
		if rep.err != nil {
			return 0, rep.err
		}
		r.off += int64(len(rep.data))
		if len(rep.data) < ReadChunk {
			r.eof = true // ranges asked beyond this one are dropped
		}
		r.buf = rep.data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *fileReader) Close() error {
	if r.closed {
		return fs.ErrClosed
	}
	r.closed, r.buf = true, nil
	r.cancel() // ranges still in flight are abandoned
	return nil
}

// ReadFile returns the whole completed content of path.
func (c *Client) ReadFile(ctx context.Context, u meta.User, path string) ([]byte, error) {
	r, err := c.OpenReader(ctx, u, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// WriteFile creates path with data as its content and completes it.
func (c *Client) WriteFile(ctx context.Context, u meta.User, path string, data []byte, opts meta.CreateOptions) error {
	if len(data) <= WriteChunk {
		// Small enough for one request: created, written and closed in one
		// server transaction.
		_, err := c.CreateFile(ctx, u, path, opts, data)
		return err
	}
	w, err := c.CreateWriter(ctx, u, path, opts)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// SkipDir, returned by a Walk callback for a directory, skips its contents.
var SkipDir = fs.SkipDir

// Walk calls fn for root and, when it is a directory, for everything below
// it, depth first, directories before their contents, entries in name order.
// Directories are listed ListPage entries at a time, so memory grows with the
// depth of the tree, not its size. A tree changed during the walk may be
// seen partly before and partly after the change. An error from fn stops the
// walk and is returned, except SkipDir, which skips the directory's contents.
func (c *Client) Walk(ctx context.Context, u meta.User, root string, fn func(meta.FileStatus) error) error {
	st, err := c.Stat(ctx, u, root)
	if err != nil {
		return err
	}
	if err := fn(*st); err != nil {
		if errors.Is(err, SkipDir) {
			return nil
		}
		return err
	}
	if !st.IsDir() {
		return nil
	}
	return c.walkDir(ctx, u, st.Path, fn)
}

func (c *Client) walkDir(ctx context.Context, u meta.User, dir string, fn func(meta.FileStatus) error) error {
	after := ""
	for {
		l, err := c.List(ctx, u, dir, after, ListPage)
		if err != nil {
			return err
		}
		for _, e := range l.Entries {
			if err := fn(e); err != nil {
				if errors.Is(err, SkipDir) {
					continue
				}
				return err
			}
			if e.IsDir() {
				if err := c.walkDir(ctx, u, e.Path, fn); err != nil {
					return err
				}
			}
		}
		if l.Remaining <= 0 || len(l.Entries) == 0 {
			return nil
		}
		after = l.Entries[len(l.Entries)-1].Name()
	}
}
