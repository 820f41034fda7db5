package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/server"
)

// TestInstanceArgs: the platform's, serve's own and the per-instance flags
// are dropped with their values, in every spelling; the rest stay, repeated
// flags repeated.
func TestInstanceArgs(t *testing.T) {
	cfg := server.DefaultConfig()
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	addServerFlags(fl, &cfg)
	fl.Bool("daemon", false, "")
	fl.String("pid-file", "", "")
	addPlatformFlags(fl)
	args := []string{"--platform", "local", "--store", "postgres://u@h/db", "-hosting=process", "--daemon", "--deployments", "2",
		"--tenant-limit", "a=1", "--listen", "127.0.0.1:9", "--cache-bytes=4m", "--tenant-limit=b=2", "--data", "/d",
		"--keep-alive", "2s", "--coherence-disable-invalidation", "--log-level", "debug"}
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	got := instanceArgs(fl, args)
	want := []string{"--store", "postgres://u@h/db", "--tenant-limit", "a=1", "--cache-bytes=4m", "--tenant-limit=b=2",
		"--coherence-disable-invalidation", "--log-level", "debug"}
	if !slices.Equal(got, want) {
		t.Fatalf("instanceArgs:\n got %q\nwant %q", got, want)
	}
}
