package coherence

import (
	"fmt"
	"slices"

	"github.com/nimbus-fs/nimbus/cache"
)

// The writer's side. A write runs:
//
//	WriteLocked → hold locally, INV to each target instance (re-sent every Retry)
//	each ACK, or the instance's departure from the view → crossed off
//	none left → Ready.Commits: the I/O loop commits in the store
//	Committed(op, ok) → release locally, RELEASE to each target instance
//
// An ACK for a write that is no longer pending is a holder asking about a
// RELEASE it never got: the answer is RELEASE.

// write is one pending write.
type write struct {
	op         OpID
	local      *cache.Hold
	dests      []dest // sorted by id
	view       int64  // the view version the targets were computed from
	committing bool   // Ready.Commits has it; waiting for Committed
	lastSend   int64  // n.now, in nanoseconds, of the latest INV round
}

// dest is one instance a write invalidates.
type dest struct {
	id      NodeID
	targets []cache.Target
	done    bool // acked, or departed
}

func (w *write) departed(id NodeID) {
	for i := range w.dests {
		if w.dests[i].id == id {
			w.dests[i].done = true
		}
	}
}

func (w *write) waiting() bool {
	for i := range w.dests {
		if !w.dests[i].done {
			return true
		}
	}
	return false
}

// WriteLocked begins a write whose locks the I/O loop has taken in the
// store: it holds targets in the local cache and invalidates every live
// instance they reach. The write's commit comes back in Ready.Commits once
// every target instance has acknowledged or left the membership; report
// its outcome with Committed. Abort with Committed(op, false) at any time.
func (n *Node) WriteLocked(targets []Target) (OpID, error) {
	if n.lost {
		return OpID{}, ErrLost
	}
	if n.view.Version == 0 {
		return OpID{}, ErrNoView
	}
	n.seq++
	w := &write{op: OpID{Writer: n.cfg.ID, Seq: n.seq}, view: n.view.Version, lastSend: n.now.UnixNano()}
	all := make([]cache.Target, len(targets))
	for i, t := range targets {
		all[i] = t.Target
	}
	w.local = n.cfg.Cache.Hold(all...)
	if !n.cfg.DisableInvalidation {
		for _, id := range n.livePeers() {
			p := n.members[id]
			if p.noCache {
				continue // it caches nothing to invalidate
			}
			var ts []cache.Target
			for _, t := range targets {
				if n.reaches(t, p.deployment) {
					ts = append(ts, t.Target)
				}
			}
			if len(ts) > 0 {
				w.dests = append(w.dests, dest{id: id, targets: ts})
				n.send(Message{Type: MsgInv, To: id, Op: w.op, Targets: ts})
			}
		}
	}
	n.writes = append(n.writes, w)
	n.maybeCommit(w)
	return w.op, nil
}

// reaches reports whether target t must reach an instance of deployment d.
func (n *Node) reaches(t Target, d int) bool {
	return t.Everywhere || n.cfg.Owner(t.Route) == d
}

func (n *Node) maybeCommit(w *write) {
	if !w.committing && !w.waiting() {
		w.committing = true
		n.rd.Commits = append(n.rd.Commits, Commit{Op: w.op, View: w.view})
	}
}

func (n *Node) maybeCommitAll() {
	for _, w := range n.writes {
		n.maybeCommit(w)
	}
}

func (n *Node) findWrite(seq uint64) (int, *write) {
	i, ok := slices.BinarySearchFunc(n.writes, seq, func(w *write, s uint64) int {
		switch {
		case w.op.Seq < s:
			return -1
		case w.op.Seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return -1, nil
	}
	return i, n.writes[i]
}

// Committed reports the outcome of a write's transaction (ok: committed;
// otherwise aborted or refused, e.g. because the store fenced this
// instance). The core releases it locally and sends RELEASE.
func (n *Node) Committed(op OpID, ok bool) error {
	i, w := n.findWrite(op.Seq)
	if op.Writer != n.cfg.ID || w == nil {
		return fmt.Errorf("coherence: Committed(%s, %v): no such pending write", op, ok)
	}
	w.local.Release()
	for _, d := range w.dests {
		n.send(Message{Type: MsgRelease, To: d.id, Op: op})
	}
	n.writes = slices.Delete(n.writes, i, i+1)
	return nil
}

func (n *Node) stepAck(m Message) {
	if m.Op.Writer != n.cfg.ID {
		return
	}
	_, w := n.findWrite(m.Op.Seq)
	if w == nil {
		if m.Op.Seq <= n.seq {
			n.send(Message{Type: MsgRelease, To: m.From, Op: m.Op}) // finished: its RELEASE was lost
		}
		return
	}
	for i := range w.dests {
		if w.dests[i].id == m.From {
			w.dests[i].done = true
		}
	}
	n.maybeCommit(w)
}

func (n *Node) retryWrites() {
	now := n.now.UnixNano()
	for _, w := range n.writes {
		if w.committing || now-w.lastSend < int64(n.cfg.Retry) {
			continue
		}
		w.lastSend = now
		for _, d := range w.dests {
			if !d.done {
				n.send(Message{Type: MsgInv, To: d.id, Op: w.op, Targets: d.targets})
			}
		}
	}
}
