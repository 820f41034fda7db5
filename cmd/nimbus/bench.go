package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/nimbus-fs/nimbus/client"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/nimbus-fs/nimbus/bench"
	"github.com/nimbus-fs/nimbus/bench/plot"
	"github.com/nimbus-fs/nimbus/meta"
)

const benchUsage = `usage: nimbus bench <workload> [flags]

workloads:
  prepare  build the Spotify-statistics namespace tree (--files N)
  micro    one operation on the prepared tree, closed-loop clients (--op OP)
  spotify  the λFS evaluation's mixed, bursty workload, open loop (--mix, --base-rate)
  echo     the transport ceiling: no-op over the RPC and over HTTP
  floor    the floor under echo: a bare TCP round trip to another process
  bigdir   list a directory of --entries N page by page
  subtree  delete, mv or chmod -R a fresh tree of --files N, under a background load
  elastic  a step of load (--step× for --burst), then idle, against a platform's gateway:
           instances over time, cold starts, TCP and HTTP requests
  plot     draw PNG charts from result files (plot FILE... --out DIR)

Without --target a fresh embedded Nimbus is started in a temporary directory
and removed afterwards. Targets: nimbus://HOST:PORT, webhdfs://HOST:PORT.
Run 'nimbus bench <workload> -h' for the flags of one workload.
`

// cmdBench dispatches `nimbus bench WORKLOAD`.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, benchUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	run := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
		"prepare": benchPrepare,
		"micro":   benchMicro,
		"spotify": benchSpotify,
		"elastic": benchElastic,
		"echo":    benchEcho,
		"floor":   benchFloor,
		// started by floor, not listed in the usage
		"floor-serve": benchFloorServe,
		"bigdir":      benchBigdir,
		"subtree":     benchSubtree,
		"plot":        benchPlot,
	}[args[0]]
	if run == nil {
		fmt.Fprintf(stderr, "nimbus bench: unknown workload %q\n\n%s", args[0], benchUsage)
		return 2
	}
	return run(ctx, args[1:], stdout, stderr)
}

// benchCommon are the flags every workload that talks to a target shares.
type benchCommon struct {
	target string
	json   string
	label  string
	user   string
	conns  int
	// straggler is the client's Options.StragglerFactor (0: its default).
	straggler float64
	root      string
	job       string
	profile   string
	hybrid    bool
}

func (c *benchCommon) register(fs *flag.FlagSet) {
	fs.StringVar(&c.target, "target", "", "nimbus://HOST:PORT or webhdfs://HOST:PORT (default: a fresh embedded Nimbus)")
	fs.StringVar(&c.json, "json", "", "write the results as JSON to `FILE`")
	fs.StringVar(&c.label, "label", "", "system name in tables and charts (default: nimbus-rpc, nimbus-webhdfs or hdfs-webhdfs)")
	fs.StringVar(&c.user, "user", "", "user the operations run as (default: NIMBUS_USER, else the OS user)")
	fs.IntVar(&c.conns, "conns", 0, "TCP connections of the Nimbus client (default: the client's own default)")
	fs.Float64Var(&c.straggler, "straggler-factor", 0, "the Nimbus client's straggler mitigation: a stat or read waiting this many times its operation's moving average is sent again (default: the client's, 10; negative: never)")
	fs.StringVar(&c.root, "root", "/bench", "directory the tree lives under")
	fs.StringVar(&c.profile, "profile", "", "the server configuration measured, a baseline of the λFS evaluation ("+profileNames()+"): the embedded server is started with its flags; with --target it labels the results, and the server must run with them")
	fs.BoolVar(&c.hybrid, "hybrid", false, "with --target nimbus://: the target is a platform's gateway (nimbus serve --platform local), reached over hybrid HTTP/TCP RPC: HTTP invocations first, then the connections instances open back")
	fs.StringVar(&c.job, "job", client.JobFromEnv(), "job id the Nimbus RPC requests carry, for the server's per-tenant accounting (default: NIMBUS_JOB)")
}

// newFlagSet returns a flag set that reports to stderr and does not exit.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("nimbus bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args; ok false means return code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// parseClients reads "1,4,16" into client counts.
func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("bad client count %q in --clients (want a positive integer list like 1,4,16)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// sweepFlags are the flags of a workload that sweeps client counts with
// closed-loop runs, each bounded by time or by operations per client.
type sweepFlags struct {
	clients string
	run     bench.RunConfig
}

// register adds --clients, --duration and --ops-per-client; what names the
// operations in the help ("echoes", "round trips").
func (f *sweepFlags) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&f.clients, "clients", "1", "client counts, comma-separated: one run each (e.g. 1,4,16,64,256)")
	fs.DurationVar(&f.run.Duration, "duration", 0, "length of each run (default 5s unless --ops-per-client is set)")
	fs.Int64Var(&f.run.OpsPerClient, "ops-per-client", 0, what+" per client in each run (instead of --duration)")
}

// parse returns the client counts and sets the default duration; bad flags
// are reported to stderr, naming the workload.
func (f *sweepFlags) parse(workload string, stderr io.Writer) ([]int, bool) {
	counts, err := parseClients(f.clients)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus bench %s: %v\n", workload, err)
		return nil, false
	}
	if f.run.Duration < 0 || f.run.OpsPerClient < 0 {
		fmt.Fprintf(stderr, "nimbus bench %s: negative duration or operation count\n", workload)
		return nil, false
	}
	if f.run.Duration == 0 && f.run.OpsPerClient == 0 {
		f.run.Duration = 5 * time.Second
	}
	return counts, true
}

func maxInt(xs []int) int {
	m := 1
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func progressFor(w io.Writer) *bench.Progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &bench.Progress{W: w, TTY: tty}
}

// finish prints the table, writes the JSON document and picks the exit code:
// 1 when the workload failed or any operation failed.
func finish(stdout, stderr io.Writer, c *benchCommon, args []string, results []bench.Result, runErr error) int {
	if len(results) > 0 {
		bench.WriteTable(stdout, results)
	}
	code := 0
	if c.json != "" {
		doc := bench.NewDocument(args)
		doc.Results = append(doc.Results, results...)
		if err := doc.WriteFile(c.json); err != nil {
			fmt.Fprintln(stderr, "nimbus bench:", err)
			code = 1
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "nimbus bench:", runErr)
		return 1
	}
	for _, r := range results {
		if r.Errors > 0 {
			fmt.Fprintf(stderr, "nimbus bench: %s %s at %d clients: %d operations failed, e.g. %v\n", r.Workload, r.Op, r.Clients, r.Errors, r.ErrorSamples)
			code = 1
		}
	}
	return code
}

func benchPrepare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("prepare", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultPrepareConfig()
	fs.IntVar(&cfg.Tree.Files, "files", cfg.Tree.Files, "number of files in the tree")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "parallel writers")
	fs.Int64Var(&cfg.Tree.Seed, "seed", cfg.Tree.Seed, "generator seed: the same seed and --files give the same tree")
	fs.IntVar(&cfg.FileSize, "file-size", cfg.FileSize, "bytes written in every file")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg.Tree.Root = c.root
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench prepare:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, cfg.Clients, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench prepare:", err)
		return 1
	}
	defer closeEnv()
	res, err := bench.Prepare(ctx, env, cfg, progressFor(stderr))
	var results []bench.Result
	if res != nil {
		results = append(results, res.Result)
		fmt.Fprintf(stdout, "prepared %s on %s: %d directories, %d files (%d already there) in %.1f s: %.0f inodes/s\n",
			res.Tree.Root(), env.System, res.Dirs, res.Files, res.Existing, res.Duration.Seconds(), res.Rate())
	}
	return finish(stdout, stderr, &c, append([]string{"prepare"}, args...), results, err)
}

func benchMicro(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("micro", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultMicroConfig()
	var sw sweepFlags
	sw.register(fs, "operations")
	fs.StringVar(&cfg.Op, "op", cfg.Op, "operation: "+strings.Join(bench.MicroOps, ", "))
	fs.BoolVar(&cfg.HotDir, "hot-dir", false, "create/mkdir: every client in one shared directory (default: one per client)")
	noEcho := fs.Bool("no-echo", false, "do not measure echo first (no echo_fraction)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the clients' random choices")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep what create and mkdir made")
	files := fs.Int("files", 10000, "size of the tree to prepare when the target has none")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "untimed echoes from the largest client count before the first run")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	counts, ok := sw.parse("micro", stderr)
	if !ok {
		return 2
	}
	cfg.Clients, cfg.Duration, cfg.OpsPerClient = counts, sw.run.Duration, sw.run.OpsPerClient
	cfg.Echo = !*noEcho
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench micro:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, maxInt(cfg.Clients), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench micro:", err)
		return 1
	}
	defer closeEnv()
	tree, err := ensureTree(ctx, env, c.root, *files, maxInt(cfg.Clients), stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench micro:", err)
		return 1
	}
	results, err := bench.Micro(ctx, env, cfg, tree, progressFor(stderr))
	return finish(stdout, stderr, &c, append([]string{"micro"}, args...), results, err)
}

func benchSpotify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("spotify", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultSpotifyConfig()
	mix := fs.String("mix", "paper", "operation mix: "+strings.Join(bench.MixNames(), ", ")+", or a FILE of \"OPERATION SHARE\" lines (operations: "+strings.Join(bench.MixOps, ", ")+")")
	fs.Float64Var(&cfg.BaseRate, "base-rate", cfg.BaseRate, "ops/s: the scale of the Pareto-distributed target rate")
	fs.Float64Var(&cfg.Shape, "shape", cfg.Shape, "shape of the Pareto distribution of the target rate")
	fs.Float64Var(&cfg.MaxBurst, "max-burst", cfg.MaxBurst, "cap of the target rate, in multiples of --base-rate")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "how long one target rate lasts (whole seconds)")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the run (whole seconds)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the rates, the operations and their paths")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "most operations in flight (the open loop's clients)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the files and directories the run made")
	fs.Float64Var(&cfg.HotWriters, "hot-writers", 0, "add this fraction of --workers as clients creating files in one directory throughout (reported as create-hot)")
	files := fs.Int("files", 10000, "size of the tree to prepare when the target has none")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	m, err := bench.LookupMix(*mix)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench spotify:", err)
		return 2
	}
	cfg.Mix = m
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench spotify:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, cfg.Workers, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench spotify:", err)
		return 1
	}
	defer closeEnv()
	tree, err := ensureTree(ctx, env, c.root, *files, min(cfg.Workers, 64), stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench spotify:", err)
		return 1
	}
	res, err := bench.Spotify(ctx, env, cfg, tree, progressFor(stderr))
	var results []bench.Result
	if res.Spotify != nil {
		results = append(results, res)
		sp := res.Spotify
		fmt.Fprintf(stdout, "offered %.0f ops/s on average (%d ops), issued %d, served %.0f ops/s; behind: server %d s, driver %d s; response p50 %.3f ms p99 %.3f ms\n",
			sp.OfferedOpS, sp.Offered, sp.Issued, res.ThroughputOpsS, sp.ServerBehindS, sp.DriverBehindS, sp.Response.P50, sp.Response.P99)
		if c := sp.Cost; c != nil {
			fmt.Fprintf(stdout, "cost: serverless $%.6f (%.3f s active, %d invocations), serverful $%.6f; %.3g ops per serverless dollar, %.3g per serverful dollar\n",
				c.ServerlessUSD, c.ActiveS, c.Invocations, c.ServerfulUSD, c.PerfPerDollar, c.ServerfulPerfPerDollar)
		}
	}
	return finish(stdout, stderr, &c, append([]string{"spotify"}, args...), results, err)
}

// ensureTree loads the tree prepared under root, or prepares one of files
// files when there is none.
func ensureTree(ctx context.Context, env *bench.Env, root string, files, clients int, stdout, stderr io.Writer) (*bench.Tree, error) {
	tree, _, err := bench.LoadTree(ctx, env, root)
	if err == nil || !errors.Is(err, meta.ErrNotFound) {
		return tree, err
	}
	fmt.Fprintf(stderr, "no tree under %s: preparing %d files first\n", root, files)
	cfg := bench.DefaultPrepareConfig()
	cfg.Tree.Root, cfg.Tree.Files, cfg.Clients = root, files, min(clients, 64)
	res, err := bench.Prepare(ctx, env, cfg, progressFor(stderr))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "prepared %d directories, %d files in %.1f s (%.0f inodes/s)\n", res.Dirs, res.Files, res.Duration.Seconds(), res.Rate())
	return res.Tree, nil
}

func benchEcho(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("echo", stderr)
	var c benchCommon
	c.register(fs)
	var sw sweepFlags
	sw.register(fs, "echoes")
	warm := fs.Duration("warmup", 500*time.Millisecond, "untimed echoes from the largest client count before the first run")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	counts, ok := sw.parse("echo", stderr)
	if !ok {
		return 2
	}
	if *warm < 0 {
		fmt.Fprintln(stderr, "nimbus bench echo: negative --warmup")
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, maxInt(counts), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench echo:", err)
		return 1
	}
	defer closeEnv()
	results, err := bench.Echo(ctx, env, sw.run, counts, *warm)
	return finish(stdout, stderr, &c, append([]string{"echo"}, args...), results, err)
}

func benchBigdir(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bigdir", stderr)
	var c benchCommon
	c.register(fs)
	cfg := bench.DefaultBigdirConfig()
	fs.IntVar(&cfg.Entries, "entries", cfg.Entries, "entries in the directory")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "parallel writers while filling the directory (the listing uses one client)")
	fs.IntVar(&cfg.PageSize, "page", cfg.PageSize, "entries asked for per page (the server may cap it)")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", cfg.SampleEvery, "server memory sampling period")
	metrics := fs.String("metrics", "", "URL to sample server memory from (default: the target's /metrics, or HDFS's /jmx)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg.Root = c.root
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus bench bigdir:", err)
		return 2
	}
	env, closeEnv, err := openTarget(ctx, &c, cfg.Clients, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench bigdir:", err)
		return 1
	}
	defer closeEnv()
	if *metrics != "" {
		env.MetricsURL = *metrics
	}
	r, err := bench.Bigdir(ctx, env, cfg, progressFor(stderr))
	var results []bench.Result
	if r.Bigdir != nil {
		results = append(results, r)
		b := r.Bigdir
		fmt.Fprintf(stdout, "bigdir %s: %d entries in %d pages, first page %.1f ms, all %.2f s (%.0f entries/s), server memory %s before, %s max\n",
			b.Dir, b.Entries, b.Pages, b.FirstPageMs, b.TotalS, b.EntriesPerS, mib(b.MemBytesBefore), mib(b.MemBytesMax))
		if b.MemError != "" {
			fmt.Fprintln(stderr, "memory not sampled:", b.MemError)
		}
	}
	return finish(stdout, stderr, &c, append([]string{"bigdir"}, args...), results, err)
}

func mib(b int64) string {
	if b == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func benchPlot(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plot", stderr)
	out := fs.String("out", "bench-plots", "directory the PNG files are written to")
	// Accept flags after the file names too: plot a.json b.json --out DIR.
	var files []string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "usage: nimbus bench plot FILE... [--out DIR]")
		return 2
	}
	var docs []*bench.Document
	for _, f := range files {
		d, err := bench.ReadDocumentFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "nimbus bench plot:", err)
			return 1
		}
		docs = append(docs, d)
	}
	written, err := plot.Write(plot.Collect(docs), *out)
	for _, w := range written {
		fmt.Fprintln(stdout, w)
	}
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench plot:", err)
		return 1
	}
	return 0
}
