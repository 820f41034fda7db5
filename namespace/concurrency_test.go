package namespace

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestConcurrentMutations runs many goroutines that create, rename, move
// directories across each other and delete in a small shared tree, so that
// their lock sets overlap and hints go stale, then checks fsck. Run it with
// -race.
func TestConcurrentMutations(t *testing.T) {
	e, _ := newEngine(t)
	concurrentMutations(t, e)
	fsckClean(t, e)
}

// TestConcurrentMutationsCached is TestConcurrentMutations with a metadata
// cache small enough to evict; afterwards every path's stat and listing
// answered from the cache must be what the store says.
func TestConcurrentMutationsCached(t *testing.T) {
	e, _ := newCachedEngine(t, 64<<10)
	concurrentMutations(t, e)
	fsckClean(t, e)
	sameAsStore(t, e)
}

// sameAsStore compares, for every path of the namespace, the stat and
// listing the engine answers (from its cache where it can: each is asked
// twice, so that the second is a hit) with what the store says (the engine
// with its cache switched off; nothing runs concurrently).
func sameAsStore(t *testing.T, e *Engine) {
	t.Helper()
	ctx := context.Background()
	c := e.cache
	type answer struct {
		st *meta.FileStatus
		l  *meta.Listing
	}
	ask := func(p string) answer {
		s, err := e.Stat(ctx, root, p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		l, err := e.List(ctx, root, p, "", 0)
		if err != nil {
			t.Fatalf("list %s: %v", p, err)
		}
		return answer{s, l}
	}
	paths := []string{"/"}
	hits := 0
	for i := 0; i < len(paths); i++ {
		p := paths[i]
		ask(p)
		cached := ask(p)
		e.cache = nil
		want := ask(p)
		e.cache = c
		if fmt.Sprint(*cached.st) != fmt.Sprint(*want.st) {
			t.Errorf("stat %s: cached %+v, store %+v", p, *cached.st, *want.st)
		}
		if fmt.Sprint(*cached.l) != fmt.Sprint(*want.l) {
			t.Errorf("list %s: cached %+v, store %+v", p, *cached.l, *want.l)
		}
		if _, ok := c.Attrs(want.st.FileID); ok {
			hits++
		}
		for _, en := range want.l.Entries {
			if en.IsDir() {
				paths = append(paths, en.Path)
			}
		}
	}
	if hits == 0 {
		t.Fatal("nothing was answered from the cache: the comparison compared nothing")
	}
}

func concurrentMutations(t *testing.T, e *Engine) {
	ctx := context.Background()
	dirs := []string{"/p", "/q", "/p/x", "/q/y", "/r"}
	for _, d := range dirs {
		must(t, e.Mkdirs(ctx, root, d, 0))
	}
	const workers, steps = 8, 150
	var wg sync.WaitGroup
	var unexpected sync.Map
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			pick := func() string { return dirs[rng.IntN(len(dirs))] }
			for i := 0; i < steps; i++ {
				name := fmt.Sprintf("n%d", rng.IntN(6))
				var err error
				switch rng.IntN(7) {
				case 0:
					_, err = e.Create(ctx, root, pick()+"/"+name, meta.CreateOptions{Client: fmt.Sprint("w", w), Overwrite: true})
					if err == nil {
						_, err = e.Complete(ctx, root, pick()+"/"+name, fmt.Sprint("w", w))
					}
				case 1:
					err = e.Mkdirs(ctx, root, pick()+"/"+name+"/sub", 0)
				case 2:
					err = e.Rename(ctx, root, pick()+"/"+name, pick()+"/"+name, meta.RenameOptions{Overwrite: rng.IntN(2) == 0})
				case 3:
					err = e.Delete(ctx, root, pick()+"/"+name, true)
				case 4:
					// Directory moves between the shared directories race with everything above.
					err = e.Rename(ctx, root, pick(), pick()+"/"+name, meta.RenameOptions{})
				case 5:
					_, err = e.List(ctx, root, pick(), "", 0)
				case 6:
					_, err = e.Stat(ctx, root, pick()+"/"+name)
					if meta.KindOf(err) == meta.KindNotFound {
						err = nil
					}
				}
				switch meta.KindOf(err) {
				case meta.KindUnknown:
					if err != nil {
						unexpected.Store(err.Error(), true)
					}
				case meta.KindInternal, meta.KindBusy:
					unexpected.Store(err.Error(), true)
				}
				_ = errors.Is
			}
		}(w)
	}
	wg.Wait()
	unexpected.Range(func(k, _ any) bool {
		t.Errorf("unexpected error: %v", k)
		return true
	})
}

// pauseFirstCommit makes the first writing attempt that reaches its commit
// from now on stop there, with its locks held: paused is closed when it
// stops, and closing release lets it commit. Later commits do not stop.
func pauseFirstCommit(e *Engine) (paused, release chan struct{}) { return pauseCommit(e, 1) }

// pauseCommit is pauseFirstCommit for the nth commit that writes: a subtree
// operation's work is its second (after the one that sets its flag).
func pauseCommit(e *Engine, nth int32) (paused, release chan struct{}) {
	paused, release = make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	e.testHookCommit = func() {
		if n.Add(1) == nth {
			close(paused)
			<-release
		}
	}
	return paused, release
}

// TestDirectoryMovesCannotCycle pauses one directory move (mv /p/a
// /q/b/c/x) between its reads and its commit and starts the move that would
// close a cycle with it (mv /q/b /p/a/d/y). Their exclusive locks are
// disjoint, so only the shared locks of the ancestors keep the second from
// passing its "not into its own subtree" check on what the first is about to
// change: it must wait, then fail, and the tree must stay a tree.
func TestDirectoryMovesCannotCycle(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/p/a/d", 0))
	must(t, e.Mkdirs(ctx, root, "/q/b/c", 0))
	paused, release := pauseFirstCommit(e)
	first := make(chan error, 1)
	go func() { first <- e.Rename(ctx, root, "/p/a", "/q/b/c/x", meta.RenameOptions{}) }()
	<-paused
	second := make(chan error, 1)
	go func() { second <- e.Rename(ctx, root, "/q/b", "/p/a/d/y", meta.RenameOptions{}) }()
	select {
	case err := <-second:
		close(release)
		<-first
		t.Fatalf("mv /q/b /p/a/d/y finished (%v) while mv /p/a /q/b/c/x was about to commit", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("mv /p/a /q/b/c/x: %v", err)
	}
	if err := <-second; meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("mv /q/b /p/a/d/y after the first move: %v, want not found (/p/a is gone)", err)
	}
	if _, err := e.Stat(ctx, root, "/q/b/c/x/d"); err != nil {
		t.Fatalf("stat /q/b/c/x/d: %v", err)
	}
	fsckClean(t, e)
}

// TestMoveUnderQuotaCountsConcurrentWrites pauses a directory move into a
// directory with a quota (mv /b /x/y) between its reads and its commit, and
// starts a create and a file rename into the moved subtree (the commit of
// its work: the subtree protocol's flag is set and the quiesce done, see
// namespace/subtree.go). The move counts
// the subtree's usage against /x's quota; a write into the subtree that
// committed after that count and before the move's commit would be charged
// to the quotas of its old place only. The move's flag on
// /b makes both wait for it and then fail (their paths are gone), and
// fsck (which recounts usage) must find the tree clean.
func TestMoveUnderQuotaCountsConcurrentWrites(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/b/c", 0))
	must(t, e.Mkdirs(ctx, root, "/x", 0))
	must(t, e.Mkdirs(ctx, root, "/src", 0))
	writeFile(t, e, root, "/src/f", []byte("0123456789"))
	must(t, e.SetQuota(ctx, root, "/x", 100, 1<<20))
	paused, release := pauseCommit(e, 2)
	move := make(chan error, 1)
	go func() { move <- e.Rename(ctx, root, "/b", "/x/y", meta.RenameOptions{}) }()
	<-paused
	create, rename := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := e.Create(ctx, root, "/b/c/new", meta.CreateOptions{Client: "c"})
		create <- err
	}()
	go func() { rename <- e.Rename(ctx, root, "/src/f", "/b/c/f", meta.RenameOptions{}) }()
	select {
	case err := <-create:
		close(release)
		<-move
		t.Fatalf("create /b/c/new finished (%v) while mv /b /x/y was about to commit", err)
	case err := <-rename:
		close(release)
		<-move
		t.Fatalf("mv /src/f /b/c/f finished (%v) while mv /b /x/y was about to commit", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-move; err != nil {
		t.Fatalf("mv /b /x/y: %v", err)
	}
	if err := <-create; meta.KindOf(err) != meta.KindNotFound {
		t.Errorf("create /b/c/new after the move: %v, want not found", err)
	}
	if err := <-rename; meta.KindOf(err) != meta.KindNotFound {
		t.Errorf("mv /src/f /b/c/f after the move: %v, want not found", err)
	}
	fsckClean(t, e)
}
