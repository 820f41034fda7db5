package linearizability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/internal/linmodel"
)

// TestModelMatchesEngine runs random calls one at a time on the engine and
// compares every result with the model's: the model must say exactly what
// the engine does when nothing is concurrent, or the concurrent checks
// below would report the model's mistakes as the engine's.
func TestModelMatchesEngine(t *testing.T) {
	e := openEngine(t, nil)
	ctx := context.Background()
	seen := map[string]int{} // "op result" -> count
	for _, seed := range seeds(t, 40) {
		base := fmt.Sprintf("/seq%d", seed)
		prepare(t, e, base)
		s := linmodel.Initial()
		g := linmodel.NewGen(seed)
		for i := range 200 {
			in := g.Next(linmodel.Users[i%len(linmodel.Users)])
			got := linmodel.Run(ctx, e, base, in)
			var want linmodel.Output
			want, next := linmodel.Spec(s, in)
			if got.String() != want.String() {
				t.Fatalf("seed %d, call %d: %s: the engine says %s, the model %s\ntree before:\n%s", seed, i, in, got, want, s)
			}
			s = next
			seen[in.Op.String()+" "+outcome(got)]++
		}
	}
	t.Logf("outcomes: %v", seen)
	// The workload must reach the cases the model distinguishes, or
	// agreeing with the engine says little.
	if len(seeds(t, 40)) >= 10 {
		for _, want := range []string{"mkdirs ok", "create ok", "stat ok", "ls ok", "mv ok", "chmod ok", "rm ok", "setquota ok",
			"create permission denied", "create quota exceeded", "create not found", "create already exists",
			"mv not found", "mv already exists", "mv permission denied", "rm directory not empty", "ls permission denied",
			"stat not a directory", "setquota permission denied"} {
			if seen[want] == 0 {
				t.Errorf("no call ended %q", want)
			}
		}
	}
}

func outcome(o linmodel.Output) string {
	if o.Err != 0 {
		return o.Err.String()
	}
	return "ok"
}

// TestLinearizableEngine checks histories of concurrent clients on the
// engine in process, over Pebble. Every operation — creates, mkdirs, stats,
// listings, renames and chmods of files and directories, quotas, recursive
// deletes — runs concurrently on a namespace of a few names, so that they
// collide, the operations that change a directory above others' paths
// included (the subtree protocol orders them).
func TestLinearizableEngine(t *testing.T) {
	e := openEngine(t, nil)
	start := time.Now()
	ops, overlapped := 0, 0
	for _, seed := range seeds(t, 300) {
		base := fmt.Sprintf("/s%d", seed)
		h := record(t, e, base, seed, mix{clients: 5, ops: 30})
		check(t, "engine", seed, h, linmodel.Initial())
		ops, overlapped = ops+len(h), overlapped+concurrent(h)
	}
	t.Logf("%d operations, %d of them concurrent with another, in %s", ops, overlapped, time.Since(start).Round(time.Millisecond))
	// Histories of calls that never overlap would check nothing.
	if overlapped < ops/5 {
		t.Errorf("only %d of %d operations ran concurrently with another", overlapped, ops)
	}
}

// concurrent counts the operations of h that overlap another client's.
func concurrent(h []porcupine.Operation) int {
	n := 0
	for i, a := range h {
		for j, b := range h {
			if i != j && a.ClientId != b.ClientId && a.Call <= b.Return && b.Call <= a.Return {
				n++
				break
			}
		}
	}
	return n
}

// TestLinearizableServer is TestLinearizableEngine against the real
// `nimbus serve` binary through the Go client, each seed in a directory of
// its own.
func TestLinearizableServer(t *testing.T) {
	c := startServer(t)
	start := time.Now()
	ops, overlapped := 0, 0
	for _, seed := range seeds(t, 60) {
		base := fmt.Sprintf("/s%d", seed)
		h := record(t, c, base, seed, mix{clients: 5, ops: 30})
		check(t, "server", seed, h, linmodel.Initial())
		ops, overlapped = ops+len(h), overlapped+concurrent(h)
	}
	t.Logf("%d operations, %d of them concurrent with another, in %s", ops, overlapped, time.Since(start).Round(time.Millisecond))
	if overlapped < ops/5 {
		t.Errorf("only %d of %d operations ran concurrently with another", overlapped, ops)
	}
}
