package sim

import (
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
)

// slot is one instance's place: its hardware clock, its network position,
// and the incarnation running there now.
type slot struct {
	idx, dep int
	noCache  bool // Config.Uncached: reads go to the store, fills install nothing
	clockOff int64
	ppm      int64 // clock rate error, parts per million
	partEnd  int64 // cut off from coordinator and peers until then; its store link stalls

	// links are FIFO (TCP): the latest delivery time on each
	storeOut, storeIn, watch int64

	// the incarnation
	up, disconnected bool
	inc              int
	id               coherence.NodeID
	node             *coherence.Node
	cache            *cache.Cache
	joined           bool  // the coordinator has answered a join or renewal
	nextRenew        int64 // local
	reads            map[int]*rreq
	writes           map[int]*wreq    // by txn id
	bySeq            map[uint64]*wreq // by the core's OpID.Seq
}

// local returns the slot's clock at true time t: offset, and a rate within
// the configured drift.
func (sl *slot) local(t int64) time.Time {
	return time.Unix(0, sl.clockOff+t+t*sl.ppm/1_000_000)
}

func (sl *slot) partitioned(t int64) bool { return t < sl.partEnd }

// live reports whether incarnation inc is the one running.
func (sl *slot) live(inc int) bool { return sl.up && sl.inc == inc && sl.node != nil }

type rreq struct {
	op      int
	rows    []int
	tok     cache.Token
	canFill bool
}

type wreq struct {
	op      int
	txn     int
	rows    []int
	targets []coherence.Target
	opID    coherence.OpID
	locked  bool
}

// newIncarnation starts a fresh incarnation in sl: new ID, empty cache,
// no view, no session; it asks the coordinator to join at its next tick.
func (s *world) newIncarnation(sl *slot) {
	if sl.node != nil {
		s.disconnect(sl)
	}
	sl.inc++
	sl.id = coherence.NodeID(fmt.Sprintf("i%d.%d", sl.idx, sl.inc))
	c, err := cache.New(cache.Config{MaxBytes: 1 << 20, HashSeed: s.cfg.Seed | 1, DisableFillCheck: s.cfg.DisableFillCheck})
	if err != nil {
		panic(err) // a constant config
	}
	n, err := coherence.New(coherence.Config{
		ID: sl.id, Deployment: sl.dep, Cache: c, Owner: s.owner, Retry: retry,
		DisableInvalidation: s.cfg.DisableInvalidation || (sl.noCache && s.cfg.DisableUncachedInvalidation),
		DisableFencing:      s.cfg.DisableFencing,
	})
	if err != nil {
		panic(err)
	}
	sl.up, sl.disconnected, sl.node, sl.cache, sl.joined = true, false, n, c, false
	sl.nextRenew = sl.local(s.now).UnixNano()
	sl.reads, sl.writes, sl.bySeq = make(map[int]*rreq), make(map[int]*wreq), make(map[uint64]*wreq)
	s.tracef("%s starts", sl.id)
}

// disconnect closes the incarnation's store connection: the store aborts
// its open transactions once the close arrives (after what was sent
// before it).
func (s *world) disconnect(sl *slot) {
	if !sl.disconnected {
		sl.disconnected = true
		s.toStore(sl, &storeMsg{kind: smDisconnect, node: sl.id})
	}
}

func (s *world) owner(p uint64) int { return int(p % uint64(s.cfg.Deployments)) }

func (s *world) onTick(sl *slot) {
	if !sl.up || sl.node == nil {
		return
	}
	now := sl.local(s.now)
	sl.node.Tick(now)
	if sl.node.Err() != nil {
		s.tracef("%s session lost", sl.id)
		s.stats.Lost++
		s.newIncarnation(sl) // the server rejoins by itself, as ID.2
		return
	}
	if l := now.UnixNano(); l >= sl.nextRenew {
		if sl.joined {
			sl.nextRenew = l + int64(s.cfg.TTL)/4
		} else {
			sl.nextRenew = l + joinRetry
		}
		if !sl.partitioned(s.now) {
			s.after(s.delay(), event{kind: evCoordReq, slot: sl.idx, inc: sl.inc, v: l})
		}
	}
	s.process(sl)
}

// process carries out what the core asked for.
func (s *world) process(sl *slot) {
	if sl.node == nil || !sl.node.HasReady() {
		return
	}
	rd := sl.node.Ready()
	for i := range rd.Messages {
		s.sendPeer(sl, &rd.Messages[i])
	}
	for _, c := range rd.Commits {
		w := sl.bySeq[c.Op.Seq]
		s.tracef("%s commit %s", sl.id, c.Op)
		if s.cfg.Faults && s.rng.Float64() < cutChance {
			s.partition(sl) // the worst moment: the commit is sent and stalls
		}
		s.toStore(sl, &storeMsg{kind: smCommit, id: w.txn, view: c.View})
	}
	for _, id := range rd.Fences {
		s.tracef("%s fence %s", sl.id, id)
		s.toStore(sl, &storeMsg{kind: smFence, node: id})
	}
	if rd.Floor != 0 {
		s.toStore(sl, &storeMsg{kind: smFloor, view: rd.Floor})
	}
}

// sendPeer sends m: lost if either end is cut off (the receiver's side is
// checked at delivery), lost or duplicated at random with faults on.
func (s *world) sendPeer(from *slot, m *coherence.Message) {
	s.stats.Messages++
	to := s.slotOf(m.To)
	if to < 0 || from.partitioned(s.now) {
		s.stats.Dropped++
		return
	}
	if s.cfg.Faults && s.rng.Float64() < lossChance {
		s.stats.Dropped++
		return
	}
	inc := s.slots[to].inc
	s.after(s.delay(), event{kind: evPeer, slot: to, inc: inc, msg: m})
	if s.cfg.Faults && s.rng.Float64() < dupChance {
		s.after(s.delay(), event{kind: evPeer, slot: to, inc: inc, msg: m})
	}
}

// slotOf returns the slot whose running incarnation is id, or -1.
func (s *world) slotOf(id coherence.NodeID) int {
	for i, sl := range s.slots {
		if sl.id == id {
			return i
		}
	}
	return -1
}

// toStore sends a request on sl's store connection: FIFO, and stalled
// while sl is cut off (the case fencing exists for: a commit that reaches
// the store long after its writer lost its session).
func (s *world) toStore(sl *slot, m *storeMsg) {
	m.slot, m.inc = sl.idx, sl.inc
	if m.node == "" {
		m.node = sl.id
	}
	t := s.now + s.delay()
	if sl.partitioned(s.now) {
		t = sl.partEnd + s.delay()
	}
	if t < sl.storeOut {
		t = sl.storeOut
	}
	sl.storeOut = t
	s.at(t, event{kind: evStoreReq, sm: m})
}

func (s *world) fromStore(m *storeMsg) {
	sl := s.slots[m.slot]
	t := s.now + s.delay()
	if sl.partitioned(s.now) {
		t = sl.partEnd + s.delay()
	}
	if t < sl.storeIn {
		t = sl.storeIn
	}
	sl.storeIn = t
	s.at(t, event{kind: evStoreResp, slot: m.slot, inc: m.inc, sm: m})
}
