package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCLITour(t *testing.T) {
	s := startServer(t, "", "")
	s.ok("fs", "mkdir", "-p", "/data/in", "/data/out")
	local := filepath.Join(t.TempDir(), "blob")
	blob := make([]byte, 100_000)
	rand.Read(blob)
	if err := os.WriteFile(local, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("fs", "put", local, "/data/in/blob")
	if got := s.ok("fs", "cat", "/data/in/blob"); got != string(blob) {
		t.Fatalf("cat returned %d bytes, want the %d put", len(got), len(blob))
	}
	back := filepath.Join(t.TempDir(), "back")
	s.ok("fs", "get", "/data/in/blob", back)
	if got, _ := os.ReadFile(back); !bytes.Equal(got, blob) {
		t.Fatal("get returned different bytes")
	}
	s.ok("fs", "touch", "/data/in/empty")
	s.ok("fs", "mv", "/data/in/empty", "/data/out")
	ls := s.ok("fs", "ls", "-R", "/data")
	for _, want := range []string{"/data/in/blob", "/data/out/empty", "Found"} {
		if !strings.Contains(ls, want) && want != "Found" {
			t.Fatalf("ls -R lacks %s:\n%s", want, ls)
		}
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(s.ok("fs", "--json", "ls", "/data/in")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0]["path"] != "/data/in/blob" || entries[0]["length"] != float64(len(blob)) {
		t.Fatalf("ls --json: %v", entries)
	}
	s.ok("fs", "chmod", "-R", "700", "/data")
	s.ok("fs", "chown", "alice:alice", "/data/out/empty")
	if st := s.ok("fs", "stat", "%u:%g %a", "/data/out/empty"); strings.TrimSpace(st) != "alice:alice 700" {
		t.Fatalf("stat after chown/chmod: %q", st)
	}
	// Exit codes and messages: an error names the operation, path and kind.
	r := s.nimbus("", "fs", "ls", "/no/such")
	if r.code != 1 || !strings.Contains(r.stderr, "/no/such") || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("ls of a missing path: code %d, stderr %q", r.code, r.stderr)
	}
	r = s.nimbus("", "fs", "rm", "/data")
	if r.code != 1 || !strings.Contains(r.stderr, "/data") || !strings.Contains(r.stderr, "is a directory") {
		t.Fatalf("rm of a non-empty directory: code %d, stderr %q", r.code, r.stderr)
	}
	r = s.nimbusAs("bob", "", "fs", "cat", "/data/in/blob")
	if r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Fatalf("bob reading a 700 tree: code %d, stderr %q", r.code, r.stderr)
	}
	if r = s.nimbus("", "fs", "frobnicate"); r.code != 2 {
		t.Fatalf("unknown sub-command: exit %d", r.code)
	}
	if r = s.nimbus("", "fs", "test", "-d", "/data"); r.code != 0 {
		t.Fatalf("test -d /data: exit %d", r.code)
	}
	if r = s.nimbus("", "fs", "test", "-e", "/nope"); r.code != 1 {
		t.Fatalf("test -e /nope: exit %d", r.code)
	}
	s.ok("fs", "rm", "-r", "/data/in")
	if r = s.nimbus("", "fs", "test", "-e", "/data/in/blob"); r.code != 1 {
		t.Fatal("rm -r left the file behind")
	}
	if out := s.ok("fsck"); !strings.Contains(out, "HEALTHY") {
		t.Fatalf("fsck: %s", out)
	}
	// Graceful stop, then fsck of the stopped server's store.
	s.stop()
	r = s.nimbus("", "fsck", "--data", s.data)
	if r.code != 0 {
		t.Fatalf("fsck --data: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
