package main

// nimbus serve's helpers for a first hour that ends cleanly: the address
// check before anything is created, --daemon (a background server with its
// log and pid file in the data directory) and `nimbus stop`.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nimbus-fs/nimbus/server"
)

// The files a --daemon server keeps in its data directory.
const (
	daemonLog = "nimbus.log"
	daemonPid = "nimbus.pid"
)

// daemonReadyTimeout bounds how long serve --daemon waits for the server it
// started to answer; stopTimeout how long nimbus stop waits for it to exit
// (the server's own --shutdown-timeout is 30 s).
const (
	daemonReadyTimeout = 60 * time.Second
	stopTimeout        = 60 * time.Second
)

// listenFromAddr turns a client address (NIMBUS_ADDR: a URL or host:port)
// into the host:port to listen on.
func listenFromAddr(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", fmt.Errorf("no port in %q", addr)
	}
	return u.Host, nil
}

// checkListen binds addr and lets it go: the address is free (a race with
// another process can still lose it, and Start then says so).
func checkListen(ctx context.Context, addr string) error {
	return checkListenFlag(ctx, addr, "--listen")
}

// checkListenFlag is checkListen for the address of flag.
func checkListenFlag(ctx context.Context, addr, flag string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen on %s: the address is in use (another nimbus serve? choose another with %s): %w", addr, flag, err)
		}
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln.Close()
}

// printFlags is flag.PrintDefaults without its "(default ...)" where the
// usage text already says what the default is.
func printFlags(fl *flag.FlagSet, w io.Writer) {
	fl.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if !strings.Contains(usage, "(default") && f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// startDaemon starts `nimbus serve` again in the background, in its own
// session, with its output appended to DATA/nimbus.log and --pid-file
// DATA/nimbus.pid, and returns once that server is serving (its pid file
// exists) or has failed (then its log's tail is printed).
func startDaemon(ctx context.Context, cfg server.Config, args []string, stdout, stderr io.Writer) int {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		fmt.Fprintf(stderr, "nimbus serve: data directory: %v\n", err)
		return 1
	}
	logPath := filepath.Join(cfg.DataDir, daemonLog)
	pidPath := filepath.Join(cfg.DataDir, daemonPid)
	if pid, err := readPidFile(pidPath); err == nil && alive(pid) {
		fmt.Fprintf(stderr, "nimbus serve: a server is already running on %s (pid %d in %s); stop it with: nimbus stop --data %s\n", cfg.DataDir, pid, pidPath, cfg.DataDir)
		return 1
	}
	_ = os.Remove(pidPath) // stale
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus serve: log file: %v\n", err)
		return 1
	}
	defer logf.Close()
	start, _ := logf.Seek(0, io.SeekEnd)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "nimbus serve: finding the nimbus binary: %v\n", err)
		return 1
	}
	child := []string{"serve"}
	for _, a := range args {
		if a == "--daemon" || a == "-daemon" || strings.HasPrefix(a, "--daemon=") || strings.HasPrefix(a, "-daemon=") {
			continue
		}
		child = append(child, a)
	}
	child = append(child, "--pid-file", pidPath)
	cmd := exec.Command(exe, child...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the terminal's Ctrl-C and hang-up do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "nimbus serve: starting the server: %v\n", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(daemonReadyTimeout)
	for {
		select {
		case err := <-exited:
			fmt.Fprintf(stderr, "nimbus serve: the server exited before it was ready (%v); from %s:\n%s", err, logPath, logTail(logPath, start))
			return 1
		case <-deadline:
			fmt.Fprintf(stderr, "nimbus serve: the server (pid %d) was not ready after %v; see %s\n", cmd.Process.Pid, daemonReadyTimeout, logPath)
			return 1
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			fmt.Fprintln(stderr, "nimbus serve: interrupted")
			return 130
		case <-tick.C:
		}
		if pid, err := readPidFile(pidPath); err == nil && pid == cmd.Process.Pid {
			break
		}
	}
	fmt.Fprintf(stdout, "nimbus serving on http://%s (pid %d, data in %s, log in %s); stop it with: nimbus stop --data %s\n",
		cfg.Listen, cmd.Process.Pid, cfg.DataDir, logPath, cfg.DataDir)
	return 0
}

// logTail returns what the log gained past offset from, at most its last 4 KB.
func logTail(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || from > int64(len(b)) {
		return ""
	}
	b = b[from:]
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// writePidFile writes this process's id to path atomically.
func writePidFile(path string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("pid file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("pid file %s: %w", path, err)
	}
	return nil
}

// removePidFile removes path if it still names this process.
func removePidFile(path string) {
	if pid, err := readPidFile(path); err == nil && pid == os.Getpid() {
		_ = os.Remove(path)
	}
}

func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: bad content %q", path, b)
	}
	return pid, nil
}

// alive says whether pid is a running process (not gone, not a zombie
// nobody has reaped, as in a container whose init does not reap).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

// cmdStop is `nimbus stop [--data DIR]`: it sends SIGTERM to the server
// whose pid file is in DIR (written by serve --daemon or --pid-file) and
// waits until it has shut down. Exit 0 when it stopped or was not running,
// 1 when it could not be stopped, 2 on bad usage.
func cmdStop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("nimbus stop", flag.ContinueOnError)
	fl.SetOutput(stderr)
	data := fl.String("data", server.DefaultConfig().DataDir, "the server's data directory (where its "+daemonPid+" is)")
	timeout := fl.Duration("timeout", stopTimeout, "how long to wait for the server to exit")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus stop [--data DIR] [--timeout D]\n\nStops the server started with nimbus serve --daemon --data DIR.\n\nflags:")
		printFlags(fl, stderr)
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "nimbus stop: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	pidPath := filepath.Join(*data, daemonPid)
	pid, err := readPidFile(pidPath)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "nimbus stop: no server running on %s (no %s)\n", *data, pidPath)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "nimbus stop: %v\n", err)
		return 1
	}
	if !alive(pid) {
		_ = os.Remove(pidPath)
		fmt.Fprintf(stdout, "nimbus stop: no server running on %s (removed the stale %s of pid %d)\n", *data, pidPath, pid)
		return 0
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		fmt.Fprintf(stderr, "nimbus stop: signalling pid %d: %v\n", pid, err)
		return 1
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(*timeout)
	for {
		// The server removes its pid file once it has shut down.
		if _, err := os.Stat(pidPath); errors.Is(err, os.ErrNotExist) || !alive(pid) {
			fmt.Fprintf(stdout, "nimbus stopped (pid %d, data in %s)\n", pid, *data)
			return 0
		}
		select {
		case <-deadline:
			fmt.Fprintf(stderr, "nimbus stop: pid %d still running after %v; see %s\n", pid, *timeout, filepath.Join(*data, daemonLog))
			return 1
		case <-ctx.Done():
			fmt.Fprintln(stderr, "nimbus stop: interrupted")
			return 130
		case <-tick.C:
		}
	}
}
