package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

// TestConnectionKilledMidFlight cuts the network under a call that the
// server is executing: a read is resubmitted on a new connection and
// succeeds, and so is a write (with its request id, which a server that
// records writes answers from its record: TestLostReplyExactlyOnce); a
// write whose resubmission cannot reach the server either fails with
// meta.ErrOutcomeUnknown, not busy: it may have happened.
func TestConnectionKilledMidFlight(t *testing.T) {
	fs := metatest.NewMemFS()
	ctx := context.Background()
	fs.Mkdirs(ctx, root, "/x", 0)
	var block atomic.Bool
	arrived := make(chan string, 1)
	fs.Hook = func(ctx context.Context, m string) error {
		if block.CompareAndSwap(true, false) {
			arrived <- m
			<-ctx.Done() // released when the server sees the connection die
			return ctx.Err()
		}
		return nil
	}
	p := newProxy(t, serve(t, fs, nil))
	c := dial(t, p.addr(), client.Options{Conns: 1})

	block.Store(true)
	res := make(chan error, 1)
	go func() {
		st, err := c.Stat(ctx, root, "/x")
		if err == nil && st.Path != "/x" {
			err = errors.New("wrong status")
		}
		res <- err
	}()
	if m := <-arrived; m != "stat" {
		t.Fatalf("blocked %s", m)
	}
	p.kill()
	if err := <-res; err != nil {
		t.Fatalf("read was not retried: %v", err)
	}

	block.Store(true)
	go func() { res <- c.Mkdirs(ctx, root, "/y", 0) }()
	<-arrived
	p.kill()
	if err := <-res; err != nil {
		t.Fatalf("write was not resubmitted: %v", err)
	}
	if _, err := fs.Stat(ctx, root, "/y"); err != nil {
		t.Fatalf("the resubmitted write: %v", err)
	}

	// Reconnects for the next call.
	if err := c.Mkdirs(ctx, root, "/z", 0); err != nil {
		t.Fatalf("after reconnect: %v", err)
	}

	// The server goes away with a write in flight: its outcome is unknown.
	block.Store(true)
	go func() { res <- c.Mkdirs(ctx, root, "/w", 0) }()
	<-arrived
	p.ln.Close()
	p.kill()
	err := <-res
	var oe *meta.OpError
	if !errors.Is(err, meta.ErrOutcomeUnknown) || !errors.As(err, &oe) || oe.Op != "mkdirs" || oe.Path != "/w" {
		t.Fatalf("write on a killed connection to a server gone: %v", err)
	}
	// A read that was never sent is busy: safe to retry.
	if _, err := c.Stat(ctx, root, "/x"); !errors.Is(err, meta.ErrBusy) {
		t.Fatalf("stat with the server gone: %v, want busy", err)
	}
}

func TestDialFailsClearly(t *testing.T) {
	_, err := client.Dial(context.Background(), "http://127.0.0.1:1", client.Options{})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("dial closed port: %v", err)
	}
	if _, err := client.Dial(context.Background(), "ftp://x", client.Options{}); err == nil {
		t.Fatal("dial ftp:// succeeded")
	}
	if err := (client.Options{Conns: -1}).Validate(); err == nil {
		t.Fatal("negative Conns accepted")
	}
}

func TestClosedClient(t *testing.T) {
	c := dial(t, serve(t, metatest.NewMemFS(), nil), client.Options{})
	c.Close()
	if _, err := c.Stat(context.Background(), root, "/"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("NIMBUS_ADDR", "")
	if client.AddrFromEnv() != client.DefaultAddr {
		t.Fatal("default addr")
	}
	t.Setenv("NIMBUS_ADDR", "http://h:1")
	if client.AddrFromEnv() != "http://h:1" {
		t.Fatal("NIMBUS_ADDR ignored")
	}
	t.Setenv("NIMBUS_USER", "alice")
	if client.DefaultUser().Name != "alice" {
		t.Fatal("NIMBUS_USER ignored")
	}
}

// TestResubmittedWriteAnsweredBusySettles: a write whose connection broke
// with it in flight is resubmitted, and the server answers the
// resubmission busy a few times (the first submission's subtree flag is
// still there, say). Busy only says that attempt did nothing: the client
// sends it again until an answer settles it; with no time to settle
// (SettleWait 1ns) it fails outcome unknown, never busy, which would
// tell the caller that the write was not done.
func TestResubmittedWriteAnsweredBusySettles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle time.Duration
	}{{"settles", 0}, {"no time to settle", time.Nanosecond}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := metatest.NewMemFS()
			ctx := context.Background()
			var calls, busy atomic.Int32
			arrived := make(chan struct{}, 1)
			fs.Hook = func(ctx context.Context, m string) error {
				if m != "mkdirs" {
					return nil
				}
				switch calls.Add(1) {
				case 1: // the first submission: its connection is cut
					arrived <- struct{}{}
					<-ctx.Done()
					return ctx.Err()
				case 2, 3, 4:
					busy.Add(1)
					return meta.Errorf("mkdirs", "/y", meta.ErrBusy, "a subtree operation is under way")
				}
				return nil
			}
			p := newProxy(t, serve(t, fs, nil))
			c := dial(t, p.addr(), client.Options{Conns: 1, SettleWait: tc.settle})
			res := make(chan error, 1)
			go func() { res <- c.Mkdirs(ctx, root, "/y", 0) }()
			<-arrived
			p.kill()
			err := <-res
			if tc.settle == 0 {
				if err != nil || calls.Load() != 5 {
					t.Fatalf("after %d busy answers: %v (%d calls), want success on the 5th", busy.Load(), err, calls.Load())
				}
				return
			}
			if !errors.Is(err, meta.ErrOutcomeUnknown) {
				t.Fatalf("a resubmission answered busy with no time to settle: %v, want outcome unknown", err)
			}
		})
	}
}
