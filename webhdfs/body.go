package webhdfs

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// An upload body ends in one of two ways: io.EOF after every byte the
// request announced (Content-Length, or a chunked body's last chunk), which
// completes the upload, or any other error, which fails it. A body cut short
// by the client (net/http reports io.ErrUnexpectedEOF) is a failure: the
// gateway never publishes a prefix of what was sent as if it were the file.

// IdleBody is a request body whose every Read must make progress within
// idle: it pushes the connection's read deadline forward before each read,
// so a client that keeps the connection open but stops sending loses it
// after idle instead of holding the handler as long as it likes. A read
// that timed out fails with an error that says so (no data for idle). The
// platform's gateway puts it on the WebHDFS bodies it forwards. It is not
// safe for concurrent use (a body never is).
type IdleBody = idleBody

// NewIdleBody returns r's body with the idle bound, over w's connection.
func NewIdleBody(w http.ResponseWriter, r *http.Request, idle time.Duration) *IdleBody {
	return &idleBody{body: r.Body, rc: http.NewResponseController(w), idle: idle}
}

// Failed reports whether a read failed (timed out, or the client cut the
// body short): the rest of the body will not come.
func (b *idleBody) Failed() bool { return b.bad.Load() }

// Complete reports whether the body was read to its end.
func (b *idleBody) Complete() bool { return b.eof.Load() }

// Stalled reports whether err is a read that timed out for want of data.
func Stalled(err error) bool {
	var ie *idleError
	return errors.As(err, &ie)
}

type idleBody struct {
	body io.ReadCloser
	rc   *http.ResponseController // nil when the connection has no deadlines
	idle time.Duration
	// eof: the body ended where it said it would; bad: a read failed, the
	// rest of the body will not come. Atomic: a proxy's transport reads the
	// body in a goroutine of its own while the handler looks at them.
	eof, bad atomic.Bool
}

// watchBody puts an idle deadline on rq's body for the data step of CREATE
// and APPEND. Call the returned function once the body is done with, before
// any further work on the request. After a complete body it lifts the
// deadline: the server's own read that watches for a client hang-up after
// the body (and cancels the request context when it fails) must not trip
// over it. After a failed one it keeps the deadline and asks for the
// connection to be closed after the answer: net/http would otherwise read
// what is left of the body first, from a client that may have stopped
// sending, before answering.
func (h *Handler) watchBody(rq *request) func() {
	if rq.r.Body == nil || rq.r.Body == http.NoBody {
		return func() {}
	}
	b := &idleBody{body: rq.r.Body, rc: http.NewResponseController(rq.w), idle: h.cfg.BodyIdleTimeout}
	rq.r.Body = b
	return func() {
		switch {
		case b.bad.Load():
			rq.w.Header().Set("Connection", "close")
		case b.eof.Load() && b.rc != nil:
			_ = b.rc.SetReadDeadline(time.Time{})
		}
		// A body left unread for another failure keeps its deadline:
		// net/http reads (discards) some of it before answering, and a
		// client that stops sending then must not hold the handler either.
	}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.rc != nil {
		if err := b.rc.SetReadDeadline(time.Now().Add(b.idle)); err != nil {
			b.rc = nil // not a net.Conn underneath (a test recorder): no deadline
		}
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		if b.rc != nil {
			// The body is in: net/http's read that watches for the
			// client hanging up (and cancels the request's context when
			// it fails) starts now, and must not trip over the deadline
			// while the answer is worked out (a proxy's instance may take
			// long).
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case err != nil:
		b.bad.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = &idleError{idle: b.idle, err: err}
		}
	}
	return n, err
}

func (b *idleBody) Close() error { return b.body.Close() }

// idleError is a body read that made no progress for idle.
type idleError struct {
	idle time.Duration
	err  error
}

func (e *idleError) Error() string { return "no data for " + e.idle.String() }
func (e *idleError) Unwrap() error { return e.err }

// fill reads into buf until it is full or the body ends. Unlike io.ReadFull
// it keeps the reader's own error: io.EOF for a body that ended where it
// said it would, io.ErrUnexpectedEOF (from net/http) for one cut short.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// bodyError is a failed read of an upload body: it is the *meta.OpError the
// client is answered with, and keeps the read error underneath so that fail
// can tell a client that went away from one that sent something wrong.
type bodyError struct {
	op    *meta.OpError
	cause error
}

func (e *bodyError) Error() string   { return e.op.Error() }
func (e *bodyError) Unwrap() []error { return []error{e.op, e.cause} }

// readError turns the error of a body read (not io.EOF) into the request's
// error.
func readError(rq *request, path string, err error) error {
	return bodyReadError(rq.op.lower, path, err)
}

// WriteBodyError answers r, a WebHDFS request whose body failed to arrive
// (err, from a read of its IdleBody: it stalled, or the client cut it
// short), as the server's handler answers one: 400 with a RemoteException
// (IllegalArgumentException) saying that the upload failed and nothing was
// kept, and the connection closed. The platform's gateway answers with it
// when it cut a body it was forwarding.
func WriteBodyError(w http.ResponseWriter, r *http.Request, err error) {
	path := strings.TrimPrefix(r.URL.Path, PathPrefix)
	if path == "" {
		path = "/"
	}
	op := strings.ToLower(r.URL.Query().Get("op"))
	if op == "" {
		op = "upload"
	}
	w.Header().Set("Connection", "close")
	writeError(w, path, bodyReadError(op, path, err))
}

func bodyReadError(op, path string, err error) error {
	var mbe *http.MaxBytesError
	var ie *idleError
	var oe *meta.OpError
	switch {
	case errors.As(err, &mbe):
		oe = meta.Errorf(op, path, meta.ErrTooLarge, "request body over %d bytes", mbe.Limit)
	case errors.As(err, &ie):
		oe = meta.Errorf(op, path, meta.ErrInvalidArgument,
			"reading the request body: %v (the upload failed and nothing was kept)", ie)
	case errors.Is(err, io.ErrUnexpectedEOF):
		oe = meta.Errorf(op, path, meta.ErrInvalidArgument,
			"the request body ended before its announced length (the upload failed and nothing was kept)")
	default:
		oe = meta.Errorf(op, path, meta.ErrInvalidArgument, "reading the request body: %v", err)
	}
	return &bodyError{op: oe, cause: err}
}

// clientGone reports whether err says the client of r went away: the
// request's context was cancelled (net/http does that when the connection
// closes), the connection broke under a write, or the upload body was cut
// short or stalled. Such failures are the client's doing and not worth an
// error log line each.
func clientGone(r *http.Request, err error) bool {
	var ie *idleError
	var ne *net.OpError
	switch {
	case r.Context().Err() != nil:
		// The request's context ends when its client goes away: whatever
		// failed after that (a block read cut short, say) failed for it.
		return true
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ie), errors.As(err, &ne):
		return true
	}
	var be *bodyError
	return errors.As(err, &be) && errors.Is(be.cause, io.ErrUnexpectedEOF)
}
