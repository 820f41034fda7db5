// Package drain counts the requests a server has under way, so that a
// graceful stop can refuse new ones and wait for those already taken.
package drain

import (
	"context"
	"sync"
)

// Gate counts requests in and out. Once closed it lets none in, and Wait
// returns when the last one in has left. The zero value is open and
// empty. Safe for concurrent use.
type Gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // made by Wait while requests are in; closed when the last leaves
}

// Enter counts a request in, unless the gate is closed (false: refuse it).
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// Exit counts out a request that Enter let in.
func (g *Gate) Exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// Close lets no more requests in.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Closed reports whether Close was called.
func (g *Gate) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Wait returns nil once no request is in, or ctx's error if it ends first.
// After Close none can come in again, so nil then means drained.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
