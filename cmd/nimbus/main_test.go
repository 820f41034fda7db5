package main

import (
	"bytes"
	"context"
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionString: the -X stamp wins, then the module version and the
// VCS commit the go command records; never "dev".
func TestVersionString(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-25T01:02:03Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		stamp string
		bi    *debug.BuildInfo
		want  string
	}{
		{"v1.2.3", vcs, "v1.2.3"},
		{"", vcs, "commit 0123456789ab+dirty (2026-11-25T01:02:03Z)"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "unknown (built without VCS information; stamp it with -ldflags \"-X main.version=...\")"},
		{"", nil, "unknown"},
	} {
		if got := versionString(c.stamp, c.bi); got != c.want {
			t.Errorf("versionString(%q, ...) = %q, want %q", c.stamp, got, c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "nimbus ") {
		t.Errorf("--version: exit %d %q %q", code, out.String(), errb.String())
	}
}

// TestServeHelp: --help exits 0 and no flag prints two defaults.
func TestServeHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cmdServe(context.Background(), []string{"--help"}, &out, &errb); code != 0 {
		t.Errorf("serve --help: exit %d", code)
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("two defaults: %q", line)
		}
	}
	if !strings.Contains(errb.String(), "--daemon") || !strings.Contains(errb.String(), "(default info)") {
		t.Errorf("serve --help:\n%s", errb.String())
	}
	fl := flag.NewFlagSet("x", flag.ContinueOnError)
	fl.Int("n", 5, "a number")
	fl.Int("m", -1, "a limit (default: computed)")
	var b bytes.Buffer
	printFlags(fl, &b)
	expectEq(t, "printFlags", b.String(), "  --m int\n    \ta limit (default: computed)\n  --n int\n    \ta number (default 5)\n")
}

func TestListenFromAddr(t *testing.T) {
	for in, want := range map[string]string{"http://127.0.0.1:9999": "127.0.0.1:9999", "127.0.0.1:7": "127.0.0.1:7", "http://[::1]:80/": "[::1]:80"} {
		if got, err := listenFromAddr(in); err != nil || got != want {
			t.Errorf("listenFromAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := listenFromAddr("http://host"); err == nil {
		t.Error("an address without a port was accepted")
	}
}

// TestInterruptWriter: after an interrupt, "context canceled" reads
// "interrupted"; before it, lines pass unchanged.
func TestInterruptWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var b bytes.Buffer
	iw := &interruptWriter{ctx: ctx, w: &b}
	iw.Write([]byte("nimbus fs: put /a: context canceled\n")) // not interrupted: someone else's cancel
	cancel()
	iw.Write([]byte("nimbus fs: put /b: context canceled\n"))
	expectEq(t, "stderr", b.String(), "nimbus fs: put /a: context canceled\nnimbus fs: put /b: interrupted\n")
	if !iw.said {
		t.Error("said not set")
	}
}
