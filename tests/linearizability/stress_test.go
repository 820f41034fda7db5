package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/nimbus-fs/nimbus/internal/linmodel"
	"github.com/nimbus-fs/nimbus/meta"
)

// The tests here try to provoke the subtree races without any help (no
// gate, no hook). The subtree protocol (namespace/subtree.go) prevents them:
// they are strict, a violation fails them.

// subtreeRace is a workload for one race: three creators fill /a/b, then
// one call changes /a and a looker stats, below look, what each creator is
// creating. A create that resolved /a/b before the change and commits after
// a stat said "not found" is the race.
type subtreeRace struct {
	name     string
	setup    []linmodel.Input
	creators [3]string
	change   linmodel.Input
	look     string
}

var (
	renameRace = subtreeRace{
		name:     "rename under create",
		setup:    []linmodel.Input{{Op: linmodel.Mkdirs, User: "ann", Path: "/a/b", Perm: 0o777}},
		creators: [3]string{"ann", "bob", "ann"},
		change:   linmodel.Input{Op: linmodel.Rename, User: linmodel.Superuser, Path: "/a", Dst: "/z"},
		look:     "/z/b",
	}
	chmodRace = subtreeRace{
		name: "chmod under create",
		setup: []linmodel.Input{{Op: linmodel.Mkdirs, User: "ann", Path: "/a/b", Perm: 0o777},
			{Op: linmodel.Chmod, User: "ann", Path: "/a", Perm: 0o777}},
		creators: [3]string{"bob", "bob", "bob"},
		change:   linmodel.Input{Op: linmodel.Chmod, User: "ann", Path: "/a", Perm: 0o700},
		look:     "/a/b",
	}
)

// TestIssue26RenameStress: creators keep creating files in /a/b while one
// client renames /a to /z and another stats what is being created below
// /z/b, round after round, until the checker finds a history that is not
// linearizable or the budget is spent; in process (every inode id reserved
// with its own sync, which widens the window) and against `nimbus serve`.
func TestIssue26RenameStress(t *testing.T) {
	t.Run("engine", func(t *testing.T) { stress(t, openEngineWith(t, nil, true), renameRace) })
	t.Run("server", func(t *testing.T) { stress(t, startServer(t), renameRace) })
}

// TestIssue26ChmodStress is the same with bob creating in /a/b while ann
// makes /a 0700.
func TestIssue26ChmodStress(t *testing.T) {
	t.Run("engine", func(t *testing.T) { stress(t, openEngineWith(t, nil, true), chmodRace) })
	t.Run("server", func(t *testing.T) { stress(t, startServer(t), chmodRace) })
}

func stress(t *testing.T, c meta.FileSystem, race subtreeRace) {
	t.Helper()
	stressOn(t, []meta.FileSystem{c}, race)
}

// stressOn is stress with the creators calling fss[i % len(fss)] and the
// change and the looker the last of fss: with two NameNodes on one store,
// the change runs on one and the creates on the other.
func stressOn(t *testing.T, c []meta.FileSystem, race subtreeRace) {
	budget, rounds := 3*time.Second, 400
	if testing.Short() {
		budget, rounds = time.Second, 10
	}
	start := time.Now()
	for round := 1; round <= rounds && time.Since(start) < budget; round++ {
		h, init := raceRound(t, c, race, round)
		if f := linmodel.Faults(h); len(f) > 0 {
			t.Fatalf("round %d: %s", round, f[0])
		}
		res, err := linmodel.Check(init, h, checkTimeout, outDir(t), fmt.Sprintf("stress-%d", round))
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict == porcupine.Illegal {
			msg := fmt.Sprintf("round %d (%d operations, after %s): not linearizable, the issue-26 race %s is back; visualization: %s\n%s",
				round, len(h), time.Since(start).Round(time.Millisecond), race.name, res.Viz, describe(h))
			t.Error(msg)
			return
		}
		if res.Verdict != porcupine.Ok {
			t.Fatalf("round %d: the check gave %s", round, res.Verdict)
		}
	}
	t.Logf("no violation in %s: the race did not show this time", time.Since(start).Round(time.Millisecond))
}

// raceRound records one round below /r<round>.
func raceRound(t *testing.T, fss []meta.FileSystem, race subtreeRace, round int) ([]porcupine.Operation, *linmodel.State) {
	t.Helper()
	fs := fss[len(fss)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := fmt.Sprintf("/r%d", round)
	root := meta.User{Name: linmodel.Superuser}
	if err := fs.Mkdirs(ctx, root, base, linmodel.RootPerm); err != nil {
		t.Fatal(err)
	}
	init := linmodel.NewState(linmodel.RootPerm)
	for _, in := range race.setup {
		var want linmodel.Output
		want, init = linmodel.Spec(init, in)
		if got := linmodel.Run(ctx, fs, base, in); got.String() != want.String() {
			t.Fatalf("setup %s: got %s, the model says %s", in, got, want)
		}
	}
	rec := linmodel.NewRecorder()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var inflight [3]atomic.Value // the name each creator is creating
	for c := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("k%d-%d", c, i)
				inflight[c].Store(name)
				rec.Do(ctx, fss[c%len(fss)], base, c, linmodel.Input{Op: linmodel.Create, User: race.creators[c], Path: "/a/b/" + name, Perm: 0o644})
			}
		}()
	}
	// The looker stats at once after the change. (A listing would not do:
	// it locks the directory's row, which the creates hold.)
	changed := make(chan struct{})
	looked := make(chan struct{})
	go func() {
		defer close(looked)
		<-changed
		for c := range inflight {
			name, _ := inflight[c].Load().(string)
			if name == "" {
				// Not started yet: a stat of race.look + "/" would be one of
				// the directory, by a path the model does not clean.
				continue
			}
			rec.Do(ctx, fs, base, 3, linmodel.Input{Op: linmodel.Stat, User: linmodel.Superuser, Path: race.look + "/" + name})
		}
	}()
	time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Microsecond)
	rec.Do(ctx, fs, base, 4, race.change)
	close(changed)
	<-looked
	stop.Store(true)
	wg.Wait()
	return rec.History(), init
}
