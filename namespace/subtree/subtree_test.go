package subtree

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	const me = 9
	for _, c := range []struct {
		owner, id, own uint64
		alive          bool
		want           Verdict
	}{
		{0, 5, 0, false, Free},
		{0, 5, 5, true, Free},
		{me, 5, 5, false, Own},
		{me, 5, 5, true, Own},
		{me, 5, 0, false, Busy},
		{me, 5, 6, false, Busy},
		{8, 5, 5, false, Stale}, // a previous incarnation's flag, even on our own directory id
		{8, 5, 0, false, Stale},
		{8, 5, 5, true, Busy}, // another NameNode's operation under way
		{8, 5, 0, true, Busy},
	} {
		if got := Check(c.owner, c.id, me, c.own, c.alive); got != c.want {
			t.Errorf("Check(owner %d, id %d, own %d, alive %v) = %d, want %d", c.owner, c.id, c.own, c.alive, got, c.want)
		}
	}
}

func TestTableRefusesOverlap(t *testing.T) {
	var tb Table
	if _, err := tb.Begin(Op{ID: 2, Kind: KindRename, Path: "/a/b"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a/b", "/a", "/", "/a/b/c", "/a/b/c/d"} {
		o, err := tb.Begin(Op{ID: 3, Kind: KindChmod, Path: p})
		if !errors.Is(err, ErrOverlap) || o.ID != 2 {
			t.Errorf("Begin(%s) = %v, %v; want an overlap with /a/b", p, o, err)
		}
	}
	ages := map[uint64]Age{}
	for i, p := range []string{"/a/bc", "/a/c", "/b"} {
		id := 10 + uint64(len(p))
		ages[id] = Age{Started: int64(100 - i), Owner: 7, ID: id} // the later begun, the older
		if _, err := tb.Begin(Op{ID: id, Kind: KindChmod, Path: p, Age: ages[id]}); err != nil {
			t.Errorf("Begin(%s): %v", p, err)
		}
	}
	// Ages: /b (id 12) oldest, then /a/c (14), then /a/bc (15).
	if !tb.Yields(15, ages[12]) || tb.Yields(12, ages[15]) {
		t.Error("the younger of /b and /a/bc does not give way")
	}
	// Another NameNode's operation (not in the table) of the same start
	// time: the owner's id decides, the same way on both sides.
	other := Age{Started: 99, Owner: 3, ID: 1}
	if !tb.Yields(14, other) || tb.Yields(14, Age{Started: 99, Owner: 9, ID: 1}) {
		t.Error("an operation of another owner with the same start time is not ordered by owner")
	}
	if tb.Yields(99, Age{}) {
		t.Error("an operation not under way gives way")
	}
	tb.End(2)
	if _, ok := tb.Get(2); ok {
		t.Fatal("ended operation still there")
	}
	if _, err := tb.Begin(Op{ID: 4, Kind: KindDelete, Path: "/a/b/c"}); err != nil {
		t.Fatalf("after End: %v", err)
	}
}

// TestTableRefusesSameDirectoryElsewhere: a move of directory 5 from /p to
// /q/n has committed (the directory is at /q/n now, unflagged) but not yet
// left the table; a delete of /q/n, the same directory under its new path,
// must be refused until it has, or the move's End would remove the
// delete's registration and leave its flag unguarded (seen in
// namespace's TestConcurrentMutations: a move of /q went ahead while a
// delete below it ran, and the delete found its directory gone).
func TestTableRefusesSameDirectoryElsewhere(t *testing.T) {
	var tb Table
	if _, err := tb.Begin(Op{ID: 5, Kind: KindRename, Path: "/p"}); err != nil {
		t.Fatal(err)
	}
	if o, err := tb.Begin(Op{ID: 5, Kind: KindDelete, Path: "/q/n"}); !errors.Is(err, ErrOverlap) || o.Kind != KindRename {
		t.Fatalf("Begin of the moved directory under its new path = %v, %v; want an overlap with the move", o, err)
	}
	tb.End(5)
	if _, err := tb.Begin(Op{ID: 5, Kind: KindDelete, Path: "/q/n"}); err != nil {
		t.Fatalf("after the move's End: %v", err)
	}
	if _, err := tb.Begin(Op{ID: 6, Kind: KindChmod, Path: "/q"}); !errors.Is(err, ErrOverlap) {
		t.Fatalf("a move of /q above the delete of /q/n was not refused: %v", err)
	}
}

// step is one transition: the event fed and the action expected back.
type step struct {
	ev   Event
	at   time.Duration
	want Do
	out  Outcome
}

func TestMachineTransitions(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"happy path", []step{{Flagged, 0, DoQuiesce, 0}, {Quiesced, 0, DoWork, 0}, {Worked, 0, DoFinish, Done}}},
		{"not a subtree", []step{{NotNeeded, 0, DoFinish, Plain}}},
		{"emptied before the work", []step{{Flagged, 0, DoQuiesce, 0}, {Quiesced, 0, DoWork, 0},
			{NotNeeded, 0, DoClear, 0}, {Cleared, 0, DoFinish, Plain}}},
		{"contended on the path, then free", []step{{Contended, 0, DoWait, 0}, {Waited, 0, DoSetFlag, 0},
			{Flagged, 0, DoQuiesce, 0}, {Quiesced, 0, DoWork, 0}, {Worked, 0, DoFinish, Done}}},
		{"contended below: gives way", []step{{Flagged, 0, DoQuiesce, 0}, {Contended, 0, DoClear, 0},
			{Cleared, 0, DoWait, 0}, {Waited, 0, DoSetFlag, 0}}},
		{"contended past the limit", []step{{Contended, time.Millisecond, DoWait, 0}, {Waited, 0, DoSetFlag, 0},
			{Contended, time.Second, DoFinish, GaveUp}}},
		{"contended in the work: gives way", []step{{Flagged, 0, DoQuiesce, 0}, {Quiesced, 0, DoWork, 0},
			{Contended, 0, DoClear, 0}, {Cleared, 0, DoWait, 0}, {Waited, 0, DoSetFlag, 0}}},
		{"work fails", []step{{Flagged, 0, DoQuiesce, 0}, {Quiesced, 0, DoWork, 0}, {Failed, 0, DoClear, 0},
			{Cleared, 0, DoFinish, Error}}},
		{"quiesce fails", []step{{Flagged, 0, DoQuiesce, 0}, {Failed, 0, DoClear, 0}, {Cleared, 0, DoFinish, Error}}},
		{"clear fails", []step{{Flagged, 0, DoQuiesce, 0}, {Failed, 0, DoClear, 0}, {Failed, 0, DoFinish, Error}}},
		{"flag fails", []step{{Failed, 0, DoFinish, Error}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := NewMachine(time.Second)
			if a := m.Start(0); a.Do != DoSetFlag {
				t.Fatalf("Start: %s", a.Do)
			}
			for i, s := range c.steps {
				a := m.Step(s.ev, s.at)
				if a.Do != s.want || a.Outcome != s.out {
					t.Fatalf("step %d (%s): got %s/%d, want %s/%d", i, s.ev, a.Do, a.Outcome, s.want, s.out)
				}
			}
		})
	}
}

func TestMachinePanicsOnImpossibleEvent(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on Worked after SetFlag")
		}
	}()
	m := NewMachine(time.Second)
	m.Start(0)
	m.Step(Worked, 0)
}

// TestMachineSimulation drives machines with random events (what a store
// and other operations could answer) and checks the protocol's invariants:
// every run finishes; the flag is never left set at the finish except after
// a failed clear; a run finishes Done only through Worked; a contended run
// never waits past its limit.
func TestMachineSimulation(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		limit := time.Duration(1+r.IntN(50)) * time.Millisecond
		m := NewMachine(limit)
		now := time.Duration(0)
		a := m.Start(now)
		clearFailed := false
		for steps := 0; a.Do != DoFinish; steps++ {
			if steps > 10000 {
				t.Fatalf("seed %d: no finish after %d steps", seed, steps)
			}
			var ev Event
			switch a.Do {
			case DoSetFlag:
				ev = []Event{Flagged, Flagged, NotNeeded, Contended, Failed}[r.IntN(5)]
			case DoQuiesce:
				ev = []Event{Quiesced, Quiesced, Contended, Failed}[r.IntN(4)]
			case DoWork:
				ev = []Event{Worked, Worked, NotNeeded, Contended, Failed}[r.IntN(5)]
			case DoClear:
				ev = Cleared
				if r.IntN(10) == 0 {
					ev, clearFailed = Failed, true
				}
			case DoWait:
				if a.Wait <= 0 || now+a.Wait > limit {
					t.Fatalf("seed %d: wait %v at %v with limit %v", seed, a.Wait, now, limit)
				}
				now += a.Wait
				ev = Waited
			}
			now += time.Duration(r.IntN(200)) * time.Microsecond
			prev := a.Do
			a = m.Step(ev, now)
			if a.Do == DoFinish && a.Outcome == Done && (prev != DoWork || ev != Worked) {
				t.Fatalf("seed %d: Done after %s/%s", seed, prev, ev)
			}
		}
		if m.Flagged() && !clearFailed {
			t.Fatalf("seed %d: finished %d with the flag set", seed, a.Outcome)
		}
		if a.Outcome == Pending {
			t.Fatalf("seed %d: finished pending", seed)
		}
	}
}
