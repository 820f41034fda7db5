package sim

import "github.com/nimbus-fs/nimbus/coherence"

// store models the metadata store as the protocol relies on it: rows with
// a version each; exclusive row locks granted in request order (a request
// queues on all its rows at once, so two writers never deadlock); unlocked
// reads that see the latest commit (read committed, so a read does not wait
// for a writer that holds the row's lock); atomic commits; and the two
// fences. Fence(id) refuses every later commit of instance id and aborts
// its open transactions, as an UPDATE of id's instance row would that each
// of its write transactions locks shared, waiting for the ones in flight.
// The floor refuses the commit of a write begun under a view older than it
// (the join handshake, package coherence). Operations are instants:
// the simulator delivers requests one at a time.
type store struct {
	vers    []uint64
	queues  [][]int // per row: txn ids waiting or holding, holder first
	txns    map[int]*txn
	open    map[coherence.NodeID][]int // open txns by writer, in begin order
	fenced  map[coherence.NodeID]bool
	floor   int64
	commits map[int]commitRec // by txn id
}

type txn struct {
	id      int
	writer  coherence.NodeID
	slot    int
	inc     int
	rows    []int // sorted
	granted bool
}

type commitRec struct {
	at   int64
	vers []uint64 // per row of the txn, its new version
}

func newStore(rows int) *store {
	return &store{
		vers:    make([]uint64, rows),
		queues:  make([][]int, rows),
		txns:    make(map[int]*txn),
		open:    make(map[coherence.NodeID][]int),
		fenced:  make(map[coherence.NodeID]bool),
		commits: make(map[int]commitRec),
	}
}

// lock queues t on its rows; it returns false if t's writer is fenced.
// Granted transactions are returned by grants.
func (s *store) lock(t *txn) bool {
	if s.fenced[t.writer] {
		return false
	}
	s.txns[t.id] = t
	s.open[t.writer] = append(s.open[t.writer], t.id)
	for _, r := range t.rows {
		s.queues[r] = append(s.queues[r], t.id)
	}
	return true
}

// grantable returns t if it heads every queue it is in and is not granted yet.
func (s *store) grantable(id int) *txn {
	t, ok := s.txns[id]
	if !ok || t.granted {
		return nil
	}
	for _, r := range t.rows {
		if s.queues[r][0] != id {
			return nil
		}
	}
	t.granted = true
	return t
}

// end removes txn id and returns the transactions its release grants.
func (s *store) end(id int) []*txn {
	t, ok := s.txns[id]
	if !ok {
		return nil
	}
	delete(s.txns, id)
	ids := s.open[t.writer]
	for i, x := range ids {
		if x == id {
			s.open[t.writer] = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(s.open[t.writer]) == 0 {
		delete(s.open, t.writer)
	}
	var granted []*txn
	for _, r := range t.rows {
		q := s.queues[r]
		for i, x := range q {
			if x == id {
				q = append(q[:i], q[i+1:]...)
				break
			}
		}
		s.queues[r] = q
		if len(q) > 0 {
			if g := s.grantable(q[0]); g != nil {
				granted = append(granted, g)
			}
		}
	}
	return granted
}

// commit commits txn id at time at if its writer is not fenced and view
// is not below the floor; the transaction ends either way.
func (s *store) commit(id int, view, at int64) (ok bool, granted []*txn) {
	t, found := s.txns[id]
	if !found || !t.granted {
		return false, s.end(id)
	}
	if s.fenced[t.writer] || view < s.floor {
		return false, s.end(id)
	}
	rec := commitRec{at: at, vers: make([]uint64, len(t.rows))}
	for i, r := range t.rows {
		s.vers[r]++
		rec.vers[i] = s.vers[r]
	}
	s.commits[id] = rec
	return true, s.end(id)
}

// abortAll ends every open transaction of writer w.
func (s *store) abortAll(w coherence.NodeID) []*txn {
	var granted []*txn
	for _, id := range append([]int(nil), s.open[w]...) {
		granted = append(granted, s.end(id)...)
	}
	return granted
}

func (s *store) fence(w coherence.NodeID) []*txn {
	s.fenced[w] = true
	return s.abortAll(w)
}

func (s *store) raiseFloor(v int64) {
	if v > s.floor {
		s.floor = v
	}
}
