package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/benchtest"
	"github.com/nimbus-fs/nimbus/meta/metatest"
)

func TestParseClients(t *testing.T) {
	got, err := parseClients("1, 4,16")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 16 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "4,", "x", "-1", "1,,2"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSplitTarget(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "embedded ",
		"nimbus://127.0.0.1:1":  "nimbus 127.0.0.1:1",
		"webhdfs://h:9871":      "webhdfs h:9871",
		"webhdfs://h:9871/":     "webhdfs h:9871",
		"http://h:1":            "error",
		"nimbus://":             "error",
		"webhdfs://h:1/webhdfs": "error",
		"127.0.0.1:9870":        "error",
	} {
		s, h, err := splitTarget(in)
		got := s + " " + h
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("splitTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

func runBench(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cmdBench(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"fly"},
		{"micro", "--op", "fly", "--target", "nimbus://h:1"},
		{"micro", "--clients", "0", "--target", "nimbus://h:1"},
		{"micro", "--op", "stat", "--hot-dir", "--target", "nimbus://h:1"},
		{"micro", "--nosuchflag"},
		{"prepare", "--files", "0"},
		{"prepare", "--root", "relative"},
		{"bigdir", "--entries", "-1"},
		{"echo", "--clients", "a"},
		{"echo", "extra-arg"},
		{"plot"},
		{"spotify", "--mix", "no-such-mix", "--target", "nimbus://h:1"},
		{"spotify", "--duration", "1500ms", "--target", "nimbus://h:1"},
		{"spotify", "--base-rate", "0", "--target", "nimbus://h:1"},
		{"spotify", "--workers", "0", "--target", "nimbus://h:1"},
	} {
		if code, _, stderr := runBench(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
	if code, _, _ := runBench("micro", "-h"); code != 0 {
		t.Errorf("-h exits %d", code)
	}
	if code, _, _ := runBench("micro", "--target", "ftp://h:1"); code != 1 {
		t.Errorf("bad target scheme exits %d, want 1", code)
	}
}

// The whole command, against a fake WebHDFS server: prepare, micro with a
// sweep, echo, bigdir, then plot the JSON files.
func TestBenchCommandsOverFakeWebHDFS(t *testing.T) {
	srv := httptest.NewServer(benchtest.NewFakeNameNode(metatest.NewMemFS()))
	defer srv.Close()
	target := "webhdfs://" + strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	js := func(n string) string { return filepath.Join(dir, n+".json") }

	code, out, stderr := runBench("prepare", "--target", target, "--files", "300", "--clients", "4", "--json", js("prepare"))
	if code != 0 || !strings.Contains(out, "300 files") {
		t.Fatalf("prepare: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runBench("micro", "--target", target, "--op", "stat", "--clients", "1,2", "--ops-per-client", "30", "--json", js("micro"))
	if code != 0 {
		t.Fatalf("micro: exit %d\n%s\n%s", code, out, stderr)
	}
	doc, err := bench.ReadDocumentFile(js("micro"))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 4 || doc.Results[3].Op != "stat" || doc.Results[3].Clients != 2 || doc.Results[3].Ops != 60 ||
		doc.Results[3].EchoFraction <= 0 || doc.Results[3].System != "webhdfs" || doc.Results[3].Target != target {
		t.Fatalf("micro results: %+v", doc.Results)
	}
	if !strings.Contains(out, "stat") || !strings.Contains(out, "ops/s") {
		t.Fatalf("no table on stdout:\n%s", out)
	}
	code, _, stderr = runBench("echo", "--target", target, "--clients", "2", "--ops-per-client", "10", "--label", "fake", "--json", js("echo"))
	if doc, err := bench.ReadDocumentFile(js("echo")); code != 0 || err != nil || doc.Results[0].System != "fake" {
		t.Fatalf("echo: exit %d %v %s", code, err, stderr)
	}
	code, out, stderr = runBench("bigdir", "--target", target, "--entries", "25", "--clients", "3", "--json", js("bigdir"))
	if code != 0 || !strings.Contains(out, "25 entries") {
		t.Fatalf("bigdir: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runBench("plot", js("micro"), js("echo"), js("bigdir"), "--out", filepath.Join(dir, "png"))
	if code != 0 {
		t.Fatalf("plot: exit %d %s", code, stderr)
	}
	for _, f := range []string{"throughput-stat.png", "latency-cdf-stat.png", "throughput-echo.png"} {
		if _, err := os.Stat(filepath.Join(dir, "png", f)); err != nil {
			t.Errorf("plot did not write %s (stdout %s)", f, out)
		}
	}
}

// The spotify workload against a fresh embedded Nimbus: an open-loop run of
// the paper's mix, written as JSON with its schedule and per-operation
// figures.
func TestBenchSpotifyEmbedded(t *testing.T) {
	js := filepath.Join(t.TempDir(), "spotify.json")
	code, out, stderr := runBench("spotify", "--duration", "2s", "--interval", "1s", "--base-rate", "150",
		"--files", "300", "--workers", "8", "--profile", "hopsfs-cache", "--json", js)
	if code != 0 || !strings.Contains(out, "offered") {
		t.Fatalf("spotify: exit %d\n%s\n%s", code, out, stderr)
	}
	doc, err := bench.ReadDocumentFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 1 {
		t.Fatalf("%d results", len(doc.Results))
	}
	r := doc.Results[0]
	sp := r.Spotify
	if r.Workload != "spotify" || r.Op != "paper" || sp == nil || sp.Offered < 300 || sp.Issued+sp.Unissued != sp.Offered ||
		r.Errors != 0 || r.Ops != sp.Issued || r.PerOp["read"].Ops == 0 || len(sp.Seconds) != 2 || sp.Shares["read"] != 0.6922 {
		t.Fatalf("spotify result: %+v\nschedule %+v", r, sp)
	}
	if r.Profile != "hopsfs-cache" || strings.Join(r.ServerFlags, " ") != "--cache-bytes 268435456" {
		t.Fatalf("profile %q, server flags %q", r.Profile, r.ServerFlags)
	}
	// A platform's profile has no embedded target: it says how to start one.
	if code, _, stderr := runBench("spotify", "--duration", "1s", "--interval", "1s", "--profile", "lambda"); code == 0 || !strings.Contains(stderr, "--platform local") || !strings.Contains(stderr, "--target nimbus://") {
		t.Fatalf("--profile lambda: exit %d, %s", code, stderr)
	}
	// The embedded server meters itself: the run's cost and its
	// performance per dollar.
	c := sp.Cost
	if c == nil || c.InstancesMax != 1 || c.Invocations < r.Ops || c.ActiveS <= 0 || c.ServerlessUSD <= 0 ||
		c.ServerfulUSD <= 0 || c.PerfPerDollar <= 0 || c.PerfPerDollar != float64(r.Ops)/c.ServerlessUSD {
		t.Fatalf("spotify cost: %+v", c)
	}
}
