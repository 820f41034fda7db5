package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/etcdtest"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// monitorLeads reads nimbus_namespace_lease_monitor_leader from s.
func monitorLeads(t *testing.T, s *server) bool {
	t.Helper()
	_, body := testproc.Get(t, s.url()+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "nimbus_namespace_lease_monitor_leader "); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	t.Fatalf("no nimbus_namespace_lease_monitor_leader on %s", s.url())
	return false
}

// waitFor polls cond until it holds (a hang guard only: ctx, the test's
// own bound).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dial(t *testing.T, s *server) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestElectedLeaseMonitorSurvivesSIGKILL: two `nimbus serve` processes on
// one PostgreSQL database and one etcd. The first to start leads the
// lease-monitor election; the other runs no monitor. A block file's writes
// stay with the server its stream is on (a write through the other fails
// with a lease error, changing nothing). The leader is SIGKILLed: the other
// takes lease recovery over once etcd expires the dead one's lease, and
// closes at its durable length the file whose writer wrote through the dead
// server, while a writer renewing through the live one keeps its file. A
// block file written through the dead server cannot be recovered away from
// its replica and stays open (not closed short) until its server returns.
func TestElectedLeaseMonitorSurvivesSIGKILL(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	db := pgtest.DB(t)
	url := fmt.Sprintf("etcd://%s/e2e-duties-%d", strings.Join(eps, ","), time.Now().UnixNano())
	args := []string{"--store", db, "--coordinator", url, "--coordinator-ttl", "2s",
		"--lease-soft-limit", "1s", "--lease-hard-limit", "3s", "--inline-threshold", "1024", "--min-block-size", "0"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a := startServer(t, "", "", args...)
	waitFor(ctx, t, "a leads the lease monitor", func() bool { return monitorLeads(t, a) })
	b := startServer(t, "", "", args...)
	if monitorLeads(t, b) {
		t.Fatal("b runs the lease monitor while a leads it")
	}
	ca, cb := dial(t, a), dial(t, b)
	root := meta.User{Name: "root"}
	if err := ca.Mkdirs(ctx, root, "/d", 0o755); err != nil {
		t.Fatal(err)
	}

	// A block file written through b: its stream is b's.
	blob := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4096 bytes
	if _, err := cb.Create(ctx, root, "/d/bblk", meta.CreateOptions{Client: "wb", BlockSize: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := cb.Write(ctx, root, "/d/bblk", "wb", 0, blob[:3000]); err != nil {
		t.Fatal(err)
	}
	err := ca.Write(ctx, root, "/d/bblk", "wb", 3000, blob[3000:])
	if !errors.Is(err, meta.ErrLease) || !strings.Contains(err.Error(), "holds no block stream") {
		t.Fatalf("a write through the server without the stream: %v, want a lease error naming the stream", err)
	}
	if err := cb.Write(ctx, root, "/d/bblk", "wb", 3000, blob[3000:]); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Complete(ctx, root, "/d/bblk", "wb"); err != nil {
		t.Fatal(err)
	}
	if got, err := cb.Read(ctx, root, "/d/bblk", 0, 1<<20); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("read of /d/bblk through b: %d bytes, %v", len(got), err)
	}

	// Through a: an inline file and a block file whose writers will fall
	// silent with a.
	if _, err := ca.Create(ctx, root, "/d/inline", meta.CreateOptions{Client: "wa"}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(ctx, root, "/d/inline", "wa", 0, []byte("durable")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Create(ctx, root, "/d/ablk", meta.CreateOptions{Client: "wa", BlockSize: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(ctx, root, "/d/ablk", "wa", 0, blob[:3000]); err != nil {
		t.Fatal(err)
	}
	// Through b: a writer that keeps renewing.
	if _, err := cb.Create(ctx, root, "/d/live", meta.CreateOptions{Client: "wl"}); err != nil {
		t.Fatal(err)
	}
	renewing, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan error, 1)
	go func() {
		for renewing.Err() == nil {
			if err := cb.RenewLease(renewing, root, "wl"); err != nil && renewing.Err() == nil {
				renewed <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		renewed <- nil
	}()

	aData := a.data
	a.kill()
	waitFor(ctx, t, "b takes the lease monitor over", func() bool { return monitorLeads(t, b) })
	waitFor(ctx, t, "b recovers /d/inline", func() bool {
		st, err := cb.Stat(ctx, root, "/d/inline")
		if err != nil {
			t.Fatal(err)
		}
		return !st.UnderConstruction
	})
	if got, err := cb.Read(ctx, root, "/d/inline", 0, 100); err != nil || string(got) != "durable" {
		t.Fatalf("/d/inline after recovery: %q, %v", got, err)
	}
	// Recovered at least one hard limit after a's last renewal: the live
	// writer renewed all along and keeps its file.
	if st, err := cb.Stat(ctx, root, "/d/live"); err != nil || !st.UnderConstruction {
		t.Fatalf("/d/live, renewed through b, was recovered: %+v %v", st, err)
	}
	stopRenewing()
	if err := <-renewed; err != nil {
		t.Fatalf("renewing through b: %v", err)
	}
	// /d/ablk's last replica is on a's disk: b's monitor cannot recover it
	// and leaves it open rather than closing it short.
	waitFor(ctx, t, "b's monitor tries /d/ablk", func() bool {
		return strings.Contains(b.log.String(), "no replica on this NameNode's DataNode")
	})
	if st, err := cb.Stat(ctx, root, "/d/ablk"); err != nil || !st.UnderConstruction {
		t.Fatalf("/d/ablk, whose replica b cannot reach, after b's recovery attempt: %+v %v", st, err)
	}
	// a comes back on its data: the writer closes the file there, at what
	// a's DataNode holds durably (at least the finalized first block).
	a2 := startServer(t, aData, "", args...)
	ca2 := dial(t, a2)
	st, err := ca2.Complete(ctx, root, "/d/ablk", "wa")
	if err != nil {
		t.Fatalf("complete of /d/ablk through the restarted a: %v", err)
	}
	if st.Length < 2048 || st.Length > 3000 {
		t.Fatalf("/d/ablk closed at %d bytes, want 2048..3000", st.Length)
	}
	if got, err := ca2.Read(ctx, root, "/d/ablk", 0, 1<<20); err != nil || !bytes.Equal(got, blob[:st.Length]) {
		t.Fatalf("read of /d/ablk through the restarted a: %d bytes, %v", len(got), err)
	}
	if monitorLeads(t, a2) {
		t.Fatal("the restarted a runs the lease monitor while b leads it")
	}
}
