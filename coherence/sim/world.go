package sim

import (
	"slices"
	"time"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/meta"
)

// The store's side: requests in, answers out on the sender's connection.
func (s *world) onStore(m *storeMsg) {
	switch m.kind {
	case smRead:
		m.vers = make([]uint64, len(m.rows))
		for i, r := range m.rows {
			m.vers[i] = s.st.vers[r]
		}
		s.fromStore(m)
	case smLock:
		t := &txn{id: m.id, writer: m.node, slot: m.slot, inc: m.inc, rows: m.rows}
		if !s.st.lock(t) {
			m.ok = false
			s.fromStore(m)
			return
		}
		if s.st.grantable(t.id) != nil {
			s.granted(t)
		}
	case smCommit:
		ok, granted := s.st.commit(m.id, m.view, s.now)
		s.tracef("store commit txn %d of %s view %d (floor %d): %v", m.id, m.node, m.view, s.st.floor, ok)
		m.ok = ok
		s.fromStore(m)
		s.grant(granted)
	case smAbort:
		s.grant(s.st.end(m.id))
	case smFence:
		s.grant(s.st.fence(m.node))
		s.fromStore(m)
	case smFloor:
		s.st.raiseFloor(m.view)
		s.fromStore(m)
	case smDisconnect:
		s.grant(s.st.abortAll(m.node))
	}
}

func (s *world) grant(ts []*txn) {
	for _, t := range ts {
		s.granted(t)
	}
}

func (s *world) granted(t *txn) {
	s.fromStore(&storeMsg{kind: smLock, slot: t.slot, inc: t.inc, id: t.id, ok: true})
}

// onStoreResp: an answer reaches the instance, if the incarnation that
// asked still runs.
func (s *world) onStoreResp(e event) {
	sl, m := s.slots[e.slot], e.sm
	if !sl.live(e.inc) {
		return
	}
	now := sl.local(s.now)
	sl.node.Tick(now)
	switch m.kind {
	case smRead:
		r := sl.reads[m.id]
		delete(sl.reads, m.id)
		installed := -1
		if r.canFill && sl.node.Serving(now) {
			rows := s.inodes(r.rows, m.vers)
			if installed = sl.cache.PutPath(r.tok, rows...); installed == len(rows) {
				s.stats.Installs++
			}
		}
		if s.cfg.Trace != nil {
			s.tracef("%s op %d: read rows %v = v%v from the store; installed %d rows (-1: not serving)", sl.id, r.op, r.rows, m.vers, installed)
		}
		s.reply(r.op, true, m.vers[len(m.vers)-1])
	case smLock:
		w := sl.writes[m.id]
		if !m.ok {
			delete(sl.writes, m.id)
			s.reply(w.op, false, 0)
			return
		}
		op, err := sl.node.WriteLocked(w.targets)
		if err != nil {
			delete(sl.writes, m.id)
			s.toStore(sl, &storeMsg{kind: smAbort, id: m.id})
			s.reply(w.op, false, 0)
			return
		}
		s.tracef("%s write %s rows %v locked", sl.id, op, w.rows)
		w.opID, w.locked = op, true
		sl.bySeq[op.Seq] = w
	case smCommit:
		w := sl.writes[m.id]
		delete(sl.writes, m.id)
		delete(sl.bySeq, w.opID.Seq)
		if err := sl.node.Committed(w.opID, m.ok); err != nil {
			panic(err) // the simulator's bookkeeping is wrong
		}
		s.reply(w.op, m.ok, 0)
	case smFence:
		sl.node.Fenced(m.node)
	case smFloor:
		sl.node.FloorRaised(m.view)
	}
	s.process(sl)
}

// inodes returns the cache rows of a path: "/", then the rows in order.
func (s *world) inodes(rows []int, vers []uint64) []cache.Inode {
	out := make([]cache.Inode, 0, len(rows)+1)
	out = append(out, s.root)
	for i, r := range rows {
		out = append(out, s.inode(r, vers[i]))
	}
	return out
}

// inode is store row r at version v. The version rides in SubtreeOwner, a
// field the cache keeps without reading it.
func (s *world) inode(r int, v uint64) cache.Inode {
	if r < s.cfg.Dirs {
		return cache.Inode{Parent: 1, Name: s.dirNames[r], ID: dirID(r), Type: meta.TypeDir, Perm: 0o755, Owner: "u", Group: "g", SubtreeOwner: v}
	}
	d, f := (r-s.cfg.Dirs)/s.cfg.Files, (r-s.cfg.Dirs)%s.cfg.Files
	return cache.Inode{Parent: dirID(d), Name: s.fileNames[f], ID: 10000 + uint64(r), Type: meta.TypeFile, Perm: 0o644, Owner: "u", Group: "g", SubtreeOwner: v}
}

func dirID(d int) uint64 { return 100 + uint64(d) }

// The coordinator: leases in true time, views to every member's watch.
type coord struct {
	version int64
	members []member // sorted by (deployment, id)
	expired map[coherence.NodeID]bool
}

type member struct {
	id      coherence.NodeID
	slot    int
	dep     int
	noCache bool
	expiry  int64
}

func (c *coord) find(id coherence.NodeID) int {
	for i := range c.members {
		if c.members[i].id == id {
			return i
		}
	}
	return -1
}

// onCoordReq: a join or renewal sent at local time e.v arrives.
func (s *world) onCoordReq(e event) {
	sl := s.slots[e.slot]
	if sl.partitioned(s.now) || sl.inc != e.inc {
		return // a renewal from an incarnation gone: its lease runs out
	}
	i := s.co.find(sl.id)
	if i < 0 {
		if s.co.expired[sl.id] {
			// IDs are never reused: peers have fenced this one and would
			// not invalidate it again. The instance must rejoin as new.
			s.after(s.delay(), event{kind: evCoordResp, slot: e.slot, inc: e.inc, ok: false})
			return
		}
		s.co.members = append(s.co.members, member{id: sl.id, slot: sl.idx, dep: sl.dep, noCache: sl.noCache})
		slices.SortFunc(s.co.members, func(a, b member) int {
			if a.dep != b.dep {
				return a.dep - b.dep
			}
			if a.id < b.id {
				return -1
			}
			if a.id > b.id {
				return 1
			}
			return 0
		})
		i = s.co.find(sl.id)
		s.co.members[i].expiry = s.now + int64(s.cfg.TTL)
		s.broadcast()
	}
	s.co.members[i].expiry = s.now + int64(s.cfg.TTL)
	s.after(int64(s.cfg.TTL), event{kind: evExpire, slot: e.slot, inc: e.inc})
	s.after(s.delay(), event{kind: evCoordResp, slot: e.slot, inc: e.inc, v: e.v, ok: true})
}

func (s *world) onCoordResp(e event) {
	sl := s.slots[e.slot]
	if sl.partitioned(s.now) || !sl.live(e.inc) {
		return
	}
	if !e.ok {
		// The lease is gone: the session ends now, not at its deadline.
		s.tracef("%s session lost (the coordinator says so)", sl.id)
		s.stats.Lost++
		s.newIncarnation(sl)
		return
	}
	if !sl.joined {
		sl.joined = true
		sl.nextRenew = e.v + int64(s.cfg.TTL)/4
	}
	// The timing argument (docs/ELASTIC.md): from the renewal's send time.
	d := e.v + int64(float64(s.cfg.TTL)*(1-s.cfg.Drift)) - margin
	sl.node.Renewed(time.Unix(0, d))
}

func (s *world) onExpire(e event) {
	sl := s.slots[e.slot]
	id := coherence.NodeID("")
	if sl.inc == e.inc {
		id = sl.id
	} else {
		id = s.idOf(e.slot, e.inc)
	}
	i := s.co.find(id)
	if i < 0 || s.co.members[i].expiry > s.now {
		return
	}
	s.tracef("coordinator: %s expired", id)
	s.co.members = slices.Delete(s.co.members, i, i+1)
	s.co.expired[id] = true
	s.broadcast()
}

func (s *world) idOf(slot, inc int) coherence.NodeID {
	return coherence.NodeID("i" + itoa(slot) + "." + itoa(inc))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// broadcast sends the new view down every member's watch: in order,
// stalled while the member is cut off.
func (s *world) broadcast() {
	s.co.version++
	v := &coherence.View{Version: s.co.version, Members: make([]coherence.Member, len(s.co.members))}
	for i, m := range s.co.members {
		v.Members[i] = coherence.Member{ID: m.id, Deployment: m.dep, NoCache: m.noCache}
	}
	// Every running instance watches the membership (a watch is not tied
	// to a lease): one that was dropped learns it from the view.
	for _, sl := range s.slots {
		if !sl.up {
			continue
		}
		t := s.now + s.delay()
		if sl.partitioned(s.now) {
			t = sl.partEnd + s.delay()
		}
		if t < sl.watch {
			t = sl.watch
		}
		sl.watch = t
		s.at(t, event{kind: evView, slot: sl.idx, inc: sl.inc, view: v})
	}
}
