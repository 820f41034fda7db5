package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/nimbus-fs/nimbus/bench"
)

// benchSubtree times one subtree operation on a fresh tree.
func benchSubtree(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("subtree", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultSubtreeConfig()
	fs.IntVar(&cfg.Files, "files", cfg.Files, "files in the tree (the Spotify shape of prepare)")
	fs.StringVar(&cfg.Op, "op", cfg.Op, "operation on the tree's root: "+strings.Join(bench.SubtreeOps, ", ")+" (chmod: one operation of the server when the target has it, else a client-side walk, as fs chmod -R)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "parallel writers while building the tree")
	fs.IntVar(&cfg.Background, "background", cfg.Background, "background clients doing stat and create outside the tree (0: none)")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "background measurement before the operation")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", cfg.SampleEvery, "server memory sampling period during the operation")
	metrics := fs.String("metrics", "", "URL to sample server memory from (default: the target's /metrics, or HDFS's /jmx)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg.Root = c.root
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench subtree:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, cfg.Clients+cfg.Background, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench subtree:", err)
		return 1
	}
	defer closeEnv()
	if *metrics != "" {
		env.MetricsURL = *metrics
	}
	r, runErr := bench.Subtree(ctx, env, cfg, progressFor(stderr))
	code := 0
	if r != nil {
		where := ""
		if r.ClientSide {
			where = " (client-side walk)"
		}
		fmt.Fprintf(stdout, "subtree %s%s of %s: %d files, %d inodes in %.3f s; server RSS %.1f MiB before, %.1f MiB max; background %.0f ops/s (p99 %.1f ms) before, %.0f ops/s (p99 %.1f ms) during\n",
			r.Op, where, r.Dir, r.Files, r.Inodes, r.Seconds, r.ServerRSSMBBefore, r.ServerRSSMBMax,
			r.BackgroundOpsSBefore, r.BackgroundP99MsBefore, r.BackgroundOpsSDuring, r.BackgroundP99MsDuring)
		if r.ServerGoHeapMBMax > 0 {
			fmt.Fprintf(stdout, "  server memory in parts, before and highest during: Go heap %.1f, %.1f MiB; Pebble block cache %.1f, %.1f MiB; memtables %.1f, %.1f MiB\n",
				r.ServerGoHeapMBBefore, r.ServerGoHeapMBMax, r.ServerBlockCacheMBBefore, r.ServerBlockCacheMBMax, r.ServerMemtableMBBefore, r.ServerMemtableMBMax)
		}
		if r.MemError != "" {
			fmt.Fprintln(stderr, "memory not sampled:", r.MemError)
		}
		if c.json != "" {
			doc := &bench.SubtreeDocument{Document: bench.NewDocument(append([]string{"subtree"}, args...)), Results: []bench.SubtreeResult{*r}}
			if err := doc.WriteFile(c.json); err != nil {
				fmt.Fprintln(stderr, "nimbus bench:", err)
				code = 1
			}
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "nimbus bench subtree:", runErr)
		return 1
	}
	return code
}
