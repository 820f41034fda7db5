package coherence

import (
	"slices"

	"github.com/nimbus-fs/nimbus/cache"
)

// The holder's side. An INV places a hold on the cache (cache.Hold: drop
// what the targets cover, refuse fills of it, and on release refuse every
// fill begun before) and is answered by ACK. The hold ends at the writer's
// RELEASE, or when the store has fenced the writer (Fenced): not when the
// writer merely left the membership, because a writer cut off from the
// coordinator may still have a commit on its way to the store. RELEASE is
// one-way; a holder that has not had it for Retry sends its ACK again, and
// a writer that has finished the write answers with RELEASE.

// hold is one write's hold on this instance.
type hold struct {
	h       *cache.Hold
	lastAck int64 // n.now in nanoseconds
}

func (n *Node) stepInv(m Message) {
	if g, ok := n.gone[m.From]; ok && g.fenced {
		return // it can commit nothing: no hold needed, and none would be released
	}
	if _, ok := n.holds[m.Op]; !ok {
		n.holds[m.Op] = &hold{h: n.cfg.Cache.Hold(m.Targets...), lastAck: n.now.UnixNano()}
	}
	n.send(Message{Type: MsgAck, To: m.From, Op: m.Op})
}

func (n *Node) stepRelease(m Message) {
	if m.Op.Writer != m.From {
		return
	}
	if h, ok := n.holds[m.Op]; ok {
		h.h.Release()
		delete(n.holds, m.Op)
	}
}

// releaseWriter releases every hold placed by writer id (it is fenced).
func (n *Node) releaseWriter(id NodeID) {
	for _, op := range n.holdOps() {
		if op.Writer == id {
			n.holds[op].h.Release()
			delete(n.holds, op)
		}
	}
}

// holdOps returns the ops holding now, sorted.
func (n *Node) holdOps() []OpID {
	ops := make([]OpID, 0, len(n.holds))
	for op := range n.holds {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b OpID) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
	return ops
}

// Holding returns how many writes hold on this instance now.
func (n *Node) Holding() int { return len(n.holds) }

func (n *Node) retryHolds() {
	if len(n.holds) == 0 {
		return
	}
	now := n.now.UnixNano()
	for _, op := range n.holdOps() {
		h := n.holds[op]
		if now-h.lastAck >= int64(n.cfg.Retry) {
			h.lastAck = now
			n.send(Message{Type: MsgAck, To: op.Writer, Op: op})
		}
	}
}
