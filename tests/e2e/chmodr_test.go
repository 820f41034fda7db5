package e2e

import (
	"fmt"
	"strings"
	"testing"
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
