package loop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
)

// The transport: each server's own HTTP listener takes peers' messages at
// POST /coherence (Path). A sender keeps one stream per peer: a POST with
// `Upgrade: nimbus-coherence/1`, answered 101, after which the connection
// carries message batches one way, each a frame (length:uvarint, then a
// batch in the wire format, wire.go), as many as are queued written at
// once. A plain POST of one batch, answered 204, is the fallback for a
// peer that does not upgrade. Sending is best effort: a batch that finds
// its peer's queue full, a stream that breaks, or a receiver's inbox full
// drops what it carries, and the protocol re-sends what it needs answered
// (every message is idempotent).
//
// Only members may speak: the endpoint shares the port clients are given,
// and a forged ACK or RELEASE could let a write commit before a holder
// holds, or end a hold early. Every request carries a credential made
// with the cluster secret (internal/clusterauth: an HMAC over the method,
// the path, a timestamp and the body): a stream's upgrade request (no
// body; the frames then follow on the connection it authenticated), and
// each plain POST over its batch. A request without one, or with another,
// is answered 401 or 403 and counted in requests_refused_total, its
// messages never read.
//
// A stream costs a write and a read per burst of batches where a POST
// cost a whole HTTP exchange each: with a POST per batch the transport
// was a third of an instance's CPU in a create run over PostgreSQL
// (docs/BENCHMARKS.md, "Caches and coherence").

// Path is where the Handler is mounted on every server.
const Path = "/coherence"

// upgradeProto is the Upgrade token of a stream.
const upgradeProto = "nimbus-coherence/1"

// maxBody bounds a received batch.
const maxBody = 4 << 20

const (
	// streamQueue bounds the batches queued for one peer.
	streamQueue = 1024
	// streamIdle closes a peer's stream after this long without a batch.
	streamIdle = time.Minute
)

// Handler receives peers' message batches: streams, and single POSTs.
func (l *Loop) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("Upgrade") == upgradeProto {
			if !l.authorized(w, r, nil) {
				return
			}
			l.receiveStream(w)
			return
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(b) > maxBody {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if !l.authorized(w, r, b) {
			return
		}
		if err := l.deliverBatch(b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// authorized verifies r's member credential over body; a request that is
// not a member's is answered (401 without a credential, 403 with a bad
// one), counted, and false returned.
func (l *Loop) authorized(w http.ResponseWriter, r *http.Request, body []byte) bool {
	err := l.cfg.Auth.Verify(r, body)
	if err == nil {
		return true
	}
	reason, code := "invalid", http.StatusForbidden
	switch {
	case errors.Is(err, clusterauth.ErrMissing):
		reason, code = "missing", http.StatusUnauthorized
	case errors.Is(err, clusterauth.ErrExpired):
		reason = "expired"
	}
	l.m.refused.WithLabelValues(reason).Inc()
	// Logged once a second at most: whoever sends them chooses how many.
	if now := time.Now().UnixNano(); now-l.refusedLogged.Load() >= int64(time.Second) {
		l.refusedLogged.Store(now)
		l.log.Warn("coherence: refused a request that is not a member's (logged once a second at most; requests_refused_total counts them)",
			"remote", r.RemoteAddr, "err", err)
	}
	http.Error(w, err.Error(), code)
	return false
}

// deliverBatch decodes a batch and hands it to the loop, or drops it when
// the inbox is full.
func (l *Loop) deliverBatch(b []byte) error {
	ms, err := decodeBatch(b)
	if err != nil {
		return err
	}
	select {
	case l.inbox <- ms:
	default:
		l.m.dropped.Add(float64(len(ms)))
	}
	return nil
}

// receiveStream takes over the request's connection and reads frames from
// it until it breaks, a frame is malformed, or the loop stops.
func (l *Loop) receiveStream(w http.ResponseWriter) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot stream", http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts are for requests
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + upgradeProto + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		return
	}
	stop := context.AfterFunc(l.ctx, func() { conn.Close() })
	defer stop()
	var buf []byte
	for {
		n, err := binary.ReadUvarint(brw.Reader)
		if err != nil || n > maxBody {
			return
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(brw.Reader, buf); err != nil {
			return
		}
		if err := l.deliverBatch(buf); err != nil {
			l.log.Warn("coherence: malformed frame on a stream; closing it", "err", err)
			return
		}
	}
}

// send queues ms, grouped by receiver, on the streams to the addresses the
// view gives.
func (l *Loop) send(ctx context.Context, ms []coherence.Message, v *view) {
	by := make(map[coherence.NodeID][]coherence.Message)
	var order []coherence.NodeID
	for _, m := range ms {
		l.m.sent.WithLabelValues(m.Type.String()).Inc()
		if _, ok := by[m.To]; !ok {
			order = append(order, m.To)
		}
		by[m.To] = append(by[m.To], m)
	}
	for _, to := range order {
		batch := by[to]
		mem, ok := v.members[string(to)]
		if !ok || mem.Addr == "" {
			l.m.dropped.Add(float64(len(batch)))
			continue
		}
		url := strings.TrimSuffix(mem.Addr, "/") + Path
		select {
		case l.streams.get(ctx, l, url) <- appendBatch(nil, batch):
		default:
			l.m.dropped.Add(float64(len(batch)))
		}
	}
}

// streams are the loop's streams to its peers, by URL.
type streams struct {
	mu sync.Mutex
	by map[string]chan []byte
}

// get returns the queue of url's stream, starting the stream if it has
// none.
func (ss *streams) get(ctx context.Context, l *Loop, url string) chan []byte {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if q, ok := ss.by[url]; ok {
		return q
	}
	if ss.by == nil {
		ss.by = make(map[string]chan []byte)
	}
	q := make(chan []byte, streamQueue)
	ss.by[url] = q
	go l.runStream(ctx, url, q)
	return q
}

// remove forgets url's stream q (its goroutine is ending). Batches queued
// on q meanwhile are lost, as a dropped batch is.
func (ss *streams) remove(url string, q chan []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.by[url] == q {
		delete(ss.by, url)
	}
}

// errNoUpgrade: the peer answered the stream's request without switching
// protocols; batches go to it as single POSTs.
var errNoUpgrade = errors.New("coherence/loop: the peer does not stream")

// runStream writes the batches queued on q to url's stream, opening it
// when needed, until the loop stops or the stream has been idle for
// streamIdle.
func (l *Loop) runStream(ctx context.Context, url string, q chan []byte) {
	defer l.streams.remove(url, q)
	var conn io.WriteCloser
	var w *bufio.Writer
	closeConn := func() {
		if conn != nil {
			conn.Close()
			conn, w = nil, nil
		}
	}
	defer closeConn()
	plain := false // the peer does not stream: POST each batch
	idle := time.NewTimer(streamIdle)
	defer idle.Stop()
	var frame []byte
	for {
		var b []byte
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			return
		case b = <-q:
		}
		idle.Reset(streamIdle)
		if plain {
			if err := l.post(ctx, url, b); err != nil {
				l.m.sendErrors.Inc()
				l.log.Debug("coherence: send", "to", url, "err", err)
			}
			continue
		}
		if conn == nil {
			c, err := l.dial(ctx, url)
			if errors.Is(err, errNoUpgrade) {
				plain = true
				l.log.Info("coherence: the peer does not stream; posting batches", "to", url)
				if err := l.post(ctx, url, b); err != nil {
					l.m.sendErrors.Inc()
				}
				continue
			}
			if err != nil {
				l.m.sendErrors.Inc()
				l.log.Debug("coherence: open a stream", "to", url, "err", err)
				continue // this batch is lost; the next one dials again
			}
			conn, w = c, bufio.NewWriterSize(c, 64<<10)
		}
		// This batch and every other one already queued, in one flush. A
		// peer that stops reading (a process stopped, not dead) would
		// block the write forever: closing the stream after SendTimeout,
		// or when the loop stops, ends it.
		c := conn
		watchdog := time.AfterFunc(l.cfg.SendTimeout, func() { c.Close() })
		stopOnDone := context.AfterFunc(ctx, func() { c.Close() })
		var err error
		for more := true; more && err == nil; {
			frame = binary.AppendUvarint(frame[:0], uint64(len(b)))
			if _, err = w.Write(frame); err == nil {
				_, err = w.Write(b)
			}
			select {
			case b = <-q:
			default:
				more = false
			}
		}
		if err == nil {
			err = w.Flush()
		}
		watchdog.Stop()
		stopOnDone()
		if err != nil {
			l.m.sendErrors.Inc()
			l.log.Debug("coherence: stream broke", "to", url, "err", err)
			closeConn()
		}
	}
}

// dial opens a stream to url.
func (l *Loop) dial(ctx context.Context, url string) (io.WriteCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgradeProto)
	l.cfg.Auth.Sign(req, nil)
	resp, err := l.stream.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusBadRequest {
			return nil, errNoUpgrade // a server that took it for a batch
		}
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: a stream that cannot be written", url)
	}
	return rwc, nil
}

func (l *Loop) post(ctx context.Context, url string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.SendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	l.cfg.Auth.Sign(req, body)
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
