package sim

import (
	"slices"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
)

// The operation mix, per mille: reads of a file (at an instance of the
// deployment owning its directory), reads of a directory's row (at any
// instance: every deployment resolves paths through directories), writes
// of a file, chmods of a directory (a target sent everywhere), and chmod -R
// of a directory and its files (one subtree target).
// Reads split 2:1 between files and directories; writes 14:5:1 between
// files, chmods and chmod -R.

func (s *world) issue(c int) {
	if s.issued >= s.cfg.Ops {
		return
	}
	s.issued++
	op := Op{Client: c, Start: s.now, End: -1, pending: true}
	var targets []coherence.Target
	d := s.rng.IntN(s.cfg.Dirs)
	f := s.rng.IntN(s.cfg.Files)
	fileRow := s.cfg.Dirs + d*s.cfg.Files + f
	anyDep := s.rng.IntN(s.cfg.Deployments)
	dep := anyDep
	wr := s.cfg.WritesPerMille
	pmReadFile := (1000 - wr) * 2 / 3
	pmReadDir := 1000 - wr - pmReadFile
	pmWrite, pmChmod := wr*14/20, wr*5/20
	switch p := s.rng.IntN(1000); {
	case p < pmReadFile:
		op.Kind, op.Rows = Read, []int{d, fileRow}
		dep = s.owner(dirID(d))
	case p < pmReadFile+pmReadDir:
		op.Kind, op.Rows = Read, []int{d}
	case p < pmReadFile+pmReadDir+pmWrite:
		op.Kind, op.Rows = Write, []int{fileRow}
		dep = s.owner(dirID(d))
		targets = []coherence.Target{
			coherence.Local(cache.Key(dirID(d), s.fileNames[f])),
			coherence.Local(cache.ListingOf(dirID(d))),
		}
	case p < pmReadFile+pmReadDir+pmWrite+pmChmod:
		op.Kind, op.Rows = Write, []int{d}
		dep = s.owner(1)
		targets = []coherence.Target{coherence.Everywhere(cache.Key(1, s.dirNames[d]))}
	default:
		op.Kind, op.Rows = Write, []int{d}
		for f := 0; f < s.cfg.Files; f++ {
			op.Rows = append(op.Rows, s.cfg.Dirs+d*s.cfg.Files+f)
		}
		dep = s.owner(1)
		targets = []coherence.Target{coherence.Everywhere(cache.Subtree(dirID(d)))}
		s.stats.Subtrees++
	}
	// The client routes to a running instance of the deployment (it does
	// not know about sessions: an instance without one reads the store).
	var up []int
	for _, sl := range s.slots {
		if sl.dep == dep && sl.up {
			up = append(up, sl.idx)
		}
	}
	idx := len(s.hist)
	s.cl[c].op = idx
	if len(up) == 0 {
		op.Slot = -1
		s.hist = append(s.hist, op)
		s.after(opTimeout, event{kind: evTimeout, n: idx})
		return
	}
	op.Slot = up[s.rng.IntN(len(up))]
	s.hist = append(s.hist, op)
	sl := s.slots[op.Slot]
	s.hist[idx].targets = targets
	s.after(s.delay(), event{kind: evRequest, slot: op.Slot, inc: sl.inc, n: idx})
	s.after(opTimeout, event{kind: evTimeout, n: idx})
}

// names returns the path components of the rows of a read.
func (s *world) names(rows []int) []string {
	names := []string{s.dirNames[rows[0]]}
	if len(rows) > 1 {
		names = append(names, s.fileNames[(rows[1]-s.cfg.Dirs)%s.cfg.Files])
	}
	return names
}

// onRequest: a client's operation reaches the instance.
func (s *world) onRequest(e event) {
	sl := s.slots[e.slot]
	if !sl.live(e.inc) {
		return // the client times out
	}
	op := &s.hist[e.n]
	now := sl.local(s.now)
	sl.node.Tick(now)
	if op.Kind == Read {
		s.stats.Reads++
		if !sl.noCache && sl.node.Serving(now) {
			names := s.names(op.Rows)
			got := sl.cache.Resolve(names, nil)
			if len(got) == len(names)+1 {
				if s.cfg.Trace != nil {
					s.tracef("%s op %d: read row %d = v%d from the cache", sl.id, e.n, op.Rows[len(op.Rows)-1], got[len(got)-1].SubtreeOwner)
				}
				s.stats.CacheHits++
				op.Cached = true
				s.reply(e.n, true, got[len(got)-1].SubtreeOwner)
				return
			}
		}
		s.stats.Fills++
		s.reqSeq++
		r := &rreq{op: e.n, rows: op.Rows, canFill: !sl.noCache && sl.node.Serving(now)}
		r.tok = sl.cache.Begin()
		sl.reads[s.reqSeq] = r
		s.toStore(sl, &storeMsg{kind: smRead, id: s.reqSeq, rows: op.Rows})
		return
	}
	s.stats.Writes++
	s.txnSeq++
	rows := append([]int(nil), op.Rows...)
	slices.Sort(rows)
	op.txn = s.txnSeq
	sl.writes[s.txnSeq] = &wreq{op: e.n, txn: s.txnSeq, rows: rows, targets: op.targets}
	s.toStore(sl, &storeMsg{kind: smLock, id: s.txnSeq, rows: rows})
}

// reply sends an operation's answer back to its client.
func (s *world) reply(op int, ok bool, v uint64) {
	s.after(s.delay(), event{kind: evReply, n: op, ok: ok, v: int64(v)})
}

func (s *world) onReply(e event) {
	op := &s.hist[e.n]
	if !op.pending {
		return // timed out already
	}
	op.pending = false
	op.End, op.OK = s.now, e.ok
	if op.Kind == Read {
		op.Version = uint64(e.v)
	} else if !e.ok {
		s.stats.WritesFailed++
	}
	s.clientDone(op.Client)
}

func (s *world) clientDone(c int) {
	s.done++
	s.cl[c].op = -1
	s.after(s.rng.Int64N(think), event{kind: evClient, n: c})
}
