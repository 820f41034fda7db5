package rpc

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// serveCall answers POST /rpc/call: the body is one request frame, the answer
// one response frame. Errors of the operation travel inside the response
// (status 200); only a malformed body gets an HTTP error status.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "rpc: "+CallPath+" takes POST", http.StatusMethodNotAllowed)
		return
	}
	if !s.calls.Enter() {
		// Stopping: not run, so the caller may send it elsewhere.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "rpc: the server is stopping", http.StatusServiceUnavailable)
		return
	}
	defer s.calls.Exit()
	max := s.opts.MaxFrameSize
	// A body that stops halfway would hold the connection forever: the
	// frame timeout applies here too, and is lifted once the frame is in so
	// that a long request keeps its context (the server's background read
	// would fail at the deadline and cancel it).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.FrameTimeout))
	body := http.MaxBytesReader(w, r.Body, int64(max)+16)
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(body)
	bp := getBuf()
	frame, err := ReadFrame(br, (*bp)[:0], max)
	received := time.Now()
	br.Reset(nil)
	readerPool.Put(br)
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		s.met.protoErrors.Inc()
		status := http.StatusBadRequest
		var mbe *http.MaxBytesError
		if errors.Is(err, ErrFrameTooLarge) || errors.As(err, &mbe) {
			status = http.StatusRequestEntityTooLarge
		}
		if err == io.EOF {
			err = errors.New("empty body: expected one request frame")
		}
		http.Error(w, "rpc: "+err.Error(), status)
		return
	}
	select {
	case s.sem <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	if r.Context().Err() != nil {
		// The caller went away while the call waited for a slot: not
		// started, as on a connection (serverConn.takeSlot).
		<-s.sem
		s.met.staleRefused.Inc()
		return
	}
	ob := getBuf()
	out, ok := s.handle(r.Context(), frame, (*ob)[:0], true, received)
	<-s.sem
	if cap(frame) <= cap(*bp) {
		putBuf(bp)
	}
	if !ok {
		s.log.Warn("rpc: undecodable frame on the call path", "remote", r.RemoteAddr)
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	base := s.advertiseURL()
	if base == "" {
		base = "http://" + r.Host
	}
	h.Set(HeaderInstance, s.instanceID()+" "+base)
	if cb := r.Header.Get(HeaderCallback); cb != "" && ok {
		// In the background: the answer never waits for the dial.
		if ep, ok := callbackTarget(cb, r.RemoteAddr, s.opts.TrustLoopbackCallback); ok {
			s.connectBack(ep, r.Header.Get(HeaderCallbackToken), base)
		}
	}
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
	}
	_, _ = w.Write(out)
	*ob = out
	putBuf(ob)
}
