package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/nimbus-fs/nimbus/platform"
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

// caps is the platform's default configuration for deps deployments with
// at most perDep instances each and most in all.
func caps(deps, perDep, most int) platform.Config {
	c := platform.DefaultConfig(deps)
	c.MaxPerDeployment, c.MaxInstances = perDep, most
	return c
}

// --instance-procs: the cores shared over the most instances the caps
// allow, at least one each; a value given; -1 for Go's default.
func TestInstanceProcs(t *testing.T) {
	for _, c := range []struct {
		flag, cpus int
		cfg        platform.Config
		want       int
	}{
		{0, 2, caps(2, 1, 2), 1},   // disabled on 2 cores
		{0, 2, caps(2, 4, 8), 1},   // lambda on 2 cores
		{0, 2, caps(1, 1, 16), 2},  // one instance: every core
		{0, 16, caps(2, 2, 16), 4}, // four instances at most on 16 cores
		{0, 8, caps(2, 8, 3), 2},   // the global cap is the lesser
		{3, 2, caps(2, 1, 2), 3},   // as given
		{-1, 2, caps(2, 1, 2), 0},  // Go's default
	} {
		if got := instanceProcs(c.flag, c.cpus, c.cfg); got != c.want {
			t.Errorf("instanceProcs(%d, %d cores, %d deployments, caps %d/%d) = %d, want %d",
				c.flag, c.cpus, c.cfg.Deployments, c.cfg.MaxPerDeployment, c.cfg.MaxInstances, got, c.want)
		}
	}
}

// TestInstancePool: without --pg-pool-size, the instances share one
// server's default connections, at least minInstancePool each.
func TestInstancePool(t *testing.T) {
	for _, c := range []struct {
		total int
		cfg   platform.Config
		want  int
	}{
		{32, caps(2, 1, 2), 16},  // disabled: two instances
		{32, caps(2, 4, 8), 4},   // lambda: eight
		{32, caps(1, 1, 16), 32}, // one instance
		{32, caps(2, 8, 16), 4},  // sixteen: the floor (32/16 = 2)
		{32, caps(1, 8, 3), 10},  // the global cap is the lesser
	} {
		if got := instancePool(c.total, c.cfg); got != c.want {
			t.Errorf("instancePool(%d, %d deployments, caps %d/%d) = %d, want %d",
				c.total, c.cfg.Deployments, c.cfg.MaxPerDeployment, c.cfg.MaxInstances, got, c.want)
		}
	}
}
