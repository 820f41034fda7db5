package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// lsFixture: /user/alice/{d1/{sub/,x.txt}, f.txt (5 bytes), big (2048 bytes)}.
func lsFixture(t *testing.T) *harness {
	h := newHarness(t)
	h.mkdirs("/user/alice/d1/sub")
	h.put("/user/alice/d1/x.txt", "xyz")
	h.put("/user/alice/f.txt", "hello")
	h.put("/user/alice/big", strings.Repeat("b", 2048))
	for _, p := range []string{"/user/alice/d1/sub", "/user/alice/d1/x.txt", "/user/alice/d1", "/user/alice/f.txt", "/user/alice/big"} {
		h.setTimes(p, fakeTime)
	}
	return h
}

func TestLsGolden(t *testing.T) {
	h := lsFixture(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "Found 3 items\n" +
			"-rw-r--r--   3 alice supergroup       2048 2026-11-23 01:02 big\n" +
			"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 d1\n" +
			"-rw-r--r--   3 alice supergroup          5 2026-11-23 01:02 f.txt\n"},
		{[]string{"ls", "/user/alice/d1"}, "Found 2 items\n" +
			"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 /user/alice/d1/sub\n" +
			"-rw-r--r--   3 alice supergroup          3 2026-11-23 01:02 /user/alice/d1/x.txt\n"},
		{[]string{"ls", "d1"}, "Found 2 items\n" +
			"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 d1/sub\n" +
			"-rw-r--r--   3 alice supergroup          3 2026-11-23 01:02 d1/x.txt\n"},
		{[]string{"ls", "f.txt"},
			"-rw-r--r--   3 alice supergroup          5 2026-11-23 01:02 f.txt\n"},
		{[]string{"ls", "-d", "d1", "/user/alice/f.txt"},
			"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 d1\n" +
				"-rw-r--r--   3 alice supergroup          5 2026-11-23 01:02 /user/alice/f.txt\n"},
		{[]string{"ls", "-R", "/user/alice"},
			"-rw-r--r--   3 alice supergroup       2048 2026-11-23 01:02 /user/alice/big\n" +
				"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 /user/alice/d1\n" +
				"drwxr-xr-x   - alice supergroup          0 2026-11-23 01:02 /user/alice/d1/sub\n" +
				"-rw-r--r--   3 alice supergroup          3 2026-11-23 01:02 /user/alice/d1/x.txt\n" +
				"-rw-r--r--   3 alice supergroup          5 2026-11-23 01:02 /user/alice/f.txt\n"},
		{[]string{"ls", "-h", "big"},
			"-rw-r--r--   3 alice supergroup        2 K 2026-11-23 01:02 big\n"},
		{[]string{"ls", "d1/sub"}, ""}, // empty directory: no header, nothing
	}
	for _, c := range cases {
		expectEq(t, strings.Join(c.args, " "), h.ok(c.args...), c.want)
	}
}

func TestLsErrorsKeepGoing(t *testing.T) {
	h := lsFixture(t)
	code, out, errs := h.run("ls", "nope", "f.txt", "/f.txt/x")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	expectEq(t, "stdout", out, "-rw-r--r--   3 alice supergroup          5 2026-11-23 01:02 f.txt\n")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != 2 || lines[0] != "nimbus fs: ls /user/alice/nope: not found" ||
		!strings.HasPrefix(lines[1], "nimbus fs: ls /f.txt/x: not found") {
		t.Errorf("stderr %q", errs)
	}
}

func TestLsJSON(t *testing.T) {
	h := lsFixture(t)
	for _, args := range [][]string{{"--json", "ls", "d1"}, {"ls", "--json", "d1"}} {
		out := h.ok(args...)
		var got []map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		if len(got) != 2 {
			t.Fatalf("%q: %d entries, want 2", args, len(got))
		}
		var keys []string
		for k := range got[1] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"access_time", "block_size", "children_num", "file_id", "group", "length",
			"modification_time", "owner", "path", "permission", "replication", "type", "under_construction"}
		if !reflect.DeepEqual(keys, want) {
			t.Errorf("keys %v, want %v", keys, want)
		}
		f := got[1]
		if f["path"] != "/user/alice/d1/x.txt" || f["type"] != "file" || f["permission"] != "644" ||
			f["length"] != 3.0 || f["owner"] != "alice" || f["replication"] != 3.0 ||
			f["modification_time"] != float64(fakeTime) {
			t.Errorf("file entry %v", f)
		}
		if d := got[0]; d["type"] != "directory" || d["permission"] != "755" || d["path"] != "/user/alice/d1/sub" {
			t.Errorf("dir entry %v", d)
		}
	}
	// Empty results are an empty array, not null.
	expectEq(t, "empty", h.ok("--json", "ls", "d1/sub"), "[]\n")
}

func TestStatFormats(t *testing.T) {
	h := lsFixture(t)
	got := h.ok("stat", "%n|%b|%o|%r|%u|%g|%y|%Y|%F|%a|%A|%x|%X|%%|%q", "f.txt", "d1")
	want := "f.txt|5|134217728|3|alice|supergroup|2026-11-23 01:02:00|1795395720000|regular file|644|rw-r--r--|2026-11-23 01:02:00|1795395720000|%|%q\n" +
		"d1|0|0|0|alice|supergroup|2026-11-23 01:02:00|1795395720000|directory|755|rwxr-xr-x|2026-11-23 01:02:00|1795395720000|%|%q\n"
	expectEq(t, "stat", got, want)
	expectEq(t, "default format", h.ok("stat", "f.txt"), "2026-11-23 01:02:00\n")
	// A single argument is a path, even with a '%' in it.
	code, _, errs := h.run("stat", "%n")
	if code != 1 || errs != "nimbus fs: stat /user/alice/%n: not found\n" {
		t.Errorf("stat %%n: exit %d, %q", code, errs)
	}
	var js []map[string]any
	if err := json.Unmarshal([]byte(h.ok("--json", "stat", "f.txt")), &js); err != nil || len(js) != 1 || js[0]["length"] != 5.0 {
		t.Errorf("stat --json: %v %v", js, err)
	}
}

func TestDuCount(t *testing.T) {
	h := lsFixture(t)
	expectEq(t, "du", h.ok("du"), ""+
		"2048  6144  big\n"+
		"3     9     d1\n"+
		"5     15    f.txt\n")
	expectEq(t, "du -s", h.ok("du", "-s", "/user/alice", "d1"), ""+
		"2056  6168  /user/alice\n"+
		"3     9     d1\n")
	expectEq(t, "du -s -h", h.ok("du", "-sh", "/user/alice"), "2.0 K  6.0 K  /user/alice\n")
	expectEq(t, "count", h.ok("count", "/user/alice", "f.txt"), ""+
		"           3            3               2056 /user/alice\n"+
		"           0            1                  5 f.txt\n")
	expectEq(t, "count -q", h.ok("count", "-q", "d1"), ""+
		"        none             inf            none             inf            2            1                  3 d1\n")
	var js []map[string]any
	if err := json.Unmarshal([]byte(h.ok("count", "--json", "d1")), &js); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"path": "/user/alice/d1", "directory_count": 2.0, "file_count": 1.0, "length": 3.0,
		"ns_quota": -1.0, "ns_consumed": 3.0, "space_quota": -1.0, "space_consumed": 9.0}
	if len(js) != 1 || !reflect.DeepEqual(js[0], want) {
		t.Errorf("count --json %v, want %v", js, want)
	}
	js = nil
	if err := json.Unmarshal([]byte(h.ok("du", "--json", "-s", "d1")), &js); err != nil {
		t.Fatal(err)
	}
	wantDu := map[string]any{"path": "/user/alice/d1", "length": 3.0, "space_consumed": 9.0}
	if len(js) != 1 || !reflect.DeepEqual(js[0], wantDu) {
		t.Errorf("du --json %v, want %v", js, wantDu)
	}
}

func TestTest(t *testing.T) {
	h := lsFixture(t)
	h.put("/user/alice/empty", "")
	cases := []struct {
		flag, path string
		want       int
	}{
		{"-e", "f.txt", 0}, {"-e", "d1", 0}, {"-e", "nope", 1}, {"-e", "f.txt/x", 1},
		{"-d", "d1", 0}, {"-d", "f.txt", 1}, {"-d", "nope", 1},
		{"-f", "f.txt", 0}, {"-f", "d1", 1},
		{"-s", "f.txt", 0}, {"-s", "empty", 1}, {"-s", "d1", 1},
		{"-z", "empty", 0}, {"-z", "f.txt", 1},
	}
	for _, c := range cases {
		code, out, errs := h.run("test", c.flag, c.path)
		if code != c.want || out != "" || errs != "" {
			t.Errorf("test %s %s: exit %d (want %d), out %q, err %q", c.flag, c.path, code, c.want, out, errs)
		}
	}
	if code, _, _ := h.run("test", "-e", "-d", "f.txt"); code != 2 {
		t.Errorf("two conditions: exit %d, want 2", code)
	}
	if code, _, _ := h.run("test", "f.txt"); code != 2 {
		t.Errorf("no condition: exit %d, want 2", code)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1023: "1023", 1024: "1 K", 1366: "1.3 K",
		128 << 20: "128 M", 1536 << 20: "1.5 G", -2048: "-2 K", 1 << 60: "1 E"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLsSymlinkAndRecursiveErrors(t *testing.T) {
	h := lsFixture(t)
	if err := h.fs.CreateSymlink(context.Background(), h.user, "/user/alice/f.txt", "/user/alice/link", false); err != nil {
		t.Fatal(err)
	}
	h.setTimes("/user/alice/link", fakeTime)
	out := h.ok("ls", "link")
	if !strings.HasPrefix(out, "lrwxrwxrwx   - alice supergroup ") || !strings.HasSuffix(out, " link -> /user/alice/f.txt\n") {
		t.Errorf("ls symlink: %q", out)
	}
	expectEq(t, "stat symlink", h.ok("stat", "%F %n", "link"), "symlink link\n")

	// A directory that cannot be listed is reported; the walk goes on.
	h.mkdirs("/user/alice/z/closed/inner")
	h.put("/user/alice/z/open", "o")
	h.setTimes("/user/alice/z/closed", fakeTime)
	h.setTimes("/user/alice/z/open", fakeTime)
	h.ok("chmod", "000", "z/closed")
	code, out, errs := h.run("ls", "-R", "z")
	if code != 1 || !strings.HasPrefix(errs, "nimbus fs: ls /user/alice/z/closed: permission denied") ||
		strings.Count(errs, "\n") != 1 {
		t.Errorf("ls -R over a closed directory: exit %d %q", code, errs)
	}
	expectEq(t, "ls -R", out, ""+
		"d---------   - alice supergroup          0 2026-11-23 01:02 z/closed\n"+
		"-rw-r--r--   3 alice supergroup          1 2026-11-23 01:02 z/open\n")
}

// FuzzFormatStat: no format panics, and text without '%' is copied as is.
func FuzzFormatStat(f *testing.F) {
	for _, s := range []string{"%y", "%n %b %o %r %u %g %y %Y %F %a %A %x %X", "%", "%%", "a%qb%", "plain"} {
		f.Add(s)
	}
	st := &meta.FileStatus{Path: "/a/b", Type: meta.TypeFile, Perm: 0o1644, Owner: "o", Group: "g",
		Length: 7, Replication: 3, BlockSize: 1 << 20, Mtime: fakeTime, Atime: fakeTime}
	f.Fuzz(func(t *testing.T, format string) {
		got := formatStat(format, st)
		if !strings.Contains(format, "%") && got != format {
			t.Fatalf("%q became %q", format, got)
		}
	})
}

// pagedFS serves a synthetic directory /big of n files through List's
// pages and records how much output had been written when each page was
// asked for.
type pagedFS struct {
	remoteFS
	n       int
	out     *bytes.Buffer
	written []int // len(out) at each List of /big
}

func (p *pagedFS) List(ctx context.Context, u meta.User, dir, after string, limit int) (*meta.Listing, error) {
	if dir != "/user/alice/big" {
		return p.remoteFS.List(ctx, u, dir, after, limit)
	}
	p.written = append(p.written, p.out.Len())
	start := 0
	if after != "" {
		fmt.Sscanf(after, "e%07d", &start)
		start++
	}
	l := &meta.Listing{}
	for i := start; i < p.n && len(l.Entries) < limit; i++ {
		l.Entries = append(l.Entries, meta.FileStatus{Path: fmt.Sprintf("/user/alice/big/e%07d", i), FileID: uint64(100 + i),
			Type: meta.TypeFile, Perm: 0o644, Owner: "alice", Group: "g", Length: int64(i), Replication: 3, BlockSize: 128 << 20})
	}
	l.Remaining = int64(p.n - start - len(l.Entries))
	return l, nil
}

// TestLsJSONStreams: ls --json writes each page's entries before it asks
// for the next page (the output starts before the listing ends, and memory
// holds one page, not the directory), and the streamed bytes are those of
// the buffered encoder for the same entries.
func TestLsJSONStreams(t *testing.T) {
	h := newHarness(t)
	h.mkdirs("/user/alice/big")
	var out, errb bytes.Buffer
	const n = 3*listPage + 7
	fs := &pagedFS{remoteFS: streamFS{FileSystem: h.fs, client: "test"}, n: n, out: &out}
	sh := newShell(fs, h.user, strings.NewReader(""), &out, &errb)
	sh.json = true
	_, inv, _ := parseFSArgs([]string{"--json", "ls", "big"}, &errb)
	if code := sh.run(context.Background(), inv); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if len(fs.written) != 4 {
		t.Fatalf("%d pages asked for, want 4", len(fs.written))
	}
	for i := 1; i < len(fs.written); i++ {
		if fs.written[i] <= fs.written[i-1] {
			t.Errorf("page %d was asked for before the previous page was written: output %v", i, fs.written)
		}
	}
	var all []jsonStatus
	for p := 0; p < 4; p++ {
		l, _ := fs.List(context.Background(), h.user, "/user/alice/big", map[bool]string{true: "", false: fmt.Sprintf("e%07d", p*listPage-1)}[p == 0], listPage)
		for i := range l.Entries {
			all = append(all, toJSONStatus(&l.Entries[i]))
		}
	}
	var buffered bytes.Buffer
	sh2 := newShell(fs, h.user, nil, &buffered, &errb)
	sh2.writeJSON(all)
	if len(all) != n || out.String() != buffered.String() {
		t.Errorf("streamed output (%d bytes) differs from the buffered encoding of %d entries (%d bytes)", out.Len(), len(all), buffered.Len())
	}
}
