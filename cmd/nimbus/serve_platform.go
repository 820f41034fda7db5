package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/server"
	"github.com/nimbus-fs/nimbus/webhdfs"
)

// `nimbus serve --platform local`: serve becomes the gateway of the local
// platform (docs/ELASTIC.md, "The local platform and its hosting"). Its
// listener forwards POST /rpc/call and WebHDFS to NameNode instances the
// scaling policy starts and reclaims, as child processes (`nimbus
// namenode`, --hosting process, the default) or as servers in this
// process (--hosting inprocess). Without --platform, serve is one server,
// as before, and none of this runs.

// platformFlags are serve's flags of the local platform.
type platformFlags struct {
	platform, hosting string
	cfg               platform.Config
	invokeTimeout     time.Duration
	faultInjection    bool
	instanceProcs     int
	instanceMaxConns  int
}

// platformOnly are the flags an instance does not take: the platform's,
// serve's own, and those the platform sets per instance.
var platformOnly = []string{"platform", "hosting", "concurrency", "max-instances", "max-instances-per-deployment", "keep-alive",
	"min-instances", "max-queue", "invoke-timeout", "fault-injection", "instance-procs", "instance-max-connections", "daemon", "pid-file", "listen", "advertise", "debug-addr", "hadoop-rpc-addr", "data",
	"deployment", "deployments"}

func addPlatformFlags(fl *flag.FlagSet) *platformFlags {
	pf := &platformFlags{cfg: platform.DefaultConfig(1)}
	fl.StringVar(&pf.platform, "platform", "", "run a serverless platform behind this listener instead of one server: local (NameNode instances started and reclaimed by the scaling policy; needs --store postgres://...). Default: none, one server")
	fl.StringVar(&pf.hosting, "hosting", "process", "with --platform local: how instances run: process (each a `nimbus namenode` child) or inprocess (each a server in this process)")
	fl.IntVar(&pf.cfg.Concurrency, "concurrency", pf.cfg.Concurrency, "with --platform local: invocations one instance serves at once; more wait, and start instances")
	fl.IntVar(&pf.cfg.MaxInstances, "max-instances", pf.cfg.MaxInstances, "with --platform local: instances at most, all deployments together")
	fl.IntVar(&pf.cfg.MaxPerDeployment, "max-instances-per-deployment", pf.cfg.MaxPerDeployment, "with --platform local: instances at most per deployment")
	fl.IntVar(&pf.cfg.MinInstances, "min-instances", pf.cfg.MinInstances, "with --platform local: instances kept per deployment, idle or not (started at once)")
	fl.DurationVar(&pf.cfg.KeepAlive, "keep-alive", pf.cfg.KeepAlive, "with --platform local: an instance idle this long is reclaimed (down to --min-instances)")
	fl.IntVar(&pf.cfg.MaxQueue, "max-queue", pf.cfg.MaxQueue, "with --platform local: invocations waiting per deployment before more are refused (503)")
	fl.DurationVar(&pf.invokeTimeout, "invoke-timeout", 30*time.Second, "with --platform local: how long a request waits for an instance before it is answered 503")
	fl.IntVar(&pf.instanceProcs, "instance-procs", -1, "with --hosting process: each instance's GOMAXPROCS, its share of the machine's cores (0: the cores over the most instances the caps allow, at least 1; -1: Go's default, every core)")
	fl.IntVar(&pf.instanceMaxConns, "instance-max-connections", 0, "with --platform local: client connections one instance holds at once, beyond which clients that reach it (through the gateway or straight) get 503 (default: --concurrency + --max-queue + 16)")
	fl.BoolVar(&pf.faultInjection, "fault-injection", false, "with --platform local: serve POST /platform/kill?deployment=D, which SIGKILLs one serving instance of D (for `nimbus bench elastic --kill-every`; never on a gateway others can reach)")
	return pf
}

// instanceArgs returns serve's arguments without the flags an instance
// does not take, for `nimbus namenode`. Repeated flags (--tenant-limit)
// stay repeated.
func instanceArgs(fl *flag.FlagSet, args []string) []string {
	drop := map[string]bool{}
	for _, n := range platformOnly {
		drop[n] = true
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, hasValue := strings.TrimLeft(a, "-"), false
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if j := strings.IndexByte(name, '='); j >= 0 {
			name, hasValue = name[:j], true
		}
		f := fl.Lookup(name)
		takesNext := !hasValue && f != nil && !isBoolFlag(f)
		if drop[name] {
			if takesNext {
				i++
			}
			continue
		}
		out = append(out, a)
		if takesNext && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// runPlatform runs the gateway until ctx ends.
func runPlatform(ctx context.Context, cfg server.Config, pf *platformFlags, fl *flag.FlagSet, args []string, pidFile string, grace time.Duration, stdout, stderr io.Writer) int {
	log := cfg.Logger
	switch {
	case pf.platform != "local":
		fmt.Fprintf(stderr, "nimbus serve: bad --platform %q: want local (or none)\n", pf.platform)
		return 2
	case pf.hosting != "process" && pf.hosting != "inprocess":
		fmt.Fprintf(stderr, "nimbus serve: bad --hosting %q: want process or inprocess\n", pf.hosting)
		return 2
	case cfg.Deployment != 0:
		fmt.Fprintln(stderr, "nimbus serve: --deployment names one server's deployment; the platform starts instances of every deployment (--deployments)")
		return 2
	}
	if err := server.CheckInProcess(cfg); err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 2
	}
	pcfg := pf.cfg
	pcfg.Deployments = max(cfg.Deployments, 1)
	if err := pcfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 2
	}
	pool, poolSet := cfg.Postgres.PoolSize, false
	fl.Visit(func(f *flag.Flag) { poolSet = poolSet || f.Name == "pg-pool-size" })
	if !poolSet {
		pool = instancePool(pool, pcfg)
	}
	var host platform.Host
	maxConns := instanceMaxConnections(pf.instanceMaxConns, pcfg)
	// The credential that admits the gateway to the connection slots each
	// instance keeps for it (docs/OPERATIONS.md, "The platform's ports: who
	// may call an instance"): new for each run of the platform, handed to
	// the instances at their start.
	credential := rand.Text()
	if pf.hosting == "process" {
		iargs := instanceArgs(fl, args)
		if !poolSet {
			iargs = append(iargs, "--pg-pool-size", strconv.Itoa(pool))
		}
		iargs = append(iargs, "--max-connections", strconv.Itoa(maxConns))
		host = &platform.ProcessHost{Args: iargs, DataDir: cfg.DataDir, Stderr: stderr,
			Procs: instanceProcs(pf.instanceProcs, runtime.NumCPU(), pcfg), Credential: credential}
	} else {
		base := cfg
		base.Postgres.PoolSize = pool
		base.Limits.MaxConnections = maxConns
		base.Limits.GatewayCredential = credential
		host = &server.InProcessHost{Base: base, DataDir: cfg.DataDir}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lopts := platform.LocalOptions{Logger: log.With("component", "platform"), Registerer: reg}
	// With a shared coordinator, the gateway is a client of it (no member):
	// it evicts the member of an instance it has seen die, so that the
	// others' writes stop waiting for that instance's acknowledgements
	// without waiting for its lease to expire.
	coord, err := server.OpenSharedCoordinator(ctx, cfg, log.With("component", "coordinator"))
	if err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 1
	}
	if coord != nil {
		defer coord.Close()
		lopts.Exited = server.EvictExited(coord, log.With("component", "platform"))
	}
	local, err := platform.NewLocal(pcfg, host, lopts)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 2
	}
	// The gateway takes the server's limits (docs/OPERATIONS.md, "The
	// gateway's limits"): the frame timeout bounds a /rpc/call body, the
	// upload idle timeout each read of a WebHDFS body, the RPC server's
	// byte bound the /rpc/call bodies held at once.
	gw, err := platform.NewGateway(local, platform.GatewayOptions{InvokeTimeout: pf.invokeTimeout, Credential: credential, FaultInjection: pf.faultInjection, Logger: log.With("component", "gateway"),
		FrameTimeout: cfg.Limits.RPCFrameTimeout, UploadIdleTimeout: cfg.Limits.UploadIdleTimeout, BodyBudget: cfg.Limits.RPCServerBytes,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), Registerer: reg, Gatherer: reg, Version: cfg.Version, Prices: cfg.Prices})
	if err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 1
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus serve: listen on %s: %v\n", cfg.Listen, err)
		return 1
	}
	// The connection cap and write-stall timeout of a server's listener;
	// each client connection may hold one to an instance besides, so the
	// default cap is half a server's. Answers net/http gives before the
	// gateway sees a request go out in WebHDFS's shape.
	ln = server.LimitListener(webhdfs.ShapeEarlyErrors(ln), cfg.Limits, 2, log, reg)
	hs := &http.Server{Handler: gw, ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout, IdleTimeout: cfg.Limits.IdleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	if err := local.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		_ = hs.Close()
		return 1
	}
	if pidFile != "" {
		if err := writePidFile(pidFile); err != nil {
			fmt.Fprintln(stderr, "nimbus serve:", err)
			_ = hs.Close()
			_ = local.Close(context.Background())
			return 1
		}
		defer removePidFile(pidFile)
	}
	fmt.Fprintf(stdout, "nimbus serving on http://%s: the gateway of a local platform, %d deployments, hosting %s (data in %s)\n",
		ln.Addr(), pcfg.Deployments, pf.hosting, cfg.DataDir)
	code := 0
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "nimbus serve:", err)
			code = 1
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "nimbus serve: shutdown:", err)
		code = 1
	}
	gw.Close()
	if err := local.Close(sctx); err != nil {
		fmt.Fprintln(stderr, "nimbus serve: stopping the instances:", err)
		code = 1
	}
	return code
}

// instancePool is each instance's PostgreSQL connections when
// --pg-pool-size is not given: total (one server's default) shared out
// over the most instances the caps allow, at least minInstancePool. The
// database's cores serve every instance's transactions, and connections
// beyond what they can run only queue inside it (and 16 instances of 32
// would pass PostgreSQL's default max_connections): on two cores, two
// instances of 16 connections each served creates and uncached reads
// faster, with a lower p99, than two of 32 (docs/ELASTIC.md, "Connections
// to the database, per instance"). An instance running alone keeps its
// share; --pg-pool-size sets every instance's.
func instancePool(total int, cfg platform.Config) int {
	return max(minInstancePool, total/mostInstances(cfg))
}

// mostInstances is the most instances cfg's caps let run at once (at
// least 1): what instancePool and instanceProcs share out over.
func mostInstances(cfg platform.Config) int {
	return max(1, min(cfg.MaxInstances, cfg.MaxPerDeployment*cfg.Deployments))
}

// minInstancePool is the fewest connections instancePool gives: a write
// holds one while it waits for its invalidations' acknowledgements.
const minInstancePool = 4

// instanceProcs is the GOMAXPROCS of each process instance for
// --instance-procs flag on a machine of cpus cores: the flag's value, or
// (0) the cores shared out over the most instances cfg's caps allow, at
// least 1, as a function platform gives each instance a share of a core;
// -1 (or less, the default) leaves Go's default. Measured on two cores
// (docs/ELASTIC.md, "The local platform and its hosting"): two instances
// at 1 each served 5% more cached stats than at 2; eight `lambda`
// instances at 1 each served the Spotify mix worse in the one run made,
// so it is not the default.
func instanceProcs(flag, cpus int, cfg platform.Config) int {
	if flag != 0 {
		return max(flag, 0)
	}
	return max(1, cpus/mostInstances(cfg))
}
