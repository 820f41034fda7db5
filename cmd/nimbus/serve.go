package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/server"
)

// cmdServe runs the embedded Nimbus until SIGINT or SIGTERM, then shuts down
// gracefully: in-flight requests finish, the store is closed cleanly. With
// --daemon it starts itself in the background instead (serve_daemon.go).
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := server.DefaultConfig()
	if a := os.Getenv("NIMBUS_ADDR"); a != "" {
		// Serve where the clients of this environment look.
		if hp, err := listenFromAddr(a); err == nil {
			cfg.Listen = hp
		}
	}
	fl := flag.NewFlagSet("nimbus serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := addServerFlags(fl, &cfg)
	daemon := fl.Bool("daemon", false, "start in the background once ready, logging to DATA/"+daemonLog+" and writing DATA/"+daemonPid+"; stop it with `nimbus stop`")
	pidFile := fl.String("pid-file", "", "write the process id to this file while serving (removed on exit)")
	pf := addPlatformFlags(fl)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus serve [flags]\n\nRuns Nimbus (store, NameNode, RPC, WebHDFS) in the foreground until SIGINT or SIGTERM.\nWith --platform local it is the gateway of a local serverless platform instead, which starts\nNameNode instances (nimbus namenode) as load needs.\n\nflags:")
		printFlags(fl, stderr)
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	lv, code := sf.finish("nimbus serve", fl, &cfg, stderr)
	if code != 0 {
		return code
	}
	// Nothing is created before the address is known to be free: a serve
	// that cannot bind leaves no data directory behind.
	if err := checkListen(ctx, cfg.Listen); err != nil {
		fmt.Fprintln(stderr, "nimbus serve:", err)
		return 1
	}
	if cfg.HadoopRPCAddr != "" && pf.platform == "" {
		if err := checkListenFlag(ctx, cfg.HadoopRPCAddr, "--hadoop-rpc-addr, or none with --hadoop-rpc-addr ''"); err != nil {
			fmt.Fprintln(stderr, "nimbus serve: the Hadoop RPC address:", err)
			return 1
		}
	}
	if *daemon {
		return startDaemon(ctx, cfg, args, stdout, stderr)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	bi, _ := debug.ReadBuildInfo()
	cfg.Version = versionString(version, bi)

	gogc := sf.tuneRuntime(ctx, cfg)
	procs := spareProcessor(os.Getenv("GOMAXPROCS") != "")
	if pf.platform != "" {
		return runPlatform(ctx, cfg, pf, fl, args, *pidFile, *sf.grace, stdout, stderr)
	}
	return runServer(ctx, "nimbus serve", cfg, *sf.grace, stderr, func(srv *server.Server) (func(), error) {
		cleanup := func() {}
		if *pidFile != "" {
			if err := writePidFile(*pidFile); err != nil {
				return nil, err
			}
			cleanup = func() { removePidFile(*pidFile) }
		}
		cfg.Logger.Info("memory", "gogc", gogc, "memory_limit_mb", debug.SetMemoryLimit(-1)>>20) // a negative input reads the limit
		cfg.Logger.Info("processors", "gomaxprocs", procs, "cpus", runtime.NumCPU())
		fmt.Fprintf(stdout, "nimbus serving on %s (data in %s)\n", srv.Addr(), cfg.DataDir)
		return cleanup, nil
	})
}

// runServer opens a server of cfg and starts it, calls ready once it
// serves (an error stops it: exit 1; the func ready returns runs at the
// end), serves until ctx ends or the server fails, then stops it
// gracefully within grace. It returns the exit code; name begins its
// messages (nimbus serve, nimbus namenode).
func runServer(ctx context.Context, name string, cfg server.Config, grace time.Duration, stderr io.Writer,
	ready func(*server.Server) (func(), error)) int {
	srv, err := server.NewContext(ctx, cfg)
	if errors.Is(err, syscall.EAGAIN) {
		fmt.Fprintf(stderr, "%s: opening the store in %s: it is locked; is a server running on it? (%v)\n", name, server.StoreDir(cfg.DataDir), err)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return startExit(err)
	}
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(stderr, name+":", err)
		_ = srv.Stop(context.Background())
		return startExit(err)
	}
	cleanup, err := ready(srv)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		_ = srv.Stop(context.Background())
		return 1
	}
	defer cleanup()
	waitErr := srv.Wait(ctx)
	if waitErr != nil {
		fmt.Fprintln(stderr, name+":", waitErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Stop(sctx); err != nil {
		fmt.Fprintln(stderr, name+": shutdown:", err)
		return 1
	}
	if waitErr != nil {
		return 1
	}
	return 0
}

// memoryLimit returns the soft memory limit to set, in bytes, or -1 to leave
// the runtime's alone: flagMB from --memory-limit-mb (-1: not given, 0: no
// limit), envSet when GOMEMLIMIT is in the environment (the runtime has
// read it). The default leaves 2 GiB to the Go heap besides Pebble's block
// cache and two memtables, which are counted in case they live on it (they
// do when built without cgo).
func memoryLimit(flagMB int64, envSet bool, cacheBytes int64, memtableBytes uint64) int64 {
	switch {
	case flagMB == 0:
		return math.MaxInt64
	case flagMB > 0:
		return flagMB << 20
	case envSet:
		return -1
	}
	return 2<<30 + cacheBytes + 2*int64(memtableBytes)
}

// spareProcessor gives the runtime a second processor (P) where its default
// is one (a single CPU, or a container limited to one), unless GOMAXPROCS is
// set, and returns the count in force. The store's WAL flusher spends much of
// its time blocked in fdatasync, and a thread blocked in a system call keeps
// its P until the runtime's monitor takes it back: with a single P nothing
// else runs meanwhile, on every sync. Measured (scripts/bench-cores.sh,
// docs/BENCHMARKS.md "Cores"), the server pinned to one core, three runs:
// creates at 64 clients 6,500-17,600/s with one P, 24,400-34,400 with two
// (four: no better); listings 6-11% slower. On two cores a third P gave
// 10-15% more writes at 16-64 clients but 12-13% fewer reads at 4-16, so
// there the default stays. Setting GOMAXPROCS here stops the runtime from
// following a container's CPU limit as it changes; set GOMAXPROCS to choose.
func spareProcessor(userSet bool) int {
	n := runtime.GOMAXPROCS(0)
	if userSet || n > 1 {
		return n
	}
	runtime.GOMAXPROCS(2)
	return 2
}
