package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/bench"
)

// floorReady is the line `nimbus bench floor-serve` prints once it listens.
const floorReady = "floor listening on "

// benchFloor measures a bare TCP round trip to another process (bench.Floor):
// the floor under the echo workload. Unless --server names one, it starts its
// own binary as `nimbus bench floor-serve` and stops it at the end.
func benchFloor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("floor", stderr)
	jsonOut := fs.String("json", "", "write the results as JSON to `FILE`")
	server := fs.String("server", "", "HOST:PORT of a running `nimbus bench floor-serve` (default: start one)")
	var sw sweepFlags
	sw.register(fs, "round trips")
	spin := fs.Duration("spin", 0, "spin on a non-blocking read for up to this long before parking (0: park at once, as Nimbus does)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	counts, ok := sw.parse("floor", stderr)
	if !ok {
		return 2
	}
	if *spin < 0 {
		fmt.Fprintln(stderr, "nimbus bench floor: negative --spin")
		return 2
	}
	addr := *server
	if addr == "" {
		var stop func()
		var err error
		addr, stop, err = startFloorServer(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "nimbus bench floor:", err)
			return 1
		}
		defer stop()
	}
	results, err := bench.Floor(ctx, addr, sw.run, counts, *spin)
	return finish(stdout, stderr, &benchCommon{json: *jsonOut}, append([]string{"floor"}, args...), results, err)
}

// startFloorServer runs this binary as `bench floor-serve` on a free
// loopback port and waits for it to listen. The child's stdin is a pipe from
// this process, so that it exits when this process does, however it ends.
func startFloorServer(ctx context.Context) (addr string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("start floor server: %w", err)
	}
	cmd := exec.Command(self, "bench", "floor-serve", "--listen", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, fmt.Errorf("start floor server: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("start floor server: %w", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start floor server %s: %w", self, err)
	}
	stop = func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		io.Copy(io.Discard, out)
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, floorReady) {
			stop()
			return "", nil, fmt.Errorf("start floor server: it printed %q, want %q ADDR", s, floorReady)
		}
		return strings.TrimSpace(strings.TrimPrefix(s, floorReady)), stop, nil
	case <-time.After(10 * time.Second):
		stop()
		return "", nil, fmt.Errorf("start floor server: not listening after 10s")
	case <-ctx.Done():
		stop()
		return "", nil, fmt.Errorf("start floor server: %w", ctx.Err())
	}
}

// benchFloorServe is the other end of `nimbus bench floor`: it echoes
// bench.FloorMessageSize-byte messages until its stdin closes or it is
// interrupted. Not listed in the usage: benchFloor starts it.
func benchFloorServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("floor-serve", stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "nimbus bench floor-serve:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s%s\n", floorReady, ln.Addr())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := bench.FloorServe(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "nimbus bench floor-serve:", err)
		return 1
	}
	return 0
}
