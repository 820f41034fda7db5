package sim

import "github.com/nimbus-fs/nimbus/coherence"

// The simulator is one queue of events in true time (nanoseconds), taken
// in (time, sequence) order: the sequence breaks ties in the order events
// were scheduled, so a run depends on nothing but its seed.

type evKind uint8

const (
	evTick      evKind = iota + 1 // slot: tick the node, renew the lease
	evPeer                        // slot: a peer message arrives
	evStoreReq                    // a request arrives at the store
	evStoreResp                   // slot: the store's answer arrives
	evCoordReq                    // a join or renewal arrives at the coordinator
	evCoordResp                   // slot: the coordinator's answer arrives
	evExpire                      // the coordinator checks a lease
	evView                        // slot: a membership view arrives
	evClient                      // a client issues its next operation
	evRequest                     // slot: a client's request arrives
	evReply                       // a client's answer arrives
	evTimeout                     // a client gives up on an operation
	evPartition                   // cut an instance off for a while
	evCrash                       // crash an instance
	evRestart                     // restart a crashed instance
)

type event struct {
	at   int64
	seq  uint64
	kind evKind
	slot int
	inc  int // the incarnation addressed (slot events)
	n    int // client, op, member index: the kind says
	v    int64
	msg  *coherence.Message
	sm   *storeMsg
	view *coherence.View
	ok   bool
}

// evHeap is a binary min-heap of events by (at, seq).
type evHeap []event

func (h evHeap) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}

func (h *evHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *evHeap) pop() event {
	q := *h
	e := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{}
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q.less(l, m) {
			m = l
		}
		if r < len(q) && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
}

// storeMsg is a request to the store or its answer.
type storeMsg struct {
	kind  smKind
	slot  int
	inc   int
	id    int // read request id or txn id
	rows  []int
	vers  []uint64
	view  int64
	node  coherence.NodeID // writer (lock), fenced or disconnected instance
	ok    bool
	txns  []*txn // lock grants to deliver (internal)
	write *wreq
}

type smKind uint8

const (
	smRead smKind = iota + 1
	smLock
	smCommit
	smAbort
	smFence
	smFloor
	smDisconnect
)
