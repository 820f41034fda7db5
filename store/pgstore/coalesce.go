package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/store"
)

// coalescer sends the store's unlocked autocommit reads (a stat's whole
// path, a listing's directory) to the database, at most limit statements at
// a time; reads that arrive while limit are in flight wait and then go
// together, as one statement over all their keys. A lone read is sent at
// once, on its caller's goroutine, as before: coalescing adds no latency,
// it only appears when statements queue, and then it spends one statement's
// fixed costs (a round trip, the server's parse-bind-execute, the socket
// writes and wake-ups on both sides) on many reads, as a group commit does
// for writes. docs/STORE.md, "Speed", has the measurement.
//
// Linearizability: a waiting read's statement starts after the read was
// asked for (it is taken from the queue) and its answer is delivered before
// the read returns, so the statement's snapshot is a point inside the
// read's interval, as its own statement's was.
type coalescer struct {
	s     *Store
	limit int // statements in flight; 0: every read its own statement at once

	mu       sync.Mutex
	inflight int
	queue    []*waitingRead
}

// coalesceMaxKeys bounds the keys of one coalesced statement; more waiting
// reads go in the next.
const coalesceMaxKeys = 1024

type waitingRead struct {
	reqs []store.ReadReq
	vals [][]byte
	err  error
	done chan struct{}
}

// read reads reqs (unlocked, one run) as of a snapshot taken after the call.
func (c *coalescer) read(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	if c.limit <= 0 {
		return c.direct(ctx, reqs)
	}
	c.mu.Lock()
	if c.inflight < c.limit {
		c.inflight++
		c.mu.Unlock()
		vals, err := c.direct(ctx, reqs)
		if next := c.next(); next != nil {
			go c.serve(next)
		}
		return vals, err
	}
	w := &waitingRead{reqs: ownKeys(reqs), done: make(chan struct{})}
	c.queue = append(c.queue, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		if w.err != nil {
			return nil, c.s.mapErr(ctx, "read "+store.FormatKey(reqs[0].Key), w.err, false)
		}
		return w.vals, nil
	case <-ctx.Done():
		// The statement may still carry the keys; its answer is dropped.
		return nil, fmt.Errorf("pgstore: read %s: %w", store.FormatKey(reqs[0].Key), ctx.Err())
	}
}

// ownKeys returns a copy of reqs whose keys the copy owns (one block for
// them all). A waiting read's keys are read by the statement that serves
// it, on another goroutine, possibly after its caller gave up and returned,
// and a caller may reuse its key buffers once Read returns: the engine
// builds keys in buffers of its own. Without the copy, a caller that gave
// up (a hedged stat's loser, cancelled by its client) rewrote a key under
// a statement in flight, whose rows then did not match the keys asked for,
// and every read of the batch failed with an internal error (found by
// scripts/bench-cache-pg.sh: "row of key ... not asked for").
func ownKeys(reqs []store.ReadReq) []store.ReadReq {
	n := 0
	for _, r := range reqs {
		n += len(r.Key)
	}
	buf := make([]byte, 0, n)
	out := make([]store.ReadReq, len(reqs))
	for i, r := range reqs {
		start := len(buf)
		buf = append(buf, r.Key...)
		out[i] = r
		out[i].Key = buf[start:len(buf):len(buf)]
	}
	return out
}

// direct sends one read as its own statement.
func (c *coalescer) direct(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	vals, err := c.send(ctx, reqs)
	if err != nil {
		return nil, c.s.mapErr(ctx, "read "+store.FormatKey(reqs[0].Key), err, false)
	}
	return vals, nil
}

// send reads reqs (unlocked) in one autocommit statement; the error is the
// database's, not yet mapped.
func (c *coalescer) send(ctx context.Context, reqs []store.ReadReq) ([][]byte, error) {
	vals := make([][]byte, len(reqs))
	c.s.count(kindRead)
	return vals, readRun(ctx, c.s.pool, run{from: 0, to: len(reqs), mode: store.ReadCommitted}, reqs, vals)
}

// next takes the waiting reads of the next statement, keeping the caller's
// place in flight, or gives the place up when none wait.
func (c *coalescer) next() []*waitingRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.inflight--
		return nil
	}
	n, keys := 0, 0
	for n < len(c.queue) && (n == 0 || keys+len(c.queue[n].reqs) <= coalesceMaxKeys) {
		keys += len(c.queue[n].reqs)
		n++
	}
	batch := c.queue[:n:n]
	c.queue = c.queue[n:]
	return batch
}

// serve sends batches of waiting reads until none wait. A batch serves
// several callers, so it runs under none of their contexts: the server's
// statement_timeout bounds it, and a caller that gives up stops waiting
// for it.
func (c *coalescer) serve(batch []*waitingRead) {
	for ; batch != nil; batch = c.next() {
		var all []store.ReadReq
		if len(batch) == 1 {
			all = batch[0].reqs
		} else {
			for _, w := range batch {
				all = append(all, w.reqs...)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.s.setupTimeout()+time.Second)
		c.s.metrics.coalesced.Add(float64(len(batch)))
		vals, err := c.send(ctx, all)
		cancel()
		at := 0
		for _, w := range batch {
			if err != nil {
				w.err = err
			} else {
				w.vals = vals[at : at+len(w.reqs) : at+len(w.reqs)]
			}
			at += len(w.reqs)
			close(w.done)
		}
	}
}
