package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// payload is bigger than streamChunk, so copies take several chunks.
var payload = strings.Repeat("0123456789abcdef", 100<<10/16) + "tail"

func TestPutGetCat(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(local, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	h.ok("put", local, "up.bin")
	if got := h.content("/user/alice/up.bin"); got != payload {
		t.Fatalf("put: %d bytes back, want %d", len(got), len(payload))
	}
	if out := h.ok("cat", "up.bin"); out != payload {
		t.Errorf("cat: %d bytes, want %d", len(out), len(payload))
	}
	out := filepath.Join(dir, "out.bin")
	h.ok("get", "up.bin", out)
	if b, _ := os.ReadFile(out); string(b) != payload {
		t.Errorf("get: %d bytes", len(b))
	}
	if _, err := os.Stat(out + copyingSuffix); !os.IsNotExist(err) {
		t.Errorf("get left its temporary file: %v", err)
	}
	// Existing destinations need -f, on both sides.
	code, _, errs := h.run("put", local, "up.bin")
	if code != 1 || errs != "nimbus fs: put /user/alice/up.bin: already exists (use -f to overwrite)\n" {
		t.Errorf("put onto a file: exit %d %q", code, errs)
	}
	code, _, errs = h.run("get", "up.bin", out)
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: get /user/alice/up.bin: already exists (at "+out) {
		t.Errorf("get onto a file: exit %d %q", code, errs)
	}
	if err := os.WriteFile(local, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.ok("put", "-f", local, "up.bin")
	expectEq(t, "put -f", h.content("/user/alice/up.bin"), "short")
	h.ok("get", "-f", "up.bin", out)
	if b, _ := os.ReadFile(out); string(b) != "short" {
		t.Errorf("get -f: %q", b)
	}
	// cat of several files concatenates; a directory is an error that does
	// not stop the others.
	h.put("/user/alice/two", "-two")
	h.mkdirs("/user/alice/dir")
	code, stdout, errs := h.run("cat", "up.bin", "dir", "two")
	if code != 1 || stdout != "short-two" || errs != "nimbus fs: cat /user/alice/dir: is a directory\n" {
		t.Errorf("cat: exit %d, out %q, err %q", code, stdout, errs)
	}
}

func TestPutGetStdio(t *testing.T) {
	h := newHarness(t)
	h.stdin = strings.NewReader(payload)
	h.ok("put", "-", "from-stdin")
	if h.content("/user/alice/from-stdin") != payload {
		t.Error("put - lost data")
	}
	if out := h.ok("get", "from-stdin", "-"); out != payload {
		t.Errorf("get -: %d bytes", len(out))
	}
}

func TestPutIntoDirectoryAndMany(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.mkdirs("/user/alice/in")
	code, stdout, _ := h.run("--json", "put", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "in")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	expectEq(t, "a", h.content("/user/alice/in/a"), "aa")
	expectEq(t, "b", h.content("/user/alice/in/b"), "bb")
	var res []opResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res) != 2 || !res[0].OK ||
		res[0].Dst != "/user/alice/in/a" {
		t.Errorf("put --json: %+v %v", res, err)
	}
	h.put("/user/alice/plain", "p")
	code, _, errs := h.run("put", filepath.Join(dir, "a"), filepath.Join(dir, "b"), "plain")
	if code != 1 || errs != "nimbus fs: put /user/alice/plain: not a directory (several sources need a directory destination)\n" {
		t.Errorf("put many into a file: exit %d %q", code, errs)
	}
	code, _, errs = h.run("put", filepath.Join(dir, "missing"), "x")
	if code != 1 || errs != "nimbus fs: put "+filepath.Join(dir, "missing")+": not found (local file)\n" {
		t.Errorf("put missing local: exit %d %q", code, errs)
	}
}

func TestPutTooLargeLeavesNothing(t *testing.T) {
	h := newHarness(t)
	def, err := h.fs.Defaults(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.stdin = bytes.NewReader(make([]byte, def.InlineThreshold+1))
	code, _, errs := h.run("put", "-", "huge")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: put /user/alice/huge: file too large") {
		t.Errorf("exit %d %q", code, errs)
	}
	for _, p := range []string{"/user/alice/huge", "/user/alice/huge" + copyingSuffix} {
		if _, err := h.stat(p); meta.KindOf(err) != meta.KindNotFound {
			t.Errorf("%s: %v, want not found", p, err)
		}
	}
}

func TestPutGetTree(t *testing.T) {
	h := newHarness(t)
	src := filepath.Join(t.TempDir(), "tree")
	files := map[string]string{"a": "A", "sub/b": "B", "sub/deeper/c": "C"}
	for rel, c := range files {
		p := filepath.Join(src, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.ok("put", src, "/user/alice")
	for rel, c := range files {
		expectEq(t, rel, h.content("/user/alice/tree/"+rel), c)
	}
	if st, err := h.stat("/user/alice/tree/empty"); err != nil || !st.IsDir() {
		t.Errorf("empty dir: %v %v", st, err)
	}
	dst := t.TempDir()
	h.ok("get", "tree", dst)
	for rel, c := range files {
		b, err := os.ReadFile(filepath.Join(dst, "tree", filepath.FromSlash(rel)))
		if err != nil || string(b) != c {
			t.Errorf("get %s: %q %v", rel, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "tree", "empty")); err != nil || !fi.IsDir() {
		t.Errorf("get empty dir: %v", err)
	}
}
