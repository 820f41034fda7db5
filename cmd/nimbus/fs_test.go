package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

func TestUsageErrors(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "usage: nimbus fs"},
		{[]string{"frob"}, `nimbus fs: unknown command "frob"`},
		{[]string{"--bogus", "ls"}, `nimbus fs: unknown flag "--bogus"`},
		{[]string{"ls", "-x"}, "nimbus fs: ls: bad usage: unknown flag \"-x\"\nusage: nimbus fs ls [-R] [-d] [-h] [PATH...]"},
		{[]string{"mkdir"}, "usage: nimbus fs mkdir [-p] PATH..."},
		{[]string{"put", "a"}, "usage: nimbus fs put [-f] [-v] [--block-size SIZE] [--replication N] LOCAL... DST"},
		{[]string{"test", "-e", "a", "b"}, "usage: nimbus fs test"},
		{[]string{"rm", "-q", "a"}, `unknown flag "-q"`},
		{[]string{"chown", "a:b:c", "x"}, "usage: nimbus fs chown"},
	}
	for _, c := range cases {
		code, out, errs := h.run(c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, out %q, err %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	if code, _, errs := h.run("--help"); code != 0 || !strings.Contains(errs, "chmod") {
		t.Errorf("--help: exit %d %q", code, errs)
	}
	// hdfs dfs spelling works too.
	h.ok("-mkdir", "-p", "x")
	// "--" ends the flags.
	h.put("/user/alice/-f", "dash")
	expectEq(t, "cat -- -f", h.ok("cat", "--", "-f"), "dash")
}

func TestCmdFSUsageNeedsNoServer(t *testing.T) {
	var out, errs bytes.Buffer
	if code := cmdFS(context.Background(), []string{"nope"}, &out, &errs); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
}

func TestResolve(t *testing.T) {
	sh := &shell{home: "/user/alice"}
	cases := map[string]target{
		"a":          {"/user/alice/a", "a"},
		"a/b/":       {"/user/alice/a/b", "a/b/"},
		".":          {"/user/alice", "."},
		"..":         {"/user", ".."},
		"../bob/x":   {"/user/bob/x", "../bob/x"},
		"/x//y/./z":  {"/x/y/z", "/x//y/./z"},
		"/a/../../b": {"/b", "/a/../../b"},
		"/":          {"/", "/"},
	}
	for in, want := range cases {
		if got := sh.resolve(in); got != want {
			t.Errorf("resolve(%q) = %+v, want %+v", in, got, want)
		}
	}
	c := target{abs: "/user/alice", disp: ""}.child("x")
	if c != (target{"/user/alice/x", "x"}) {
		t.Errorf("child of home: %+v", c)
	}
	c = target{abs: "/", disp: "/"}.child("x")
	if c != (target{"/x", "/x"}) {
		t.Errorf("child of root: %+v", c)
	}
	if homeDir(meta.User{Name: "bob"}) != "/user/bob" {
		t.Error("homeDir")
	}
}

func TestRelativePathsUseHome(t *testing.T) {
	h := newHarness(t)
	h.ok("mkdir", "rel")
	if _, err := h.stat("/user/alice/rel"); err != nil {
		t.Fatalf("relative mkdir: %v", err)
	}
	h.ok("touch", "rel/f")
	h.ok("mv", "rel/f", "../alice/g")
	if _, err := h.stat("/user/alice/g"); err != nil {
		t.Errorf("mv with ..: %v", err)
	}
	code, _, errs := h.run("ls", "")
	if code != 1 || !strings.Contains(errs, "invalid path") {
		t.Errorf("ls \"\": exit %d %q", code, errs)
	}
}

func TestErrorRendering(t *testing.T) {
	cases := []struct {
		op, path string
		err      error
		want     string
	}{
		{"mkdir", "/a/b", meta.Errorf("mkdirs", "/a", meta.ErrNotDir, ""), "mkdir /a/b: not a directory (at /a)"},
		{"mkdir", "/a/b", meta.Errorf("mkdirs", "/a/b", meta.ErrExists, ""), "mkdir /a/b: already exists"},
		{"put", "/x", meta.Errorf("write", "/x"+copyingSuffix, meta.ErrTooLarge, "limit is 10 bytes"), "put /x: file too large (limit is 10 bytes)"},
		{"ls", "/x", context.DeadlineExceeded, "ls /x: context deadline exceeded"},
		{"ls", "/x", meta.ErrPermission, "ls /x: permission denied"},
	}
	for _, c := range cases {
		ce := cliError(c.op, c.path, c.err)
		if ce.Error() != c.want {
			t.Errorf("got %q, want %q", ce.Error(), c.want)
		}
	}
	if kindJSONName(meta.KindOf(cliError("ls", "/", meta.ErrQuota).Err)) != "quota_exceeded" {
		t.Error("kind name")
	}
}

// FuzzParseInvocation: no command line panics the parser; what it accepts
// has only the command's flags and an argument count in range.
func FuzzParseInvocation(f *testing.F) {
	for _, s := range []string{"ls -R -d /a", "rm -rf a b", "chmod -w x", "chmod -R u+x,go-w a", "put - /x",
		"test -e a", "mkdir -- -p", "ls --json -h", "stat %n a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return
		}
		var errs bytes.Buffer
		_, inv, code := parseFSArgs(fields, &errs)
		if inv == nil {
			if code != 0 && code != 2 {
				t.Fatalf("%q: code %d", line, code)
			}
			return
		}
		for fl := range inv.flags {
			if !strings.ContainsRune(inv.cmd.flags, rune(fl)) {
				t.Fatalf("%q: flag %q not accepted by %s", line, fl, inv.cmd.name)
			}
		}
		if n := len(inv.args); n < inv.cmd.minArgs || (inv.cmd.maxArgs >= 0 && n > inv.cmd.maxArgs) {
			t.Fatalf("%q: %d arguments for %s", line, n, inv.cmd.name)
		}
	})
}

// TestServeRejectsBadStoreSizes: a store size flag out of range is a usage
// error naming the flag, before anything is opened.
func TestServeRejectsBadStoreSizes(t *testing.T) {
	for _, args := range [][]string{
		{"--memtable-mb", "0"},
		{"--memtable-mb", "4096"},
		{"--cache-mb", "-1"},
	} {
		var stdout, stderr bytes.Buffer
		dir := t.TempDir()
		code := cmdServe(context.Background(), append([]string{"--data", dir}, args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 and a message naming %s", args, code, stderr.String(), args[0])
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("serve %v created %d entries in its data directory", args, len(entries))
		}
	}
}
