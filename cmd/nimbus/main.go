// Command nimbus is the single binary of Nimbus: the server, the file system
// shell, fsck and the benchmark driver. Each sub-command lives in its own file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// A command runs with its arguments (after the command name) and returns the
// process exit status: 0 success, 1 an operation failed, 2 bad usage.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "run the embedded Nimbus server", cmdServe},
		{"namenode", "run one NameNode instance of the local platform (serve --platform local starts them)", cmdNamenode},
		{"datanode", "run one DataNode: block replicas, published in the shared metadata store", cmdDatanode},
		{"fs", "file system shell (ls, mkdir, put, get, cat, mv, rm, ...)", cmdFS},
		{"fsck", "check the namespace invariants", cmdFsck},
		{"status", "what the running server is doing (--tenants: who loads it)", cmdStatus},
		{"bench", "run benchmark workloads", cmdBench},
		{"stop", "stop a server started with serve --daemon", cmdStop},
		{"version", "print the version (also --version)", cmdVersion},
	}
}

// version may be set at build time with -ldflags "-X main.version=...";
// otherwise it comes from the module and VCS information the go command
// records (versionString).
var version = ""

func cmdVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, "nimbus", versionString(version, bi))
	return 0
}

// versionString is the version to print: the -X stamp when there is one,
// else the module version (a tagged `go install ...@v1.2.3`) and the VCS
// commit `go build` records in a git checkout (with "+dirty" when the tree
// had changes), else "unknown" (a build with -buildvcs=false and no stamp).
func versionString(stamp string, bi *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if bi == nil {
		return "unknown"
	}
	var v []string
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v = append(v, mv)
	}
	rev, dirty, at := "", false, ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		case "vcs.time":
			at = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		if at != "" {
			rev += " (" + at + ")"
		}
		v = append(v, "commit "+rev)
	}
	if len(v) == 0 {
		return "unknown (built without VCS information; stamp it with -ldflags \"-X main.version=...\")"
	}
	return strings.Join(v, " ")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: nimbus <command> [arguments]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nenvironment: NIMBUS_ADDR (default http://127.0.0.1:9870), NIMBUS_USER (default: the OS user),")
	fmt.Fprintln(w, "  NIMBUS_CPUPROFILE (write a CPU profile of the command to this file: the benchmark driver's cost)")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(profiled(os.Getenv("NIMBUS_CPUPROFILE"), os.Stderr, func() int {
		return runInterruptible(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}))
}

// interruptGrace is how long `nimbus fs` may take to end after SIGINT or
// SIGTERM: a put reading a terminal or a pipe is blocked in a read that no
// context reaches. (serve has its own --shutdown-timeout, and bench reports
// what it measured after an interrupt, which may take longer.)
const interruptGrace = 2 * time.Second

// runInterruptible is run, except that `nimbus fs` still running
// interruptGrace after ctx ends is abandoned with exit status 130.
func runInterruptible(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "fs" {
		return run(ctx, args, stdout, stderr)
	}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	select {
	case code := <-done:
		return code
	case <-ctx.Done():
	}
	select {
	case code := <-done:
		return code
	case <-time.After(interruptGrace):
		fmt.Fprintf(stderr, "nimbus %s: interrupted\n", strings.Join(args[:min(2, len(args))], " "))
		return exitInterrupted
	}
}

// profiled runs f under a CPU profile written to file ("" : no profile).
// The server has /debug/pprof; this is for the client side, the benchmark
// driver above all.
func profiled(file string, stderr io.Writer, f func() int) int {
	if file == "" {
		return f()
	}
	out, err := os.Create(file)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus: NIMBUS_CPUPROFILE:", err)
		return 2
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		fmt.Fprintln(stderr, "nimbus: NIMBUS_CPUPROFILE:", err)
		return 2
	}
	code := f()
	pprof.StopCPUProfile()
	if err := out.Close(); err != nil {
		fmt.Fprintln(stderr, "nimbus: NIMBUS_CPUPROFILE:", err)
	}
	return code
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		return cmdVersion(ctx, nil, stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "nimbus: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}
