package namespace

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestConcurrentMutations runs many goroutines that create, rename, move
// directories across each other and delete in a small shared tree, so that
// their lock sets overlap and hints go stale, then checks fsck. Run it with
// -race.
func TestConcurrentMutations(t *testing.T) {
	e, _ := newEngine(t)
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
				switch rng.IntN(6) {
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
	fsckClean(t, e)
}
