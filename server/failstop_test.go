package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get(addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestFailStopServer: a server whose store's log starts failing (ENOSPC from
// an injected file system) answers /readyz 503 with the cause, logs it at
// ERROR, Wait returns the fatal error, and Stop returns within
// FailStopTimeout. The failure guarded against: the store hung every later operation and the
// server went on answering /readyz 200.
func TestFailStopServer(t *testing.T) {
	var fail atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !fail.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	var logBuf testproc.Log
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	cfg.Namespace.Superuser = "root"
	cfg.Store.CacheSize, cfg.Store.MemTableSize, cfg.Store.RowCacheEntries = 8<<20, 4<<20, 1024
	cfg.Store.FS = fs
	cfg.FailStopTimeout = 2 * time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop(ctx)
		}
	})
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/before", 0); err != nil {
		t.Fatal(err)
	}
	if code, _ := readyz(t, srv.Addr()); code != 200 {
		t.Fatalf("/readyz before the failure: %d", code)
	}

	fail.Store(true)
	opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Mkdirs(opCtx, root, "/after", 0); err == nil {
		t.Fatal("mkdir on a failing log was acknowledged")
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	werr := srv.Wait(waitCtx)
	if !errors.Is(werr, store.ErrFailed) || !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("Wait = %v, want store.ErrFailed and ENOSPC", werr)
	}
	if code, body := readyz(t, srv.Addr()); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left") {
		t.Fatalf("/readyz after the failure: %d %q, want 503 naming the cause", code, body)
	}
	if err := c.Mkdirs(opCtx, root, "/later", 0); err == nil {
		t.Fatal("mkdir after the failure was acknowledged")
	}
	start := time.Now()
	stopped = true
	if err := srv.Stop(ctx); !errors.Is(err, store.ErrFailed) {
		t.Errorf("Stop after the failure: %v, want the store's fatal error", err)
	}
	if d := time.Since(start); d > cfg.FailStopTimeout+2*time.Second {
		t.Errorf("Stop took %v, want at most FailStopTimeout (%v) and a little", d, cfg.FailStopTimeout)
	}
	if log := logBuf.String(); !strings.Contains(log, "level=ERROR msg=\"the metadata store failed") || !strings.Contains(log, "no space left on device") {
		t.Errorf("log does not name the failure at ERROR:\n%s", log)
	}
}

func TestConfigValidateFailStopTimeout(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FailStopTimeout = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "FailStopTimeout") {
		t.Fatalf("Validate with FailStopTimeout 0: %v", err)
	}
}

// TestStopBoundedOnStuckStore: a store stuck without failing (a hung disk:
// the log's sync never returns) does not hold the stop past its deadline
// and FailStopTimeout. The failure guarded against: SIGTERM then never stopped the process.
func TestStopBoundedOnStuckStore(t *testing.T) {
	var block atomic.Bool
	release := make(chan struct{})
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if block.Load() && strings.HasSuffix(op.Path, ".log") {
			switch op.Kind {
			case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
				<-release
			}
		}
		return nil
	}))
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	cfg.Namespace.Superuser = "root"
	cfg.Store.CacheSize, cfg.Store.MemTableSize, cfg.Store.RowCacheEntries = 8<<20, 4<<20, 1024
	cfg.Store.FS = fs
	cfg.FailStopTimeout = time.Second
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer close(release) // let the stuck goroutines go at the end
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if err := c.Mkdirs(ctx, root, "/before", 0); err != nil {
		t.Fatal(err)
	}
	block.Store(true)
	stuck := make(chan error, 1)
	go func() { stuck <- c.Mkdirs(ctx, root, "/stuck", 0) }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-stuck:
		t.Fatalf("mkdir with the log's sync blocked returned: %v", err)
	default:
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	var stopErr error
	done := make(chan struct{})
	go func() { stopErr = srv.Stop(sctx); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop still waiting 10 s after its deadline on a stuck store")
	}
	if stopErr == nil || !strings.Contains(stopErr.Error(), "gave up") {
		t.Errorf("Stop on a stuck store: %v, want it to say it gave up", stopErr)
	}
	if d := time.Since(start); d > 300*time.Millisecond+cfg.FailStopTimeout+3*time.Second {
		t.Errorf("Stop took %v", d)
	}
}

// TestNewContextGivesUpOnStuckOpen: a server whose store is still opening
// (its replayed log's flush waits on a disk that does not answer) gives up
// when its context ends: nimbus serve passes its signal context, so SIGTERM
// ends a start that would otherwise ignore it.
func TestNewContextGivesUpOnStuckOpen(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
	cfg.Namespace.Superuser = "root"
	cfg.Store.CacheSize, cfg.Store.MemTableSize, cfg.Store.RowCacheEntries = 8<<20, 4<<20, 1024
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mkdirs(ctx, meta.User{Name: "root"}, "/in/the/log", 0); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.Stop(ctx); err != nil { // leaves the rows in the log: the next open flushes them
		t.Fatal(err)
	}

	// Never released: the abandoned open stays blocked, and writes nothing
	// into the directory while the test removes it.
	hang := make(chan struct{})
	blocked := make(chan struct{})
	var once atomic.Bool
	cfg.Store.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpCreate {
			if once.CompareAndSwap(false, true) {
				close(blocked)
			}
			<-hang
		}
		return nil
	}))
	octx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		s, err := NewContext(octx, cfg)
		if err == nil {
			_ = s.Stop(ctx)
		}
		done <- err
	}()
	select {
	case <-blocked:
	case err := <-done:
		t.Fatalf("NewContext returned before its store's flush: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("NewContext after its context ended: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("NewContext still opening 10 s after its context ended")
	}
}
