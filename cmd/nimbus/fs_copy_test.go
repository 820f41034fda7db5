package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
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

// TestPutBlockSizeReplication: put's flags reach the created file.
func TestPutBlockSizeReplication(t *testing.T) {
	h := newHarness(t)
	h.fs = newTestFSWith(t, func(c *namespace.Config) { c.MinBlockSize = 0 }) // block sizes under HDFS's minimum
	local := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(local, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args        []string
		blockSize   int64
		replication uint16
	}{
		{[]string{"put", local, "plain"}, 128 << 20, 3}, // the engine's defaults in the harness
		{[]string{"put", "--block-size", "1m", "--replication", "2", local, "flags"}, 1 << 20, 2},
		{[]string{"put", "--block-size=4096", local, "bs-only"}, 4096, 3},
		{[]string{"put", "-D", "dfs.blocksize=64k", "-Ddfs.replication=5", local, "hdfs-style"}, 64 << 10, 5},
	} {
		h.ok(tc.args...)
		dst := "/user/alice/" + tc.args[len(tc.args)-1]
		st, err := h.stat(dst)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if st.BlockSize != tc.blockSize || st.Replication != tc.replication {
			t.Errorf("%q: block size %d replication %d, want %d %d", tc.args, st.BlockSize, st.Replication,
				tc.blockSize, tc.replication)
		}
		expectEq(t, dst, h.content(dst), "data")
	}
	// Directories and stdin use them too.
	tree := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "sub", "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.ok("put", "--replication", "7", tree, "tree")
	h.stdin = strings.NewReader("in")
	h.ok("put", "--block-size", "2k", "-", "stdin")
	for p, want := range map[string][2]int64{"/user/alice/tree/sub/x": {128 << 20, 7}, "/user/alice/stdin": {2048, 3}} {
		if st, err := h.stat(p); err != nil || st.BlockSize != want[0] || int64(st.Replication) != want[1] {
			t.Errorf("%s: %+v %v, want block size %d replication %d", p, st, err, want[0], want[1])
		}
	}
	// A bad value is a usage error that touches nothing.
	code, _, errs := h.run("put", "--replication", "0", local, "bad")
	if code != 2 || !strings.Contains(errs, `--replication "0": not a replication factor`) {
		t.Errorf("bad replication: exit %d %q", code, errs)
	}
	if _, err := h.stat("/user/alice/bad"); meta.KindOf(err) != meta.KindNotFound {
		t.Errorf("usage error created the file: %v", err)
	}
}

// TestTransferProgressOutput: -v prints progress lines on stderr (not a
// terminal here, so whole lines); without -v nothing extra is printed.
func TestTransferProgressOutput(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(local, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	size := byteCount(int64(len(payload)))
	lineFor := func(label string) string {
		// The harness clock stands still: no rate, elapsed 0:00.
		return label + ": " + size + " / " + size + " (100%), 0 B/s, in 0:00\n"
	}

	code, stdout, stderr := h.run("put", "-v", local, "v.bin")
	if code != 0 || stdout != "" {
		t.Fatalf("put -v: exit %d, stdout %q", code, stdout)
	}
	expectEq(t, "put -v stderr", stderr, lineFor("put "+local))
	code, stdout, stderr = h.run("get", "-v", "v.bin", filepath.Join(dir, "out.bin"))
	if code != 0 || stdout != "" {
		t.Fatalf("get -v: exit %d, stdout %q", code, stdout)
	}
	expectEq(t, "get -v stderr", stderr, lineFor("get v.bin"))
	code, stdout, stderr = h.run("cat", "-v", "v.bin")
	if code != 0 || stdout != payload {
		t.Fatalf("cat -v: exit %d, %d bytes out", code, len(stdout))
	}
	expectEq(t, "cat -v stderr", stderr, lineFor("cat v.bin"))
	h.stdin = strings.NewReader("abc") // size unknown: no total
	_, _, stderr = h.run("put", "-v", "-", "pipe")
	expectEq(t, "put -v - stderr", stderr, "put -: 3 B, 0 B/s, in 0:00\n")

	// Without -v and without a terminal: exactly the old output.
	h.ok("put", "-f", local, "v.bin")
	h.ok("get", "-f", "v.bin", filepath.Join(dir, "out.bin"))
	h.ok("cat", "v.bin")
	h.ok("--json", "put", "-f", local, "v.bin")

	// A failed transfer still ends its progress line before the error.
	code, _, stderr = h.run("get", "-v", "missing", filepath.Join(dir, "m"))
	if code != 1 || stderr != "nimbus fs: get /user/alice/missing: not found\n" {
		t.Errorf("get -v missing: exit %d %q", code, stderr)
	}
}

// TestPutGetLargeStreams copies a file several times the copy buffer and
// the stream chunk, of a size that is a multiple of neither, both ways, on
// an engine whose inline threshold admits it, and compares every byte.
func TestPutGetLargeStreams(t *testing.T) {
	h := newHarness(t)
	const size = 3<<20 + 17
	h.fs = newTestFSWith(t, func(c *namespace.Config) { c.InlineThreshold = 4 << 20 })
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	h.ok("put", "--block-size", "1m", local, "big.bin")
	if st, err := h.stat("/user/alice/big.bin"); err != nil || st.Length != size || st.BlockSize != 1<<20 {
		t.Fatalf("stat: %+v %v", st, err)
	}
	if got := h.content("/user/alice/big.bin"); got != string(data) {
		t.Fatalf("put: content differs (%d bytes back)", len(got))
	}
	out := filepath.Join(dir, "back.bin")
	h.ok("get", "big.bin", out)
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("get: content differs (%d bytes, %v)", len(b), err)
	}
	if s := h.ok("cat", "big.bin"); s != string(data) {
		t.Fatalf("cat: content differs (%d bytes)", len(s))
	}
}

// TestPutRetryTakesOverItsOwnCopy: a put killed mid-way leaves its copy open
// under a lease that would keep the retry out for the soft limit; a retry by
// the same user (with or without -f) replaces it at once. Another user's open
// copy stays, and the error names it and says when its lease can be taken.
func TestPutRetryTakesOverItsOwnCopy(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(local, []byte("whole"), 0o644); err != nil {
		t.Fatal(err)
	}
	leaveCopy := func(u meta.User, p string) {
		t.Helper()
		if _, err := h.fs.Create(ctx, u, p+copyingSuffix, meta.CreateOptions{Client: "killed-put"}); err != nil {
			t.Fatal(err)
		}
		if err := h.fs.Write(ctx, u, p+copyingSuffix, "killed-put", 0, []byte("half")); err != nil {
			t.Fatal(err)
		}
	}
	leaveCopy(h.user, "/user/alice/big")
	h.ok("put", local, "big")
	leaveCopy(h.user, "/user/alice/big")
	h.ok("put", "-f", local, "big")
	expectEq(t, "content", h.content("/user/alice/big"), "whole")
	if _, err := h.stat("/user/alice/big" + copyingSuffix); meta.KindOf(err) != meta.KindNotFound {
		t.Fatalf("copy left behind: %v", err)
	}

	if err := h.fs.SetPermission(ctx, h.user, "/user/alice", 0o777); err != nil {
		t.Fatal(err)
	}
	leaveCopy(meta.User{Name: "bob"}, "/user/alice/bobs")
	code, _, errs := h.run("put", local, "bobs")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: put /user/alice/bobs: file is being written by another client (at /user/alice/bobs._COPYING_: ") ||
		!strings.Contains(errs, "client killed-put of user bob") || !strings.Contains(errs, "take the file over in 1m0s") {
		t.Fatalf("put over another user's open copy: exit %d %q", code, errs)
	}
	if st, err := h.stat("/user/alice/bobs" + copyingSuffix); err != nil || !st.UnderConstruction || st.Owner != "bob" {
		t.Fatalf("bob's copy: %+v %v", st, err)
	}
}
