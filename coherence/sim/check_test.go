package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// A register row for porcupine: a write of version v is legal only from
// v−1 (the store numbers a row's versions in commit order, so a
// linearization must too), a read returns the state.
type pInput struct {
	write bool
	row   int
	v     uint64
}

var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byRow := map[int][]porcupine.Operation{}
		var rows []int
		for _, op := range h {
			r := op.Input.(pInput).row
			if _, ok := byRow[r]; !ok {
				rows = append(rows, r)
			}
			byRow[r] = append(byRow[r], op)
		}
		out := make([][]porcupine.Operation, 0, len(rows))
		for _, r := range rows {
			out = append(out, byRow[r])
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(uint64), input.(pInput)
		if in.write {
			return in.v == s+1, in.v
		}
		return output.(uint64) == s, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(pInput)
		if in.write {
			return fmt.Sprintf("row %d := v%d", in.row, in.v)
		}
		return fmt.Sprintf("row %d = v%d", in.row, output)
	},
}

// porcupineHistory converts a history: committed writes (one operation
// per row; never answered: pending to the end), answered reads.
func porcupineHistory(r *Result) []porcupine.Operation {
	var h []porcupine.Operation
	for i := range r.Ops {
		op := &r.Ops[i]
		switch op.Kind {
		case Write:
			rows, vers, _, ok := r.Committed(i)
			if !ok {
				continue
			}
			end := int64(math.MaxInt64)
			if op.OK && op.End >= 0 {
				end = op.End
			}
			for k, row := range rows {
				h = append(h, porcupine.Operation{ClientId: op.Client, Input: pInput{write: true, row: row, v: vers[k]}, Call: op.Start, Return: end})
			}
		case Read:
			if op.OK && op.End >= 0 {
				h = append(h, porcupine.Operation{ClientId: op.Client, Input: pInput{row: op.Rows[len(op.Rows)-1]}, Output: op.Version, Call: op.Start, Return: op.End})
			}
		}
	}
	return h
}

// TestCheckerAgreesWithPorcupine: on small histories, healthy and broken
// (each knob), the fast checker and porcupine give the same verdict, and
// both verdicts occur.
func TestCheckerAgreesWithPorcupine(t *testing.T) {
	verdicts := map[bool]int{}
	knobs := []func(*Config){
		func(*Config) {},
		func(c *Config) { c.DisableInvalidation = true },
		func(c *Config) { c.DisableFillCheck = true },
	}
	for k, knob := range knobs {
		for seed := uint64(1); seed <= 10; seed++ {
			cfg := DefaultConfig(seed)
			cfg.Ops = crossOps
			knob(&cfg)
			res, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			fast := Check(res) == nil
			slow := porcupine.CheckOperations(registerModel, porcupineHistory(res))
			if fast != slow {
				t.Errorf("knob %d seed %d: Check says linearizable=%v, porcupine %v (%v)", k, seed, fast, slow, Check(res))
			}
			verdicts[fast]++
		}
	}
	t.Logf("histories: %d linearizable, %d not, by both checkers", verdicts[true], verdicts[false])
	if verdicts[true] == 0 || verdicts[false] == 0 {
		t.Errorf("verdicts %v: the cross-check saw only one kind of history", verdicts)
	}
}

// TestCheck: hand-made histories on one row, each read right or wrong in
// one way.
func TestCheck(t *testing.T) {
	// commits below: txn 1 commits v1 at 15, txn 2 v2 at 35.
	w := func(start, end int64, ok bool, txn int) Op {
		return Op{Kind: Write, Rows: []int{0}, Start: start, End: end, OK: ok, txn: txn}
	}
	r := func(start, end int64, v uint64) Op {
		return Op{Kind: Read, Rows: []int{0}, Start: start, End: end, OK: true, Version: v}
	}
	commits := map[int]commitRec{1: {at: 15, vers: []uint64{1}}, 2: {at: 35, vers: []uint64{2}}}
	for _, tc := range []struct {
		name string
		ops  []Op
		bad  bool
		// porcupine sees only the history, not the store's commit times
		// nor what it did not commit: it cannot tell these apart
		storeOnly bool
	}{
		{"read the initial version", []Op{r(0, 5, 0)}, false, false},
		{"read during the write, old", []Op{w(10, 20, true, 1), r(12, 18, 0)}, false, false},
		{"read during the write, new", []Op{w(10, 20, true, 1), r(12, 18, 1)}, false, false},
		{"read after the write, old", []Op{w(10, 20, true, 1), r(21, 22, 0)}, true, false},
		{"read before the commit, new", []Op{w(10, 20, true, 1), r(11, 14, 1)}, true, true},
		{"reads go backwards", []Op{w(10, -1, false, 1), r(16, 17, 1), r(18, 19, 0)}, true, false},
		{"overlapping reads may differ", []Op{w(10, -1, false, 1), r(14, 19, 1), r(16, 20, 0)}, false, false},
		{"a version never written", []Op{r(0, 50, 3)}, true, false},
		{"an OK write that did not commit", []Op{w(10, 20, true, 9)}, true, true},
		{"second write complete, first version read", []Op{w(10, 20, true, 1), w(30, 40, true, 2), r(41, 42, 1)}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{Ops: tc.ops, commits: commits}
			v := Check(res)
			if (v != nil) != tc.bad {
				t.Fatalf("Check = %v, want a violation: %v", v, tc.bad)
			}
			if slow := porcupine.CheckOperations(registerModel, porcupineHistory(res)); slow == tc.bad && !tc.storeOnly {
				t.Errorf("porcupine says linearizable=%v", slow)
			}
		})
	}
}
