// Package subtree is HopsFS's subtree operations protocol (section 6 of the
// HopsFS paper) as a pure state machine, in the manner of etcd's
// raft: no goroutines, clocks or store inside. The namespace engine drives
// it: it asks the Machine what to do next, does it (a store transaction, a
// wait), and steps the Machine with what happened. The engine also keeps a
// Table of the operations under way and asks Check what a flag it met on a
// path means.
//
// An operation on a non-empty directory (a move, chmod, chown, recursive
// delete, set-quota) runs in phases:
//
//	SetFlag  one transaction sets the subtree-lock flag on the directory's
//	         row (the owning engine instance's id) and writes its row in the
//	         subtree operation table; from its commit on, every operation that
//	         resolves a path through the directory backs off;
//	Quiesce  takes and releases the locks of the whole subtree, level by
//	         level, in the global lock order: it waits for every operation
//	         that resolved its path before the flag and still holds locks;
//	Work     the operation itself, in one transaction or in batches, which
//	         clears the flag and the table row with its last commit;
//	Clear    after a failure, clears the flag and the row.
//
// An overlapping operation (a flag met on the path, or below it in the
// quiesce) makes the Machine wait, with a growing backoff, and start again,
// until its time limit; past it the operation fails busy.
package subtree

import (
	"errors"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/internal/backoff"
)

// Kind names a subtree operation; it is persisted in the subtree operation
// table, so the values never change.
type Kind uint8

const (
	KindRename Kind = 1
	KindChmod  Kind = 2
	KindChown  Kind = 3
	KindDelete Kind = 4
	KindQuota  Kind = 5
	// A recursive chmod or chown: every inode of the subtree, in batches;
	// the next start finishes one that a crash interrupted.
	KindChmodR Kind = 6
	KindChownR Kind = 7
)

func (k Kind) String() string {
	switch k {
	case KindRename:
		return "rename"
	case KindChmod:
		return "set permission"
	case KindChown:
		return "set owner"
	case KindDelete:
		return "delete"
	case KindQuota:
		return "set quota"
	case KindChmodR:
		return "recursive set permission"
	case KindChownR:
		return "recursive set owner"
	}
	return "unknown subtree operation"
}

// Verdict is what a flag met on a path means to an operation.
type Verdict uint8

const (
	Free  Verdict = iota // no flag
	Own                  // the operation's own flag: go on
	Busy                 // a live operation's flag: back off
	Stale                // the flag of an instance that is gone: clear it
)

// Check judges the flag owner found on the row of directory id, for an
// operation of the running instance that owns the flag of directory own (0:
// none). alive says whether owner, when it is another instance, is still
// serving (a NameNode beside this one on a shared store): its flag is then
// another operation's under way; else its owner is gone (a previous
// incarnation, or a NameNode that stopped beating) and the flag is stale.
func Check(owner, id, instance, own uint64, alive bool) Verdict {
	switch {
	case owner == 0:
		return Free
	case owner != instance && alive:
		return Busy
	case owner != instance:
		return Stale
	case id == own:
		return Own
	}
	return Busy
}

// Op is one subtree operation under way.
type Op struct {
	ID   uint64 // the directory's inode id
	Kind Kind
	Path string
	Age  Age // when it began: older operations go first
}

// Age orders subtree operations, of this NameNode and of others on a shared
// store alike: the time an operation began (Unix nanoseconds, its starter's
// clock: set once, kept across its restarts), then its owner's instance id
// and its directory's id, so that two operations never tie. The age is
// persisted in the operation's row, so that two NameNodes whose operations
// meet each other's flags decide from the same two values which gives way.
// Clocks of different machines only shift who goes first, never that one
// of the two does.
type Age struct {
	Started int64
	Owner   uint64
	ID      uint64
}

// Before reports whether a is older than b.
func (a Age) Before(b Age) bool {
	if a.Started != b.Started {
		return a.Started < b.Started
	}
	if a.Owner != b.Owner {
		return a.Owner < b.Owner
	}
	return a.ID < b.ID
}

// ErrOverlap is returned by Table.Begin for an operation whose subtree
// overlaps one under way.
var ErrOverlap = errors.New("subtree: overlaps an operation under way")

// Table is the running instance's operations under way, by directory id.
// Not safe for concurrent use: the engine holds a mutex around it.
type Table struct {
	ops map[uint64]Op
}

// Begin registers op, refusing it when its path is the path of an operation
// under way, or above or below one, or when an operation on the same
// directory is still in the table: one that has committed its work (and
// cleared its flag) leaves the table only after its commit, so a new
// operation on that directory, whose path may be another by then (a move
// just committed), must wait for it, or the first one's End would remove
// the second's registration.
func (t *Table) Begin(op Op) (Op, error) {
	if o, ok := t.ops[op.ID]; ok {
		return o, ErrOverlap
	}
	for _, o := range t.ops {
		if overlaps(o.Path, op.Path) {
			return o, ErrOverlap
		}
	}
	if t.ops == nil {
		t.ops = make(map[uint64]Op)
	}
	t.ops[op.ID] = op
	return op, nil
}

// Yields reports whether the operation on directory own, whose work met the
// flag of an operation of age other (a move into a subtree being changed),
// must give way: clear its flag and start again, rather than wait with its
// flag set. The younger gives way, so that operations that meet each
// other's flags never wait for each other in a circle (waits go from older
// to younger only); the older waits. An operation not under way here
// never gives way.
func (t *Table) Yields(own uint64, other Age) bool {
	o, ok := t.ops[own]
	return ok && other.Before(o.Age)
}

// End removes the operation on directory id.
func (t *Table) End(id uint64) { delete(t.ops, id) }

// Get returns the operation on directory id.
func (t *Table) Get(id uint64) (Op, bool) {
	o, ok := t.ops[id]
	return o, ok
}

// Len is the number of operations under way.
func (t *Table) Len() int { return len(t.ops) }

// overlaps reports whether one of two clean absolute paths is the other or
// below it.
func overlaps(a, b string) bool {
	return a == b || below(a, b) || below(b, a)
}

// below reports whether p is strictly below dir.
func below(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == '/'
}

// Do is what the engine does next.
type Do uint8

const (
	DoSetFlag Do = iota + 1
	DoQuiesce
	DoWork
	DoClear
	DoWait
	DoFinish
)

func (d Do) String() string {
	return [...]string{"?", "set flag", "quiesce", "work", "clear", "wait", "finish"}[d]
}

// Event is what happened when the engine did what the Machine asked.
type Event uint8

const (
	Flagged   Event = iota + 1 // the flag and the table row are committed
	NotNeeded                  // the target is not a non-empty directory: run the plain operation
	Contended                  // a live flag on the path or in the subtree
	Quiesced                   // every lock of the subtree was taken and released
	Worked                     // the work committed, the flag cleared with it
	Failed                     // a step failed for good (the engine keeps the error)
	Cleared                    // the flag and the row are gone
	Waited                     // the wait is over
)

// Outcome is how an operation ended.
type Outcome uint8

const (
	Pending Outcome = iota
	Done            // the work committed
	Plain           // not a subtree operation after all
	GaveUp          // contended past the time limit
	Error           // a step failed; the flag is cleared
)

// Action is the Machine's answer: what to do, how long to wait first
// (DoWait), and the outcome once DoFinish.
type Action struct {
	Do      Do
	Wait    time.Duration
	Outcome Outcome
}

// Machine is one subtree operation's progress through the phases.
type Machine struct {
	limit    time.Duration
	start    time.Duration // the engine's clock at Start
	contends int
	flagged  bool
	then     Outcome // after DoClear: GaveUp, Error, or Pending (wait and retry)
	last     Do
}

// NewMachine returns a Machine that gives up when contended for longer than
// limit.
func NewMachine(limit time.Duration) *Machine { return &Machine{limit: limit} }

// Start begins at now (the engine's monotonic clock, any origin).
func (m *Machine) Start(now time.Duration) Action {
	m.start = now
	return m.act(DoSetFlag)
}

func (m *Machine) act(d Do) Action {
	m.last = d
	return Action{Do: d}
}

func (m *Machine) finish(o Outcome) Action {
	m.last = DoFinish
	return Action{Do: DoFinish, Outcome: o}
}

// contention is the wait after the Machine met contention: from 100 us,
// doubling to 51.2 ms.
var contention = backoff.Policy{Initial: 100 * time.Microsecond, Max: 100 * time.Microsecond << 9}

// backoff waits after contention, or gives up past the limit.
func (m *Machine) backoff(now time.Duration) Action {
	if now-m.start >= m.limit {
		return m.finish(GaveUp)
	}
	m.contends++
	d := min(contention.Delay(m.contends-1), m.limit-(now-m.start))
	m.last = DoWait
	return Action{Do: DoWait, Wait: d}
}

// Step consumes what happened to the last action, at now, and says what to
// do next. An event that the last action cannot produce is a bug of the
// engine: Step panics.
func (m *Machine) Step(ev Event, now time.Duration) Action {
	switch m.last {
	case DoSetFlag:
		switch ev {
		case Flagged:
			m.flagged = true
			return m.act(DoQuiesce)
		case NotNeeded:
			return m.finish(Plain)
		case Contended:
			return m.backoff(now)
		case Failed:
			return m.finish(Error)
		}
	case DoQuiesce:
		switch ev {
		case Quiesced:
			return m.act(DoWork)
		case Contended:
			// Another operation below: give way (its own work may need to
			// resolve through this flag), then start again.
			m.then = Pending
			return m.act(DoClear)
		case Failed:
			m.then = Error
			return m.act(DoClear)
		}
	case DoWork:
		switch ev {
		case Worked:
			m.flagged = false
			return m.finish(Done)
		case Contended:
			// An older operation's flag on the way: give way.
			m.then = Pending
			return m.act(DoClear)
		case NotNeeded:
			// The directory is empty or gone by now: the plain operation
			// will do, once the flag is gone.
			m.then = Plain
			return m.act(DoClear)
		case Failed:
			m.then = Error
			return m.act(DoClear)
		}
	case DoClear:
		if ev == Cleared {
			m.flagged = false
			if m.then == Pending {
				return m.backoff(now)
			}
			return m.finish(m.then)
		}
		if ev == Failed { // the flag stays: whoever meets it after a restart clears it
			return m.finish(Error)
		}
	case DoWait:
		if ev == Waited {
			return m.act(DoSetFlag)
		}
	}
	panic("subtree: event " + ev.String() + " after " + m.last.String())
}

// Flagged reports whether the Machine's flag may be set (between Flagged and
// Worked or Cleared): the engine must clear it if it abandons the Machine.
func (m *Machine) Flagged() bool { return m.flagged }

func (e Event) String() string {
	return [...]string{"?", "flagged", "not needed", "contended", "quiesced", "worked", "failed", "cleared", "waited"}[e]
}
