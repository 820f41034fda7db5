package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/nimbus-fs/nimbus/platform"
	"github.com/nimbus-fs/nimbus/server"
)

// cmdNamenode is `nimbus namenode [server flags]`: one NameNode instance
// of the local platform (platform.ProcessHost starts it; docs/ELASTIC.md,
// "The local platform and its hosting"). It takes serve's server flags,
// listens on 127.0.0.1:0 unless --listen says otherwise, and prints
//
//	nimbus namenode ready http://127.0.0.1:PORT member=ID
//
// on its standard output once it serves (answers /readyz), ID being its
// coordinator member ID (the platform evicts that member once it has
// reaped the process: platform.LocalOptions.Exited). Its port is
// reachable by any process on the machine, not only the gateway, so it
// bounds its clients as a plain server does: the platform passes it
// --max-connections from its caps (instanceMaxConnections) and serve's
// timeouts and tenant limits, and in its environment the gateway's
// credential (platform.EnvGatewayCredential), for which it reserves
// connection slots past --max-connections (server.Limits). It stops
// gracefully on SIGTERM or SIGINT, and exits when its standard input is a
// pipe that reaches EOF: its parent, the platform, has gone (the platform
// also asks the kernel to SIGKILL it then, on Linux). A start that fails
// for a cause that starting it again will not change exits with
// platform.ExitConfig (startExit), its error the last line on stderr.
func cmdNamenode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	fl := flag.NewFlagSet("nimbus namenode", flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := addServerFlags(fl, &cfg)
	fl.Lookup("log-level").DefValue = "warn"
	_ = fl.Set("log-level", "warn") // one line per instance start is noise on the platform's stderr
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus namenode [flags]\n\nRuns one NameNode instance of the local platform (nimbus serve --platform local starts them).\nPrints \""+platform.ReadyPrefix+"URL\" once serving; exits on SIGTERM, or when its standard input\nis a pipe that reaches EOF.\n\nflags:")
		printFlags(fl, stderr)
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	lv, code := sf.finish("nimbus namenode", fl, &cfg, stderr)
	if code != 0 {
		return code
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	cfg.PlatformInstance = true // metered as one: only HTTP requests are invocations
	// The gateway's credential, which reserves connection slots for it,
	// comes in the environment (platform.ProcessHost): not passed on to
	// whatever this process might start.
	cfg.Limits.GatewayCredential = os.Getenv(platform.EnvGatewayCredential)
	_ = os.Unsetenv(platform.EnvGatewayCredential)
	bi, _ := debug.ReadBuildInfo()
	cfg.Version = versionString(version, bi)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchStdin(cancel)
	sf.tuneRuntime(ctx, cfg)
	spareProcessor(os.Getenv("GOMAXPROCS") != "")
	return runServer(ctx, "nimbus namenode", cfg, *sf.grace, stderr, func(srv *server.Server) (func(), error) {
		member := ""
		if m := srv.Member(); m != nil {
			member = m.Member().ID
		}
		fmt.Fprintln(stdout, platform.ReadyLine(srv.Addr(), member))
		return func() {}, nil
	})
}

// startExit is the exit status of a server (or instance) that failed to
// start with err: platform.ExitConfig when starting it again will not help
// (its --deployments is not the cluster's), so that the platform stops
// retrying and reports the error (platform.ErrPermanent); 1 otherwise.
func startExit(err error) int {
	if errors.Is(err, server.ErrDeployments) {
		return platform.ExitConfig
	}
	return 1
}

// watchStdin calls stop when standard input is a pipe and reaches EOF (the
// parent that held its other end has exited). A terminal or /dev/null is
// not watched: a namenode started by hand runs until a signal.
func watchStdin(stop func()) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
}
