package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/meta"
)

// subtreeCrashFiles is the size of the trees of TestSubtreeCrashEachPhase:
// 2^14 files in CI; NIMBUS_SUBTREE_CRASH_FILES=262144 runs the target's
// 2^18 (minutes, not a CI test).
func subtreeCrashFiles(t *testing.T) int {
	t.Helper()
	v := os.Getenv("NIMBUS_SUBTREE_CRASH_FILES")
	if v == "" {
		return 1 << 14
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 64 {
		t.Fatalf("NIMBUS_SUBTREE_CRASH_FILES=%q: want a number of files >= 64", v)
	}
	return n
}

// TestSubtreeCrashEachPhase kills the server (SIGKILL) in each phase of a
// recursive delete and of a directory move of a large tree (a few files in
// it kept in block storage), at a moment picked from the operation's own
// progress metrics on /metrics (nimbus_namespace_subtree_phase,
// nimbus_namespace_subtree_entries_done_total); restarts it on the same
// data, retries the operation as a client whose call died would, and
// checks that fsck is clean (no orphaned rows or block replicas) and the
// operation complete.
func TestSubtreeCrashEachPhase(t *testing.T) {
	files := subtreeCrashFiles(t)
	ready := 30 * time.Second
	if files > 1<<16 {
		ready = 10 * time.Minute // the restart finishes a big delete first
	}
	// A small inline threshold puts the files written with content in
	// block storage, so that a lost replica or an orphaned one shows.
	args := []string{"--superuser", "root", "--inline-threshold", "1024", "--min-block-size", "0"}
	srv := testproc.Start(t, binary, "", "", args...)
	ctx := context.Background()

	cases := []struct {
		op, phase string
	}{
		{"delete", "set_flag"}, {"delete", "quiesce"}, {"delete", "work"},
		{"mv", "set_flag"}, {"mv", "quiesce"}, {"mv", "work"},
	}
	moved := false // the move's tree is at /mv/a, or at /mv/b once moved
	for i, tc := range cases {
		cl := dialCrash(t, srv)
		dir := fmt.Sprintf("/del%d", i)
		if tc.op == "mv" && i == 3 {
			dir = "/mv/a"
		}
		if tc.op == "delete" || i == 3 {
			start := time.Now()
			buildCrashTree(t, cl, dir, files)
			t.Logf("%s: built %s (%d files) in %v", tc.op, dir, files, time.Since(start).Round(time.Millisecond))
		}
		var src, dst string
		run := func(ctx context.Context, c *client.Client) error {
			if tc.op == "delete" {
				return c.Delete(ctx, su, dir, true)
			}
			return c.Rename(ctx, su, src, dst, meta.RenameOptions{})
		}
		// The operation, on a connection of its own; the kill when the
		// metrics show the phase. A move's work is one transaction, over
		// in a millisecond: it is tried again (moving the tree back and
		// forth) until a poll falls inside it, up to 20 times; a delete
		// that outran the polls, on a new tree, up to 3 times.
		var killedErr error // what the operation the kill cut returned
		for attempt := 1; ; attempt++ {
			src, dst = "/mv/a", "/mv/b"
			if moved {
				src, dst = dst, src
			}
			base := scrapeSubtree(t, srv.URL())
			opDone := make(chan error, 1)
			go func() { opDone <- run(ctx, cl) }()
			seen, err := waitPhase(srv.URL(), tc.op, tc.phase, base, opDone)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.op, tc.phase, err)
			}
			if seen == "finished" && tc.op == "mv" && attempt < 20 {
				if err := <-opDone; err != nil {
					t.Fatalf("move %s to %s: %v", src, dst, err)
				}
				moved = !moved
				continue
			}
			if seen == "finished" && tc.op == "delete" && tc.phase != "quiesce" && attempt < 3 {
				// Faster than the polls (a quiet machine): a new tree.
				if err := <-opDone; err != nil {
					t.Fatalf("delete %s: %v", dir, err)
				}
				dir = fmt.Sprintf("/del%d-%d", i, attempt)
				buildCrashTree(t, cl, dir, files)
				continue
			}
			srv.Kill()
			opErr := <-opDone
			killedErr = opErr
			cl.Close()
			t.Logf("%s: SIGKILL at phase %s (%s, attempt %d); the call returned %v", tc.op, tc.phase, seen, attempt, opErr)
			if seen == "finished" {
				switch {
				case tc.op == "mv":
					// Not a failure of the server: the poll never fell in
					// the one transaction (a busy machine widens it).
					t.Logf("mv: its work phase was not caught in %d attempts; the kill came after it", attempt)
				case tc.phase == "quiesce":
					// On the embedded store the quiesce waits only for the
					// operations in flight when the flag was set
					// (namespace/grace.go): microseconds, which no poll of
					// the metrics can fall in. The kill came after it.
					t.Logf("%s: its quiesce (a grace period of microseconds) was not caught; the kill came after it", tc.op)
				default:
					t.Errorf("%s: the operation finished before its %s phase could be caught", tc.op, tc.phase)
				}
			}
			break
		}

		// Restart; the client retries until the operation is done.
		srv = testproc.Spawn(t, binary, srv.Data, "", args...)
		if err := srv.WaitReady(ready); err != nil {
			t.Fatalf("restart after the kill: %v\n%s", err, srv.Log.String())
		}
		cl = dialCrash(t, srv)
		err := run(ctx, cl)
		switch {
		case err == nil:
		case errors.Is(err, meta.ErrNotFound):
			// Done before the kill, or finished at the restart.
		default:
			t.Fatalf("%s retried after the restart: %v", tc.op, err)
		}
		switch {
		case tc.phase != "work" || tc.op != "delete":
		case killedErr == nil:
			// The delete answered before the kill landed: the poll saw its
			// work phase, and the rest of it ran between the poll and the
			// signal (a loaded machine). Nothing was left to finish.
			t.Logf("delete: finished between the poll of its work phase and the kill")
		case strings.Contains(srv.Log.String(), "cancelled a recursive delete left before its permission check"):
			// Killed in the work phase before its permission check was
			// recorded: cancelled at the restart, and run again by the
			// client's retry above.
			t.Logf("delete: killed before its permission check was recorded; cancelled at the restart")
		case !strings.Contains(srv.Log.String(), "finishing a recursive delete left by a restart"):
			t.Errorf("the delete killed in its work phase was not finished at the restart:\n%s", srv.Log.String())
		}
		if tc.op == "delete" {
			if _, err := cl.Stat(ctx, su, dir); !errors.Is(err, meta.ErrNotFound) {
				t.Fatalf("stat %s after the retried delete: %v", dir, err)
			}
		} else {
			moved = !moved
			if _, err := cl.Stat(ctx, su, src); !errors.Is(err, meta.ErrNotFound) {
				t.Fatalf("stat %s after the retried move: %v", src, err)
			}
			cs, err := cl.ContentSummary(ctx, su, dst)
			if err != nil {
				t.Fatalf("after the retried move: %v", err)
			}
			if cs.FileCount != int64(files) {
				t.Fatalf("%s holds %d files after the move, want %d", dst, cs.FileCount, files)
			}
		}
		rep, err := cl.Fsck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Clean() {
			t.Fatalf("fsck after %s killed in %s: %v", tc.op, tc.phase, rep.Problems)
		}
		cl.Close()
	}
}

// su is the superuser the test servers run with.
var su = meta.User{Name: "root"}

func dialCrash(t *testing.T, srv *testproc.Server) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), srv.URL(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// buildCrashTree makes files empty files under dir, 16 a directory, in 64
// top directories (the shape of bench prepare's trees), four of them with
// 4 KB of content in block storage.
func buildCrashTree(t *testing.T, c *client.Client, dir string, files int) {
	t.Helper()
	ctx := context.Background()
	dirs := (files + 15) / 16
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d := int(next.Add(1)) - 1
				if d >= dirs {
					return
				}
				sub := fmt.Sprintf("%s/g%02d/d%05d", dir, d%64, d)
				if err := c.Mkdirs(ctx, su, sub, 0o755); err != nil {
					errs <- err
					return
				}
				for f := d * 16; f < min(files, d*16+16); f++ {
					p := fmt.Sprintf("%s/f%d", sub, f)
					var err error
					if f%(files/4) == 1 {
						err = writeBlockFile(ctx, c, p, bytes.Repeat([]byte{byte(f)}, 4096))
					} else {
						_, err = c.CreateFile(ctx, su, p, meta.CreateOptions{}, nil)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("building %s: %v", dir, err)
	}
}

// writeBlockFile writes a file with more than the inline threshold, as a
// stream: its content goes to block storage, in 1 KB blocks.
func writeBlockFile(ctx context.Context, c *client.Client, p string, data []byte) error {
	w, err := c.CreateWriter(ctx, su, p, meta.CreateOptions{BlockSize: 1024})
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// subtreeMetrics is what /metrics says of subtree operations.
type subtreeMetrics struct {
	phase map[string]float64 // operations now in each phase
	done  float64            // entries the work phases committed
}

func scrapeSubtree(t *testing.T, url string) subtreeMetrics {
	t.Helper()
	m, err := scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func scrape(url string) (subtreeMetrics, error) {
	m := subtreeMetrics{phase: map[string]float64{}}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, `nimbus_namespace_subtree_phase{phase="`):
			m.phase[strings.TrimSuffix(strings.TrimPrefix(name, `nimbus_namespace_subtree_phase{phase="`), `"}`)] = v
		case name == `nimbus_namespace_subtree_entries_done_total{op="delete"}`:
			m.done = v
		}
	}
	return m, sc.Err()
}

// waitPhase polls the metrics until the operation is in phase (set_flag:
// in any phase, the earliest that can be seen; work of a delete: one of
// its batches committed) and returns what it saw: the phase, or
// "finished" when the operation ended first.
func waitPhase(url, op, phase string, base subtreeMetrics, opDone chan error) (string, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-opDone:
			opDone <- err
			return "finished", nil
		default:
		}
		m, err := scrape(url)
		if err != nil {
			return "", err
		}
		in := func(p string) bool { return m.phase[p] > base.phase[p] }
		switch phase {
		case "set_flag":
			for _, p := range []string{"set_flag", "quiesce", "work"} {
				if in(p) {
					return p, nil
				}
			}
		case "quiesce":
			if in("quiesce") {
				return "quiesce", nil
			}
		case "work":
			if op == "delete" && m.done > base.done {
				return fmt.Sprintf("work, %.0f entries removed", m.done-base.done), nil
			}
			if op != "delete" && in("work") {
				return "work", nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return "", fmt.Errorf("the operation did not reach phase %s in 5 minutes", phase)
}
