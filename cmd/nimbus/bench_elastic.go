package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nimbus-fs/nimbus/bench"
)

// benchElastic runs `nimbus bench elastic`: a step of load against a
// platform's gateway, sampling its instances (bench.Elastic).
func benchElastic(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("elastic", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultElasticConfig()
	mix := fs.String("mix", "paper", "operation mix: "+strings.Join(bench.MixNames(), ", ")+", or a FILE of \"OPERATION SHARE\" lines")
	fs.Float64Var(&cfg.BaseRate, "base-rate", cfg.BaseRate, "ops/s offered before and after the burst")
	fs.Float64Var(&cfg.Step, "step", cfg.Step, "the burst's rate in multiples of --base-rate")
	fs.DurationVar(&cfg.Warm, "warm", cfg.Warm, "time at --base-rate before the burst (whole seconds)")
	fs.DurationVar(&cfg.Burst, "burst", cfg.Burst, "length of the burst (whole seconds)")
	fs.DurationVar(&cfg.Idle, "idle", cfg.Idle, "time with nothing offered after the burst, for the keep-alive to reclaim instances (whole seconds)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "most operations in flight (the open loop's clients)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the operations and their paths")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", cfg.SampleEvery, "how often the gateway's /status/cluster is read")
	fs.DurationVar(&cfg.KillEvery, "kill-every", 0, "a fault run: SIGKILL one serving instance every this long, round robin over the deployments, until the burst ends (the gateway must run with --fault-injection); implies --verify")
	fs.DurationVar(&cfg.KillFor, "kill-for", 0, "with --kill-every: stop killing this long after the load begins, so that its end shows the recovery (default: until the burst ends)")
	fs.BoolVar(&cfg.Verify, "verify", false, "after the run, check that every acknowledged create, mkdirs, rename and delete is in the namespace, count errors that betray a double application, and run fsck")
	files := fs.Int("files", 10000, "size of the tree to prepare when the target has none")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	m, err := bench.LookupMix(*mix)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench elastic:", err)
		return 2
	}
	cfg.Mix = m
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench elastic:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, cfg.Workers, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench elastic:", err)
		return 1
	}
	defer closeEnv()
	if base, ok := strings.CutSuffix(env.MetricsURL, "/metrics"); ok {
		cfg.StatusURL = base
	}
	cfg.Transport = env.Transport
	tree, err := ensureTree(ctx, env, c.root, *files, min(cfg.Workers, 64), stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench elastic:", err)
		return 1
	}
	res, err := bench.Elastic(ctx, env, cfg, tree, progressFor(stderr))
	var results []bench.Result
	verdictFailed := false
	if el := res.Elastic; el != nil {
		results = append(results, res)
		fmt.Fprintf(stdout, "step %.0f -> %.0f ops/s: served 90%% of the offered rate %s\n", cfg.BaseRate, cfg.BaseRate*cfg.Step, reachText(el.ReachS))
		names := make([]string, 0, len(el.InstancesMax))
		for n := range el.InstancesMax {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stdout, "deployment %s: at most %d instances, %d at the end\n", n, el.InstancesMax[n], el.InstancesEnd[n])
		}
		timed := []float64{}
		for _, cs := range el.ColdStarts {
			if cs.ColdStartMs > 0 {
				timed = append(timed, cs.ColdStartMs)
			}
		}
		if len(timed) > 0 {
			sort.Float64s(timed)
			fmt.Fprintf(stdout, "cold starts: %d, p50 %.1f ms, max %.1f ms\n", len(timed), timed[len(timed)/2], timed[len(timed)-1])
		}
		if el.TCPRequests+el.HTTPRequests > 0 {
			fmt.Fprintf(stdout, "requests: %d over TCP, %d over HTTP invocations\n", el.TCPRequests, el.HTTPRequests)
		}
		if f := el.Faults; f != nil {
			fmt.Fprintf(stdout, "faults: %d instances killed (%d kills failed) every %v; served/offered while killing: mean %.2f, lowest %.2f, %d s below 90%%, longest dip %d s; 90%% again %.1f s after the last kill (-1: not before the end)\n",
				f.Killed, len(f.Kills)-f.Killed, cfg.KillEvery, f.MeanServedRatio, f.MinServedRatio, f.SecondsBelow90, f.LongestDipS, f.RecoveryS)
		}
		if v := res.Spotify.Verdict; v != nil {
			fmt.Fprintln(stdout, verdictText(v))
			if !v.OK {
				verdictFailed = true
			}
		}
		if el.SampleError != "" {
			fmt.Fprintln(stderr, "nimbus bench elastic: sampling the cluster:", el.SampleError)
		}
	}
	code := finish(stdout, stderr, &c, append([]string{"elastic"}, args...), results, err)
	if verdictFailed {
		fmt.Fprintln(stderr, "nimbus bench elastic: the namespace does not match what the clients were told (verdict in the JSON)")
		code = 1
	}
	return code
}

// verdictText is a Verdict in one line.
func verdictText(v *bench.Verdict) string {
	fsck := "fsck not run"
	switch {
	case v.FsckError != "":
		fsck = "fsck failed: " + v.FsckError
	case v.FsckClean != nil && *v.FsckClean:
		fsck = fmt.Sprintf("fsck clean (%d inodes)", v.FsckInodes)
	case v.FsckClean != nil:
		fsck = fmt.Sprintf("fsck: %d problems, e.g. %v", len(v.FsckProblems), v.FsckProblems[0])
	}
	ok := "OK"
	if !v.OK {
		ok = "FAILED"
	}
	return fmt.Sprintf("verdict %s: %d acknowledged present found, %d acknowledged gone absent, %d missing, %d resurrected, %d wrong type, %d unchecked, %d unknown (failed operations, not checked); %d double applications; %s; errors %v",
		ok, v.Present, v.Absent, v.Missing, v.Resurrected, v.WrongType, v.Unchecked, v.Unknown, v.DoubleApplied, fsck, v.Errors)
}

func reachText(s int) string {
	if s < 0 {
		return "never during the burst"
	}
	return fmt.Sprintf("within %d s of the step", s+1)
}
