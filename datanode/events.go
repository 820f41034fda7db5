package datanode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/store"
)

// changes is the queue of replica changes not yet sent in an incremental
// report: the latest change of each block (an earlier one of the same
// block is superseded: the rows say what is, not what happened), and the
// replicas found corrupt, which full reports mark as such (a replica's
// corruption is known only to the DataNode that met it; it is forgotten
// when the replica is deleted or changes its generation stamp, or the
// process restarts).
type changes struct {
	mu      sync.Mutex
	pending map[uint64]registry.Change
	corrupt map[blocks.ID]bool
	wake    chan struct{} // one token: there are pending changes
}

func newChanges() *changes {
	return &changes{pending: map[uint64]registry.Change{}, corrupt: map[blocks.ID]bool{}, wake: make(chan struct{}, 1)}
}

func (c *changes) add(ch registry.Change) {
	c.mu.Lock()
	c.pending[ch.Block] = ch
	if ch.Deleted || ch.State != store.ReplicaCorrupt {
		for id := range c.corrupt {
			if id.Block == ch.Block && (ch.Deleted || id.GenStamp != ch.GenStamp) {
				delete(c.corrupt, id)
			}
		}
	} else {
		c.corrupt[blocks.ID{Block: ch.Block, GenStamp: ch.GenStamp}] = true
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *changes) replica(r blocks.Replica) {
	st := store.ReplicaFinalized
	if r.State == blocks.BeingWritten {
		st = store.ReplicaBeingWritten
	}
	c.add(registry.Change{Reported: registry.Reported{Block: r.ID.Block, GenStamp: r.ID.GenStamp, Length: r.Length, State: st}})
}

func (c *changes) deleted(id blocks.ID) {
	c.add(registry.Change{Reported: registry.Reported{Block: id.Block, GenStamp: id.GenStamp}, Deleted: true})
}

// take removes and returns up to n pending changes.
func (c *changes) take(n int) []registry.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]registry.Change, 0, min(n, len(c.pending)))
	for b, ch := range c.pending {
		if len(out) == n {
			break
		}
		out = append(out, ch)
		delete(c.pending, b)
	}
	return out
}

// putBack returns changes whose report failed, unless a later change of
// the same block came meanwhile.
func (c *changes) putBack(chs []registry.Change) {
	c.mu.Lock()
	for _, ch := range chs {
		if _, ok := c.pending[ch.Block]; !ok {
			c.pending[ch.Block] = ch
		}
	}
	c.mu.Unlock()
}

func (c *changes) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

func (c *changes) isCorrupt(id blocks.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.corrupt[id]
}

// reportingStore is the blocks.Store the DataNode hands its data server:
// every change of a replica made through it becomes an incremental report
// (created and reopened replicas as being written, finalized, recovered
// and truncated ones as finalized, deletes and aborts as deleted), and a
// read that meets a corrupt chunk reports the replica corrupt. So nothing
// that writes replicas needs to know about reports.
type reportingStore struct {
	blocks.Store
	ch *changes
}

func (s *reportingStore) Create(ctx context.Context, id blocks.ID) (blocks.Writer, error) {
	w, err := s.Store.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	s.ch.replica(blocks.Replica{ID: id, State: blocks.BeingWritten})
	return &reportingWriter{Writer: w, id: id, ch: s.ch}, nil
}

func (s *reportingStore) OpenAppend(ctx context.Context, id blocks.ID, newGenStamp uint64) (blocks.Writer, error) {
	w, err := s.Store.OpenAppend(ctx, id, newGenStamp)
	if err != nil {
		return nil, err
	}
	nid := blocks.ID{Block: id.Block, GenStamp: newGenStamp}
	s.ch.replica(blocks.Replica{ID: nid, State: blocks.BeingWritten, Length: w.Len()})
	return &reportingWriter{Writer: w, id: nid, ch: s.ch}, nil
}

func (s *reportingStore) Recover(ctx context.Context, id blocks.ID, newGenStamp uint64) (int64, error) {
	n, err := s.Store.Recover(ctx, id, newGenStamp)
	if err == nil {
		s.ch.replica(blocks.Replica{ID: blocks.ID{Block: id.Block, GenStamp: newGenStamp}, State: blocks.Finalized, Length: n})
	}
	return n, err
}

// RecoverTo is blocks.LengthRecoverer when the replica store has it.
func (s *reportingStore) RecoverTo(ctx context.Context, id blocks.ID, newGenStamp uint64, length int64) error {
	lr, ok := s.Store.(blocks.LengthRecoverer)
	if !ok {
		return fmt.Errorf("datanode: recover %v to %d bytes: the replica store cannot", id, length)
	}
	err := lr.RecoverTo(ctx, id, newGenStamp, length)
	if err == nil {
		s.ch.replica(blocks.Replica{ID: blocks.ID{Block: id.Block, GenStamp: newGenStamp}, State: blocks.Finalized, Length: length})
	}
	return err
}

func (s *reportingStore) Truncate(ctx context.Context, id blocks.ID, newLength int64, newGenStamp uint64) error {
	err := s.Store.Truncate(ctx, id, newLength, newGenStamp)
	if err == nil {
		s.ch.replica(blocks.Replica{ID: blocks.ID{Block: id.Block, GenStamp: newGenStamp}, State: blocks.Finalized, Length: newLength})
	}
	return err
}

func (s *reportingStore) Delete(ctx context.Context, id blocks.ID) error {
	// Only a replica that was there under id is reported deleted: a Delete
	// of a stale generation stamp leaves the current replica (and its row).
	_, statErr := s.Store.Stat(ctx, id)
	err := s.Store.Delete(ctx, id)
	if err == nil && statErr == nil {
		s.ch.deleted(id)
	}
	return err
}

func (s *reportingStore) Read(ctx context.Context, id blocks.ID, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Read(ctx, id, offset, length)
	if err != nil {
		s.noteCorrupt(id, err)
		return nil, err
	}
	return &reportingReader{ReadCloser: rc, s: s, id: id}, nil
}

// Corrupt passes blocks.Corrupter through, for tests.
func (s *reportingStore) Corrupt(ctx context.Context, id blocks.ID, offset int64) error {
	c, ok := s.Store.(blocks.Corrupter)
	if !ok {
		return fmt.Errorf("datanode: corrupt %v: the store cannot", id)
	}
	return c.Corrupt(ctx, id, offset)
}

func (s *reportingStore) noteCorrupt(id blocks.ID, err error) {
	if !errors.Is(err, blocks.ErrCorrupt) {
		return
	}
	r, serr := s.Store.Stat(context.Background(), id)
	if serr != nil {
		return
	}
	s.ch.add(registry.Change{Reported: registry.Reported{Block: id.Block, GenStamp: id.GenStamp, Length: r.Length, State: store.ReplicaCorrupt}})
}

type reportingReader struct {
	io.ReadCloser
	s  *reportingStore
	id blocks.ID
}

func (r *reportingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		r.s.noteCorrupt(r.id, err)
	}
	return n, err
}

type reportingWriter struct {
	blocks.Writer
	id blocks.ID
	ch *changes
}

func (w *reportingWriter) Finalize(ctx context.Context) (int64, error) {
	n, err := w.Writer.Finalize(ctx)
	if err == nil {
		w.ch.replica(blocks.Replica{ID: w.id, State: blocks.Finalized, Length: n})
	}
	return n, err
}

func (w *reportingWriter) Abort() error {
	err := w.Writer.Abort()
	if err == nil {
		w.ch.deleted(w.id)
	}
	return err
}
