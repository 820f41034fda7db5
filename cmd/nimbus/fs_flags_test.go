package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// TestParseTransferFlags covers put's --block-size, --replication and -D and
// the -v of put, get and cat: accepted spellings, the values that reach
// meta.CreateOptions, and usage errors for bad values.
func TestParseTransferFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    meta.CreateOptions
		verbose bool
		err     string // substring of the usage error; "" = accepted
	}{
		{args: []string{"put", "a", "b"}},
		{args: []string{"put", "--block-size", "1048576", "a", "b"}, want: meta.CreateOptions{BlockSize: 1 << 20}},
		{args: []string{"put", "--block-size=512", "a", "b"}, want: meta.CreateOptions{BlockSize: 512}},
		{args: []string{"put", "--block-size", "64k", "a", "b"}, want: meta.CreateOptions{BlockSize: 64 << 10}},
		{args: []string{"put", "--block-size", "128m", "a", "b"}, want: meta.CreateOptions{BlockSize: 128 << 20}},
		{args: []string{"put", "--block-size", "128M", "a", "b"}, want: meta.CreateOptions{BlockSize: 128 << 20}},
		{args: []string{"put", "--block-size", "2g", "a", "b"}, want: meta.CreateOptions{BlockSize: 2 << 30}},
		{args: []string{"put", "--block-size", "1t", "a", "b"}, want: meta.CreateOptions{BlockSize: 1 << 40}},
		{args: []string{"put", "--replication", "2", "a", "b"}, want: meta.CreateOptions{Replication: 2}},
		{args: []string{"put", "--replication=65535", "a", "b"}, want: meta.CreateOptions{Replication: 65535}},
		{args: []string{"put", "-D", "dfs.blocksize=1m", "-D", "dfs.replication=5", "a", "b"},
			want: meta.CreateOptions{BlockSize: 1 << 20, Replication: 5}},
		{args: []string{"put", "-Ddfs.blocksize=4k", "-Ddfs.replication=1", "a", "b"},
			want: meta.CreateOptions{BlockSize: 4 << 10, Replication: 1}},
		{args: []string{"put", "-D", "dfs.block.size=8k", "a", "b"}, want: meta.CreateOptions{BlockSize: 8 << 10}},
		{args: []string{"put", "--block-size", "1m", "--block-size", "2m", "a", "b"}, want: meta.CreateOptions{BlockSize: 2 << 20}},
		{args: []string{"put", "-fv", "--replication", "3", "--json", "a", "b"}, want: meta.CreateOptions{Replication: 3}, verbose: true},
		{args: []string{"-put", "-v", "-", "b"}, verbose: true},
		{args: []string{"get", "-v", "a", "b"}, verbose: true},
		{args: []string{"cat", "-v", "a"}, verbose: true},

		{args: []string{"put", "--block-size"}, err: `--block-size needs a value`},
		{args: []string{"put", "--block-size", "a", "b"}, err: `--block-size "a": not a size`},
		{args: []string{"put", "--replication", "2", "b"}, err: `wrong number of arguments (1)`},
		{args: []string{"put", "--block-size", "12x", "a", "b"}, err: `--block-size "12x": not a size`},
		{args: []string{"put", "--block-size", "", "a", "b"}, err: `--block-size "": not a size`},
		{args: []string{"put", "--block-size=", "a", "b"}, err: `--block-size "": not a size`},
		{args: []string{"put", "--block-size", "k", "a", "b"}, err: `not a size`},
		{args: []string{"put", "--block-size", "-1", "a", "b"}, err: `not a size`},
		{args: []string{"put", "--block-size", "1.5m", "a", "b"}, err: `not a size`},
		{args: []string{"put", "--block-size", "128mb", "a", "b"}, err: `not a size`},
		{args: []string{"put", "--block-size", "0", "a", "b"}, err: `block size must be positive`},
		{args: []string{"put", "--block-size", "1000", "a", "b"}, err: `must be a multiple of 512 bytes`},
		{args: []string{"put", "--block-size", "99999999999999999999", "a", "b"}, err: `size too large`},
		{args: []string{"put", "--block-size", "9000000000000t", "a", "b"}, err: `size too large`},
		{args: []string{"put", "--replication", "0", "a", "b"}, err: `--replication "0": not a replication factor (1 to 65535)`},
		{args: []string{"put", "--replication", "65536", "a", "b"}, err: `not a replication factor`},
		{args: []string{"put", "--replication", "-3", "a", "b"}, err: `not a replication factor`},
		{args: []string{"put", "--replication", "two", "a", "b"}, err: `not a replication factor`},
		{args: []string{"put", "-D"}, err: `-D needs property=value`},
		{args: []string{"put", "-D", "dfs.blocksize", "a", "b"}, err: `-D dfs.blocksize: want property=value`},
		{args: []string{"put", "-D", "dfs.blocksize=1q", "a", "b"}, err: `--block-size "1q": not a size`},
		{args: []string{"put", "-D", "fs.trash.interval=1", "a", "b"}, err: `unknown property`},
		{args: []string{"get", "--block-size", "1m", "a", "b"}, err: `unknown flag "--block-size"`},
		{args: []string{"ls", "-v"}, err: `unknown flag "-v"`},
	} {
		var stderr strings.Builder
		_, inv, code := parseFSArgs(tc.args, &stderr)
		if tc.err != "" {
			if inv != nil || code != 2 || !strings.Contains(stderr.String(), tc.err) ||
				!strings.Contains(stderr.String(), "\nusage: nimbus fs ") {
				t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.err)
			}
			continue
		}
		if inv == nil {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, stderr.String())
			continue
		}
		if inv.has('v') != tc.verbose {
			t.Errorf("%q: -v = %v", tc.args, inv.has('v'))
		}
		if got := capturedCreate(t, inv); got != tc.want {
			t.Errorf("%q: create options %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

// capturedCreate runs a parsed put against a file system that records the
// options of CreateWriter and fails it, and returns them; other commands
// give the zero value.
func capturedCreate(t *testing.T, inv *invocation) meta.CreateOptions {
	t.Helper()
	if inv.cmd.name != "put" {
		return meta.CreateOptions{}
	}
	rec := &recordingFS{}
	var out, errb strings.Builder
	sh := newShell(rec, meta.User{Name: "alice"}, strings.NewReader("x"), &out, &errb)
	inv.args = []string{"-", "/dst"}
	inv.cmd.run(sh, t.Context(), inv)
	if !rec.called {
		t.Fatalf("CreateWriter not called; stderr %q", errb.String())
	}
	rec.opts.Overwrite = false // put's own choice, not a flag
	return rec.opts
}

var errRecorded = errors.New("recorded")

// recordingFS answers Stat with not found and records CreateWriter's options.
type recordingFS struct {
	remoteFS // nil: any other call panics
	called   bool
	opts     meta.CreateOptions
}

func (r *recordingFS) Stat(_ context.Context, _ meta.User, p string) (*meta.FileStatus, error) {
	return nil, meta.Errorf("stat", p, meta.ErrNotFound, "")
}

func (r *recordingFS) CreateWriter(_ context.Context, _ meta.User, _ string, opts meta.CreateOptions) (io.WriteCloser, error) {
	r.called, r.opts = true, opts
	return nil, errRecorded
}

func (r *recordingFS) Delete(context.Context, meta.User, string, bool) error { return nil }

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "1": 1, "512": 512, "1k": 1 << 10, "1K": 1 << 10, "3m": 3 << 20,
		"128m": 128 << 20, "1g": 1 << 30, "2T": 2 << 40, "007": 7,
		"9223372036854775807": 1<<63 - 1, "8388607t": 8388607 << 40,
	} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "m", "-1", "+1", "1.0", "1 m", " 1", "1e6", "1p", "0x10", "9223372036854775808", "8388608t"} {
		if got, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", s, got)
		}
	}
}
