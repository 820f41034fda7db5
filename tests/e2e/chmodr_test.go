package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
)

// lsModes runs `nimbus fs ls -R dir` and returns its lines, each checked to
// start with mode and carry owner and group; dir itself is checked with
// `ls -d`.
func lsModes(t *testing.T, s *server, dir, fileMode, dirMode, owner, group string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(s.ok("fs", "ls", "-d", dir)+s.ok("fs", "ls", "-R", dir)), "\n")
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 8 {
			t.Fatalf("ls line %q", l)
		}
		want := fileMode
		if f[0][0] == 'd' {
			want = dirMode
		}
		if f[0] != want || f[2] != owner || f[3] != group {
			t.Errorf("after the change: %q, want %s %s %s", l, want, owner, group)
		}
	}
	return len(lines)
}

// TestChmodChownRecursive: `nimbus fs chmod -R` and `chown -R` against the
// real server are one request each (the server's request counters say so),
// and every inode of a tree of more than one batch changes; a refusal below
// names the path refused and changes nothing.
func TestChmodChownRecursive(t *testing.T) {
	s := startServer(t, "", "")
	var paths []string
	for d := range 3 {
		for f := range 400 {
			paths = append(paths, fmt.Sprintf("/d/a%d/b/f%03d", d, f))
		}
	}
	s.ok("fs", "mkdir", "-p", "/d/a0/b", "/d/a1/b", "/d/a2/b", "/d/empty")
	s.ok(append([]string{"fs", "touch"}, paths...)...)
	setPerm := `nimbus_rpc_requests_total{kind="ok",method="setPermission"}`
	setPermR := `nimbus_rpc_requests_total{kind="ok",method="setPermissionRecursive"}`
	plainBefore := metric(t, s, setPerm)

	s.ok("fs", "chmod", "-R", "700", "/d")
	n := lsModes(t, s, "/d", "-rwx------", "drwx------", "root", "supergroup")
	if want := 1 + 3*2 + 1 + len(paths); n != want {
		t.Errorf("ls -R shows %d inodes, want %d", n, want)
	}
	if got := metric(t, s, setPermR); got != 1 {
		t.Errorf("%s = %v, want 1", setPermR, got)
	}
	if got := metric(t, s, setPerm); got != plainBefore {
		t.Errorf("chmod -R sent setPermission requests: %v, was %v", got, plainBefore)
	}

	s.ok("fs", "chown", "-R", "alice:staff", "/d")
	lsModes(t, s, "/d", "-rwx------", "drwx------", "alice", "staff")
	if got := metric(t, s, `nimbus_rpc_requests_total{kind="ok",method="setOwnerRecursive"}`); got != 1 {
		t.Errorf("setOwnerRecursive requests: %v, want 1", got)
	}

	// One of bob's files deep down: alice's chmod -R is refused, naming it.
	s.ok("fs", "chown", "bob", "/d/a2/b/f399")
	r := s.nimbusAs("alice", "", "fs", "chmod", "-R", "755", "/d")
	if r.code != 1 || !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, "/d/a2/b/f399") {
		t.Fatalf("chmod -R over bob's file: exit %d, stderr %q", r.code, r.stderr)
	}
	s.ok("fs", "chown", "alice", "/d/a2/b/f399")
	lsModes(t, s, "/d", "-rwx------", "drwx------", "alice", "staff")
	s.ok("fsck") // exits 1 on any problem
}

// treeModes walks dir over the client and counts the inodes by mode.
func treeModes(t *testing.T, ctx context.Context, c *client.Client, dir string, modes map[meta.Perm]int) {
	t.Helper()
	u := meta.User{Name: "root"}
	st, err := c.Stat(ctx, u, dir)
	if err != nil {
		t.Fatal(err)
	}
	modes[st.Perm]++
	after := ""
	for {
		l, err := c.List(ctx, u, dir, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.IsDir() {
				treeModes(t, ctx, c, e.Path, modes)
			} else {
				modes[e.Perm]++
			}
			after = e.Name()
		}
		if l.Remaining == 0 || len(l.Entries) == 0 {
			return
		}
	}
}

// TestChmodRecursiveSurvivesSIGKILL kills the server in the middle of a
// chmod -R (half its measured time in) and restarts it: the tree has one
// mode throughout, the old (killed before its first batch) or the new
// (finished at the start, as the server's log says), and fsck is clean.
func TestChmodRecursiveSurvivesSIGKILL(t *testing.T) {
	const dirs, files = 64, 400
	s := startServer(t, "", "")
	ctx := context.Background()
	u := meta.User{Name: "root"}
	c, err := client.Dial(ctx, s.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < dirs*files; i += 8 {
				p := fmt.Sprintf("/t/d%d/e%d/f%d", i/files%8, i/files, i%files)
				if _, err := meta.CreateFile(ctx, c, u, p, meta.CreateOptions{Client: "t", CreateParent: true}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	start := time.Now()
	if err := c.SetPermissionRecursive(ctx, u, "/t", 0o750); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	chmod := make(chan error, 1)
	go func() { chmod <- c.SetPermissionRecursive(ctx, u, "/t", 0o700) }()
	time.Sleep(took / 2)
	s.kill()
	chmodErr := <-chmod
	c.Close()
	t.Logf("chmod -R of %d inodes took %v; killed %v in: %v", dirs*files, took, took/2, chmodErr)

	s2 := startServer(t, s.data, "")
	c2, err := client.Dial(ctx, s2.url(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	modes := map[meta.Perm]int{}
	treeModes(t, ctx, c2, "/t", modes)
	resumed := strings.Contains(s2.log.String(), "left by a restart")
	switch {
	case len(modes) != 1:
		t.Fatalf("after the restart the tree has several modes: %v", modes)
	case modes[0o700] > 0 && resumed:
		t.Logf("the restart finished the chmod -R")
	case modes[0o700] > 0:
		t.Logf("the chmod -R committed before the kill")
	case modes[0o750] > 0 && !resumed && chmodErr != nil:
		t.Logf("the kill came before the first batch: nothing changed")
	default:
		t.Fatalf("modes %v, resumed %v, chmod -R answered %v", modes, resumed, chmodErr)
	}
	s2.ok("fsck")
}
