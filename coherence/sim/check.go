package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/coherence"
)

// Kind is a client operation's kind.
type Kind uint8

const (
	Read  Kind = iota + 1 // a stat: the row's version, from the cache or the store
	Write                 // a change of each row: its version goes up by one
)

// Op is one client operation of the history. Times are the simulator's
// true time in nanoseconds, as the client saw them.
type Op struct {
	Client  int
	Kind    Kind
	Rows    []int // read: the path's rows, the last one read; write: the rows changed
	Slot    int   // the instance asked (-1: none was up)
	Start   int64
	End     int64  // -1: no answer (timed out): a write's outcome is then the store's
	OK      bool   // answered with success
	Version uint64 // a read's answer
	Cached  bool   // a read answered from the cache

	txn     int
	targets []coherence.Target
	pending bool
}

// Result is a run's history and what it did.
type Result struct {
	Seed    uint64
	Ops     []Op
	Stats   Stats
	commits map[int]commitRec // by txn id: what the store committed, when
}

// Committed returns the versions write op i gave its rows (in sorted row
// order) and the store's commit time, or ok false if it did not commit.
func (r *Result) Committed(i int) (rows []int, vers []uint64, at int64, ok bool) {
	op := &r.Ops[i]
	if op.Kind != Write || op.txn == 0 {
		return nil, nil, 0, false
	}
	rec, ok := r.commits[op.txn]
	if !ok {
		return nil, nil, 0, false
	}
	rows = slices.Clone(op.Rows)
	slices.Sort(rows)
	return rows, rec.vers, rec.at, true
}

// Violation is a read that no linearization allows.
type Violation struct {
	Seed   uint64
	Read   int // index in Ops
	Row    int
	Reason string
	Cause  int // the op that makes the answer too old (-1 if none)
	res    *Result
}

const never = math.MaxInt64

// Check checks every read of the history against the store's order of
// writes, row by row (each row is a register whose versions the store
// orders): a read must return a version committed before it ended, no older
// than the newest version whose write completed before it began, and no
// older than what a read that ended before it began returned. With writes
// ordered by the store and every answer a committed version, these three
// are linearizability (cross-checked with porcupine in the tests). It
// returns the first violation by the read's start, or nil.
func Check(r *Result) *Violation {
	type wv struct {
		op  int
		at  int64
		end int64
	}
	written := make(map[[2]uint64]wv) // (row, version) → write
	type point struct {
		t    int64
		kind int // 0: a read starts; 1: a write or read ends
		op   int
		row  int
		v    uint64
	}
	var pts []point
	for i := range r.Ops {
		op := &r.Ops[i]
		switch op.Kind {
		case Write:
			rows, vers, at, ok := r.Committed(i)
			if !ok {
				if op.OK {
					return &Violation{Seed: r.Seed, Read: i, Row: op.Rows[0], Cause: -1, res: r, Reason: "a write answered OK did not commit"}
				}
				continue
			}
			end := int64(never)
			if op.OK && op.End >= 0 {
				end = op.End
			}
			for k, row := range rows {
				written[[2]uint64{uint64(row), vers[k]}] = wv{op: i, at: at, end: end}
				if end != never {
					pts = append(pts, point{t: end, kind: 1, op: i, row: row, v: vers[k]})
				}
			}
		case Read:
			if !op.OK || op.End < 0 {
				continue
			}
			row := op.Rows[len(op.Rows)-1]
			pts = append(pts, point{t: op.Start, kind: 0, op: i, row: row}, point{t: op.End, kind: 1, op: i, row: row, v: op.Version})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.t != b.t:
			if a.t < b.t {
				return -1
			}
			return 1
		case a.kind != b.kind:
			return a.kind - b.kind // starts first: "before" is strict
		}
		return a.op - b.op
	})
	type best struct {
		v  uint64
		op int
	}
	floor := make(map[int]best) // row → the newest version seen completed
	for _, p := range pts {
		if p.kind == 1 {
			if b, ok := floor[p.row]; !ok || p.v > b.v {
				floor[p.row] = best{p.v, p.op}
			}
			continue
		}
		op := &r.Ops[p.op]
		v := op.Version
		if v > 0 {
			w, ok := written[[2]uint64{uint64(p.row), v}]
			if !ok {
				return &Violation{Seed: r.Seed, Read: p.op, Row: p.row, Cause: -1, res: r, Reason: fmt.Sprintf("version %d was never committed", v)}
			}
			if w.at >= op.End {
				return &Violation{Seed: r.Seed, Read: p.op, Row: p.row, Cause: w.op, res: r, Reason: fmt.Sprintf("version %d was committed after the read ended", v)}
			}
		}
		if b, ok := floor[p.row]; ok && v < b.v {
			return &Violation{Seed: r.Seed, Read: p.op, Row: p.row, Cause: b.op, res: r,
				Reason: fmt.Sprintf("returned version %d after version %d had been seen complete", v, b.v)}
		}
	}
	return nil
}

// String is the violation with the shortest useful excerpt of the
// history: the read, the operation that makes its answer too old, and the
// operations on the row between them.
func (v *Violation) String() string {
	var b strings.Builder
	r := v.res
	fmt.Fprintf(&b, "seed %d: row %d: op %d: %s\n", v.Seed, v.Row, v.Read, v.Reason)
	from := r.Ops[v.Read].Start
	if v.Cause >= 0 && r.Ops[v.Cause].Start < from {
		from = r.Ops[v.Cause].Start
	}
	to := r.Ops[v.Read].End
	n := 0
	for i := range r.Ops {
		op := &r.Ops[i]
		end := op.End
		if end < 0 {
			end = never
		}
		if !slices.Contains(op.Rows, v.Row) || op.Start > to {
			continue
		}
		switch op.Kind {
		case Read:
			if op.Rows[len(op.Rows)-1] != v.Row || op.End < 0 || end < from {
				continue
			}
		case Write:
			// a write that never answered shows by its commit, if any
			_, _, at, ok := r.Committed(i)
			if op.End < 0 && (!ok || at < from) || op.End >= 0 && end < from {
				continue
			}
		}
		mark := "  "
		if i == v.Read || i == v.Cause {
			mark = "=>"
		}
		if n++; n > 40 && i != v.Read && i != v.Cause {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", mark, r.describe(i))
	}
	if n > 40 {
		fmt.Fprintf(&b, "   (%d more on the row in between)\n", n-40)
	}
	return b.String()
}

// describe is one line of the history.
func (r *Result) describe(i int) string {
	op := &r.Ops[i]
	end := "no answer"
	if op.End >= 0 {
		end = fmt.Sprint(time.Duration(op.End))
	}
	s := fmt.Sprintf("op %d client %d at instance slot %d, %v .. %s: ", i, op.Client, op.Slot, time.Duration(op.Start), end)
	switch op.Kind {
	case Read:
		src := "store"
		if op.Cached {
			src = "cache"
		}
		s += fmt.Sprintf("read row %d = v%d (from the %s)", op.Rows[len(op.Rows)-1], op.Version, src)
	case Write:
		s += fmt.Sprintf("write rows %v", op.Rows)
		if _, vers, at, ok := r.Committed(i); ok {
			s += fmt.Sprintf(" committed v%v at %v", vers, time.Duration(at))
		} else {
			s += " not committed"
		}
		if op.End >= 0 && !op.OK {
			s += ", answered failed"
		}
	}
	return s
}
