package webhdfs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// statBlockingFS holds each Stat until release is closed.
type statBlockingFS struct {
	*metatest.MemFS
	entered chan struct{}
	release chan struct{}
}

func (b *statBlockingFS) Stat(ctx context.Context, u meta.User, p string) (*meta.FileStatus, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.MemFS.Stat(ctx, u, p)
}

// blockedHandler is a Handler over a statBlockingFS, served, and the URL
// of a GETFILESTATUS that blocks in it.
func blockedHandler(t *testing.T) (*Handler, *statBlockingFS, string) {
	t.Helper()
	fs := &statBlockingFS{MemFS: metatest.NewMemFS(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Registerer = prometheus.NewRegistry()
	h, err := New(fs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, fs, srv.URL + PathPrefix + "/?op=GETFILESTATUS&user.name=ann"
}

// TestShutdownDrains: Shutdown waits for the request in flight, which
// completes, and refuses new ones retryably (503, RetriableException).
func TestShutdownDrains(t *testing.T) {
	h, fs, url := blockedHandler(t)
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			first <- -1
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-fs.entered
	done := make(chan error, 1)
	go func() { done <- h.Shutdown(context.Background()) }()
	waitClosing(t, h)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "RetriableException") {
		t.Fatalf("a request during the shutdown: %d %s, want 503 RetriableException", resp.StatusCode, body)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(fs.release)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the request in flight ended %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestShutdownDeadline: Shutdown gives up at its context's end.
func TestShutdownDeadline(t *testing.T) {
	h, fs, url := blockedHandler(t)
	t.Cleanup(func() { close(fs.release) })
	go func() {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
		}
	}()
	<-fs.entered
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := h.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned nil with a request stuck in flight")
	}
}

func waitClosing(t *testing.T, h *Handler) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if h.drain.Closed() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Shutdown did not begin")
		}
	}
}
