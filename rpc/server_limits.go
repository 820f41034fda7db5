package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Defaults of the per-connection and per-server limits (ServerOptions).
const (
	// DefaultMaxConnBytes bounds the bytes a connection holds in requests
	// read and not yet answered plus answers not yet written to its socket.
	DefaultMaxConnBytes = 64 << 20
	// DefaultMaxServerBytes bounds the same across every connection.
	DefaultMaxServerBytes = 1 << 30
	// DefaultMaxConnQueued bounds the requests a connection has read and
	// not yet answered on its socket.
	DefaultMaxConnQueued = 1024
	// DefaultFrameTimeout bounds the time from a frame's first byte to its
	// last.
	DefaultFrameTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds the silence between two frames.
	DefaultIdleTimeout = 5 * time.Minute
)

// smallAnswer is what a request other than a read is assumed to answer with
// when it is admitted; its real size replaces the guess once it is encoded.
const smallAnswer = 512

// budget counts what one connection holds: requests read and not yet
// answered on the socket (queued) and their bytes (held), which are first the
// request frame plus the answer's expected size, then the encoded answer
// until the writer has handed it to the socket. The server's total is kept
// beside it. Every field is atomic: the reader adds, the request goroutines
// adjust, the writer subtracts, without a lock; a reader over a bound waits
// on a gate that only the subtracting side opens, and only when somebody
// waits, so the per-request cost is a few atomic adds.
type budget struct {
	s      *Server
	held   atomic.Int64
	queued atomic.Int32
	gate   gate // opened when this connection's held or queued falls
}

// admit reserves est bytes and one queue place for a request just read.
func (b *budget) admit(est int) {
	b.queued.Add(1)
	b.held.Add(int64(est))
	t := b.s.held.Add(int64(est))
	if t > b.s.heldPeak.Load() {
		b.s.notePeak(t)
	}
}

// adjust changes the reservation by d bytes: the answer turned out larger
// or smaller than guessed.
func (b *budget) adjust(d int) {
	if d == 0 {
		return
	}
	b.held.Add(int64(d))
	t := b.s.held.Add(int64(d))
	if d > 0 && t > b.s.heldPeak.Load() {
		b.s.notePeak(t)
	}
}

// release gives back an answer of n bytes once written (or dropped).
func (b *budget) release(n int) {
	b.queued.Add(-1)
	b.held.Add(-int64(n))
	b.s.held.Add(-int64(n))
	b.gate.open()
	b.s.gate.open()
}

// full reports whether the connection or the server is over a bound, and
// which gate to wait on.
func (b *budget) full() (*gate, bool) {
	o := &b.s.opts
	if b.held.Load() >= o.MaxConnBytes || int(b.queued.Load()) >= o.MaxConnQueued {
		return &b.gate, true
	}
	if b.s.held.Load() >= o.MaxServerBytes {
		return &b.s.gate, true
	}
	return nil, false
}

// waitRoom blocks while the connection or the server is over a bound: the
// reader stops reading, so the client's requests stay in its socket and its
// own sends block. It returns false when ctx ends or stop reports true.
func (b *budget) waitRoom(ctx context.Context, stop func() bool) bool {
	g, full := b.full()
	if !full {
		return true
	}
	b.s.met.backpressure.Inc()
	for full {
		if stop() || !g.wait(ctx, func() bool { _, f := b.full(); return !f || stop() }) {
			return false
		}
		g, full = b.full()
	}
	return !stop()
}

func (s *Server) notePeak(t int64) {
	for {
		p := s.heldPeak.Load()
		if t <= p || s.heldPeak.CompareAndSwap(p, t) {
			return
		}
	}
}

// gate lets a goroutine wait for a condition that other goroutines make true
// with atomic operations. open costs one atomic load when nobody waits.
type gate struct {
	waiting atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // closed by open; nil when nobody waits
}

// wait returns true once ready() holds, false when ctx ends first. ready is
// checked after the waiter is registered, so an open that follows the change
// ready looks at cannot be missed.
func (g *gate) wait(ctx context.Context, ready func() bool) bool {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	for {
		g.mu.Lock()
		if g.ch == nil {
			g.ch = make(chan struct{})
		}
		ch := g.ch
		g.mu.Unlock()
		if ready() {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (g *gate) open() {
	if g.waiting.Load() == 0 {
		return
	}
	g.mu.Lock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
	g.mu.Unlock()
}

// estimate returns the bytes a request frame is expected to hold until its
// answer is written: the frame itself, plus a read's length (its answer
// carries that much data; a read to the end counts as a whole frame) or
// smallAnswer for anything else.
func estimate(frame []byte, maxFrame int) int {
	est := len(frame) + smallAnswer
	walkFields(frame, func(num protowire.Number, typ protowire.Type, v []byte) bool {
		if num < 10 {
			return true // the envelope's own fields
		}
		if num == fieldRead && typ == protowire.BytesType {
			body, n := protowire.ConsumeBytes(v)
			if n < 0 {
				return false
			}
			length := uint64(0)
			walkFields(body, func(num protowire.Number, typ protowire.Type, v []byte) bool {
				if num == 3 && typ == protowire.VarintType {
					length, _ = protowire.ConsumeVarint(v)
					return false
				}
				return true
			})
			if length == 0 || length > uint64(maxFrame) {
				length = uint64(maxFrame)
			}
			est += int(length)
		}
		return false
	})
	return est
}
