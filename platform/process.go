package platform

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ReadyPrefix starts the line `nimbus namenode` prints on its standard
// output once it serves; the base URL follows, then, optionally, the
// instance's coordinator member ID:
//
//	nimbus namenode ready http://127.0.0.1:PORT member=0123456789abcdef
//
// (ParseReady; a line without the member ID, as earlier binaries print
// it, is still read).
const ReadyPrefix = "nimbus namenode ready "

// ReadyLine is the line (without its newline) an instance at addr, member
// member ("" for none), prints once it serves.
func ReadyLine(addr, member string) string {
	if member == "" {
		return ReadyPrefix + addr
	}
	return ReadyPrefix + addr + " member=" + member
}

// ParseReady reads a ready line: the base URL and the member ID ("" when
// the line has none); ok false when line is not a ready line. Fields it
// does not know are ignored.
func ParseReady(line string) (addr, member string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(ReadyPrefix))
	if !ok {
		return "", "", false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", true
	}
	for _, f := range fields[1:] {
		if v, ok := strings.CutPrefix(f, "member="); ok {
			member = v
		}
	}
	return fields[0], member, true
}

// ProcessHost starts each instance as a child process, `nimbus namenode`:
//
//	BINARY namenode --deployment D --deployments N --data DATADIR/instances/ID ARGS...
//
// and takes it as serving once it prints ReadyPrefix and its base URL
// (which it does after its server answers /readyz), and its member ID
// (Member). Done is closed once the child has been reaped: it is dead. The child's standard
// input is a pipe it watches: it exits when the pipe reaches EOF, that
// is when this process exits however it exits; on Linux it is also
// killed by the kernel when this process dies (Pdeathsig). Stop is
// SIGTERM, then SIGKILL when ctx ends; Kill is SIGKILL.
type ProcessHost struct {
	// Binary is the nimbus binary; "" means os.Executable().
	Binary string
	// Args are added after the per-instance flags: the store, the
	// coordinator, the cache size and whatever else every instance shares.
	Args []string
	// DataDir holds one directory per instance, DataDir/instances/ID, its
	// --data (its block replicas; the metadata store is shared).
	DataDir string
	// Stderr receives the children's standard error (nil: discarded).
	Stderr io.Writer
	// Procs is each instance's GOMAXPROCS: its share of the machine's
	// cores, as a function platform gives an instance a fixed share of a
	// CPU. 0 leaves the child Go's default (every core). A GOMAXPROCS in
	// this process's environment wins over it.
	Procs int
	// Credential is the gateway's (GatewayOptions.Credential), handed to
	// each child in EnvGatewayCredential: the child reserves connection
	// slots for the requests that carry it. Its environment, unlike its
	// command line, is readable only by its user.
	Credential string
}

// childEnv is the environment of a child: this process's, with
// GOMAXPROCS=procs added when procs > 0 and env sets none, and
// EnvGatewayCredential set to credential (or removed when "").
func childEnv(env []string, procs int, credential string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, EnvGatewayCredential+"=") })
	if credential != "" {
		env = append(env, EnvGatewayCredential+"="+credential)
	}
	if procs <= 0 {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	return append(env, "GOMAXPROCS="+strconv.Itoa(procs))
}

// Start implements Host.
func (h *ProcessHost) Start(ctx context.Context, spec Spec) (Instance, error) {
	bin := h.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("platform: start instance %d: finding the nimbus binary: %w", spec.ID, err)
		}
	}
	dir := filepath.Join(h.DataDir, "instances", strconv.FormatUint(uint64(spec.ID), 10))
	args := []string{"namenode", "--deployment", strconv.Itoa(spec.Deployment), "--deployments", strconv.Itoa(spec.Deployments), "--data", dir}
	// An instance that never served stored nothing: the directory it made
	// is removed when its start fails, so that failed starts do not pile
	// up on disk. One that was there before (an earlier run's instance of
	// the same id, with its block replicas) is kept.
	_, statErr := os.Stat(dir)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	cleanup := func() {
		if fresh {
			_ = os.RemoveAll(dir)
		}
	}
	cmd := exec.Command(bin, append(args, h.Args...)...)
	cmd.Env = childEnv(os.Environ(), h.Procs, h.Credential)
	tail := &tailWriter{max: 4096}
	cmd.Stderr = tail
	if h.Stderr != nil {
		cmd.Stderr = io.MultiWriter(h.Stderr, tail)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("platform: start instance %d: %w", spec.ID, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("platform: start instance %d: %w", spec.ID, err)
	}
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("platform: start instance %d: %w", spec.ID, err)
	}
	p := &process{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan [2]string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if u, member, ok := ParseReady(line); ok {
				ready <- [2]string{u, member}
				break
			}
			if err != nil {
				close(ready)
				return
			}
		}
		_, _ = io.Copy(io.Discard, br) // a child never blocks writing its output
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case r, ok := <-ready:
		if ok {
			p.addr, p.member = r[0], r[1]
			return p, nil
		}
		<-p.done
	case <-p.done:
	case <-ctx.Done():
		_ = p.Kill()
		<-p.done
		cleanup()
		return nil, fmt.Errorf("platform: start instance %d: %w", spec.ID, ctx.Err())
	}
	cleanup()
	return nil, exitedError(spec.ID, p.err, tail.String())
}

// exitedError is the error of a start whose child exited before serving
// with err (cmd.Wait's), its standard error ending in tail. An exit with
// ExitConfig wraps ErrPermanent, with the child's last line (its error).
func exitedError(id InstanceID, err error, tail string) error {
	tail = strings.TrimSpace(tail)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == ExitConfig {
		last := tail
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			last = tail[i+1:]
		}
		return fmt.Errorf("%w: instance %d exited before serving (%v): %s", ErrPermanent, id, err, last)
	}
	return fmt.Errorf("platform: start instance %d: it exited before serving (%v): %s", id, err, tail)
}

// process is one `nimbus namenode` child.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open: its EOF tells the child to exit
	addr  string
	// member is the coordinator member ID its ready line gave ("" if none).
	member string
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
	once   sync.Once
}

func (p *process) Addr() string          { return p.addr }
func (p *process) MemberID() string      { return p.member }
func (p *process) Done() <-chan struct{} { return p.done }

// Pid is the child's process id (tests kill it from outside).
func (p *process) Pid() int { return p.cmd.Process.Pid }

func (p *process) Kill() error {
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

func (p *process) Stop(ctx context.Context) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("platform: stop %s: %w", p.addr, err)
	}
	select {
	case <-p.done:
		p.once.Do(func() { p.stdin.Close() })
		if p.err != nil {
			return fmt.Errorf("platform: stop %s: %w", p.addr, p.err)
		}
		return nil
	case <-ctx.Done():
		_ = p.Kill()
		<-p.done
		return fmt.Errorf("platform: stop %s: killed after %w", p.addr, ctx.Err())
	}
}

// tailWriter keeps the last max bytes written, for the error of a child
// that failed to start.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
