package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// stallFS stalls the first stat of /slow until released.
type stallFS struct {
	*metatest.MemFS
	once    sync.Once
	release chan struct{}
}

func (f *stallFS) Stat(ctx context.Context, u meta.User, p string) (*meta.FileStatus, error) {
	if p == "/slow" {
		stall := false
		f.once.Do(func() { stall = true })
		if stall {
			select {
			case <-f.release:
			case <-ctx.Done():
			}
		}
	}
	return f.MemFS.Stat(ctx, u, p)
}

// A stat stuck on the server is sent again after StragglerFactor times the
// average and answered by the copy; with the mechanism off it waits.
func TestStragglerIsSentAgain(t *testing.T) {
	for _, on := range []bool{true, false} {
		fs := &stallFS{MemFS: metatest.NewMemFS(), release: make(chan struct{})}
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(fs.release) }) }
		defer release()
		u := meta.User{Name: "root"}
		ctx := context.Background()
		if err := fs.Mkdirs(ctx, u, "/slow", 0o755); err != nil {
			t.Fatal(err)
		}
		opts := client.Options{Conns: 2, StragglerFactor: 10, StragglerFloor: time.Millisecond}
		if !on {
			opts.StragglerFactor = -1
		}
		c, err := client.Dial(ctx, serve(t, fs, nil), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ { // the moving average of a stat
			if _, err := c.Stat(ctx, u, "/"); err != nil {
				t.Fatal(err)
			}
		}
		sent0, won0 := c.Stragglers() // a warm-up stat may have straggled too, under -race
		done := make(chan error, 1)
		go func() {
			_, err := c.Stat(ctx, u, "/slow")
			done <- err
		}()
		select {
		case err := <-done:
			if !on {
				t.Fatalf("off: the stalled stat returned (%v) before the server let it go", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if sent, won := c.Stragglers(); sent-sent0 != 1 || won-won0 != 1 {
				t.Fatalf("stragglers sent %d, won %d for the stalled stat; want 1, 1", sent-sent0, won-won0)
			}
		case <-time.After(map[bool]time.Duration{true: 10 * time.Second, false: 300 * time.Millisecond}[on]):
			if on {
				t.Fatal("on: the stalled stat was not answered by a second copy within 10 s")
			}
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if sent, _ := c.Stragglers(); sent != 0 {
				t.Fatalf("off: %d stragglers sent", sent)
			}
		}
		release()
		c.Close()
	}
}
