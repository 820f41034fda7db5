package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/internal/testproc"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/rpc"
)

// startLimited starts `nimbus serve` under a descriptor limit of nofile (soft
// and hard, through prlimit) and waits until /readyz answers.
func startLimited(t *testing.T, nofile int, extra ...string) *server {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("this test needs prlimit (util-linux) to start the server under a small descriptor limit: %v", err)
	}
	data := t.TempDir()
	args := append([]string{fmt.Sprintf("--nofile=%d:%d", nofile, nofile), binary,
		"serve", "--data", data, "--listen", "127.0.0.1:0", "--superuser", "root"}, extra...)
	p := testproc.Launch(t, exec.Command(prlimit, args...), data, "")
	if err := p.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("server did not become ready: %v\n%s", err, p.Log.String())
	}
	return newServer(t, p)
}

// metric scrapes /metrics and returns the first sample of name (its line
// prefix, labels included), -1 when absent.
func metric(t *testing.T, s *server, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.url() + "/metrics")
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return v
		}
	}
	return -1
}

// TestConnectionFloodUnderDescriptorLimit: with 512 descriptors the server
// holds at most 256 client connections; a flood of idle connections past
// that gets 503 answers instead of silence, the store keeps its descriptors
// (writes through a connection opened before the flood succeed, blocks on
// disk included), and after the flood clients are served again.
func TestConnectionFloodUnderDescriptorLimit(t *testing.T) {
	const nofile, budget = 512, 256 // ConnectionBudget(512): the reserve is capped at half
	// Idle connections would be dropped after the header timeout; keep them
	// for the length of the test.
	s := startLimited(t, nofile, "--http-header-timeout", "60s", "--inline-threshold", "4096")
	if got := metric(t, s, "nimbus_http_max_connections"); got != budget {
		t.Fatalf("nimbus_http_max_connections = %v, want %d (descriptor limit %d)\n%s", got, budget, nofile, s.log.String())
	}
	ctx := context.Background()
	u := meta.User{Name: "root"}
	cl, err := client.Dial(ctx, s.url(), client.Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Mkdirs(ctx, u, "/flood", 0o755); err != nil {
		t.Fatal(err)
	}

	// The flood: twice the budget in idle connections.
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 2 * budget {
		c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		held = append(held, c)
	}
	// A new client is turned away quickly and clearly.
	start := time.Now()
	// A fresh transport: a pooled connection from before the flood would get in.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var resp *http.Response
	for {
		resp, err = hc.Get(s.url() + "/readyz")
		if err == nil || time.Since(start) > 5*time.Second {
			break
		}
	}
	if err != nil {
		t.Fatalf("a client during the flood: %v (want a 503 answer)\n%s", err, s.log.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a client during the flood: %s %q, Retry-After %q; want 503 with Retry-After", resp.Status, body, resp.Header.Get("Retry-After"))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the 503 took %v", d)
	}
	// Over-limit flood connections were answered too: at least one reads a 503.
	answered := 0
	for _, c := range held[len(held)-budget/2:] {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 32)
		if n, _ := io.ReadAtLeast(c, b, 12); n >= 12 && strings.HasPrefix(string(b[:n]), "HTTP/1.1 503") {
			answered++
		}
	}
	if answered == 0 {
		t.Fatal("no flood connection past the limit read a 503")
	}
	// The store is not starved: files with blocks on disk are written and
	// read back through the connection opened before the flood.
	data := bytes.Repeat([]byte("nimbus"), 20000)
	for i := range 40 {
		p := fmt.Sprintf("/flood/f%02d", i)
		w, err := cl.CreateWriter(ctx, u, p, meta.CreateOptions{Perm: 0o644}) // streamed: kept in a block file
		if err != nil {
			t.Fatalf("create during the flood: %v", err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatalf("write during the flood: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("close during the flood: %v", err)
		}
		if got, err := cl.ReadFile(ctx, u, p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %s during the flood: %d bytes, %v", p, len(got), err)
		}
	}

	// The flood ends; clients are served again.
	for _, c := range held {
		c.Close()
	}
	held = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := hc.Get(s.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the flood: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.ok("fs", "mkdir", "-p", "/after/flood")
	if out := s.ok("fs", "ls", "/flood"); !strings.Contains(out, "f39") {
		t.Fatalf("ls after the flood: %s", out)
	}
	if got := metric(t, s, "nimbus_http_connections_rejected_total"); got < budget/2 {
		t.Fatalf("nimbus_http_connections_rejected_total = %v, want at least %d", got, budget/2)
	}
	s.stop()
	if out := s.ok("fsck", "--data", s.data); !strings.Contains(out, "HEALTHY") {
		t.Fatalf("fsck after the flood: %s", out)
	}
	if m := regexp.MustCompile(`(?i)too many open files`).FindString(s.log.String()); m != "" {
		t.Fatalf("the server ran out of descriptors:\n%s", s.log.String())
	}
}

// TestSlowRPCReaderIsCutOff: against the real server, an RPC client that
// pipelines 1 MiB reads and never reads holds at most its connection's byte
// bound, and once its answers have stalled for the write-stall timeout the
// connection is closed and the memory given back; other clients are served
// throughout.
func TestSlowRPCReaderIsCutOff(t *testing.T) {
	s := startServer(t, "", "", "--rpc-conn-max-mb", "16", "--write-stall-timeout", "2s")
	ctx := context.Background()
	u := meta.User{Name: "root"}
	cl, err := client.Dial(ctx, s.url(), client.Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	w, err := cl.CreateWriter(ctx, u, "/big", meta.CreateOptions{Perm: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", rpc.ConnPath, rpc.UpgradeToken)
	br := bufio.NewReader(nc)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	// Take no answer from here on: shrink the receive buffer so that the
	// kernel holds little for us.
	nc.(*net.TCPConn).SetReadBuffer(4096)
	var out []byte
	for i := range 200 {
		out, _ = rpc.AppendFrame(out, &api.Request{RequestId: uint64(i + 1), User: "root",
			Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/big", Length: int64(len(big))}}}, 0)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for metric(t, s, "nimbus_rpc_backpressure_waits_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the server never stopped reading the slow connection")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if held := metric(t, s, "nimbus_rpc_held_bytes"); held > 16<<20+rpc.DefaultMaxFrameSize {
		t.Fatalf("nimbus_rpc_held_bytes = %v, bound 16 MiB + a frame", held)
	}
	if got, err := cl.ReadFile(ctx, u, "/big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("another client's read beside the slow one: %d bytes, %v", len(got), err)
	}
	// The stall timeout closes it and its memory comes back.
	for metric(t, s, "nimbus_rpc_held_bytes") != 0 || metric(t, s, "nimbus_rpc_connections") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled connection was not closed: held %v bytes, %v connections",
				metric(t, s, "nimbus_rpc_held_bytes"), metric(t, s, "nimbus_rpc_connections"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cl.Stat(ctx, u, "/big"); err != nil {
		t.Fatalf("after the slow client was cut off: %v", err)
	}
}
