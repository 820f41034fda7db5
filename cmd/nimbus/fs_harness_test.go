package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// harness runs `nimbus fs` command lines in process, through the same
// parsing as cmdFS, against a file system that tests can also inspect.
type harness struct {
	t     *testing.T
	fs    meta.FileSystem
	user  meta.User
	stdin io.Reader
	now   time.Time
}

// harnessTime is what touch uses as "now" (2026-11-23 02:03:04 UTC).
var harnessTime = time.Date(2026, 11, 23, 2, 3, 4, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, fs: newTestFS(t), user: meta.User{Name: "alice"}, now: harnessTime}
}

// run executes one command line ("ls", "-R", ...) and returns the exit
// status, stdout and stderr.
func (h *harness) run(args ...string) (code int, stdout, stderr string) {
	h.t.Helper()
	var out, errb bytes.Buffer
	jsonOut, inv, code := parseFSArgs(args, &errb)
	if inv == nil {
		return code, out.String(), errb.String()
	}
	stdin := h.stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	sh := newShell(streamFS{FileSystem: h.fs, client: "nimbus-fs-test"}, h.user, stdin, &out, &errb)
	sh.json = jsonOut
	sh.loc = time.UTC
	sh.now = func() time.Time { return h.now }
	code = sh.run(context.Background(), inv)
	return code, out.String(), errb.String()
}

// ok runs a command that must succeed silently on stderr and returns stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	code, out, errs := h.run(args...)
	if code != 0 || errs != "" {
		h.t.Fatalf("%q: exit %d, stderr %q", args, code, errs)
	}
	return out
}

// put writes a file with content through the file system directly.
func (h *harness) put(p, content string) {
	h.t.Helper()
	ctx := context.Background()
	sfs := streamFS{FileSystem: h.fs, client: "setup"}
	w, err := sfs.CreateWriter(ctx, h.user, p, meta.CreateOptions{CreateParent: true})
	if err != nil {
		h.t.Fatalf("create %s: %v", p, err)
	}
	if _, err := io.WriteString(w, content); err != nil {
		h.t.Fatalf("write %s: %v", p, err)
	}
	if err := w.Close(); err != nil {
		h.t.Fatalf("close %s: %v", p, err)
	}
}

func (h *harness) mkdirs(p string) {
	h.t.Helper()
	if err := h.fs.Mkdirs(context.Background(), h.user, p, meta.DefaultDir); err != nil {
		h.t.Fatalf("mkdirs %s: %v", p, err)
	}
}

func (h *harness) stat(p string) (*meta.FileStatus, error) {
	return h.fs.Stat(context.Background(), h.user, p)
}

// content reads a whole file through the file system directly.
func (h *harness) content(p string) string {
	h.t.Helper()
	sfs := streamFS{FileSystem: h.fs}
	rc, err := sfs.OpenReader(context.Background(), h.user, p)
	if err != nil {
		h.t.Fatalf("open %s: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		h.t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

// setTimes pins an inode's times so that golden output does not depend on
// the clock.
func (h *harness) setTimes(p string, ms int64) {
	h.t.Helper()
	if err := h.fs.SetTimes(context.Background(), h.user, p, ms, ms); err != nil {
		h.t.Fatalf("settimes %s: %v", p, err)
	}
}

func expectEq(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n got: %q\nwant: %q\n--- got ---\n%s--- want ---\n%s", what, got, want, got, want)
	}
}
