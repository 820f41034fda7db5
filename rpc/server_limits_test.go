package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/api"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/meta/metatest"
	"github.com/nimbus-fs/nimbus/rpc"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// gauge returns the value of the metric name (with label value lv, if any)
// in reg, 0 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name, lv string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if lv != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != lv) {
				continue
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bigFile writes a file of size bytes with a recognisable pattern.
func bigFile(t *testing.T, fs meta.FileSystem, path string, size int) []byte {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	ctx, u := context.Background(), meta.User{Name: "u"}
	if _, err := fs.Create(ctx, u, path, meta.CreateOptions{Client: "cl", Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Write(ctx, u, path, "cl", 0, data); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Complete(ctx, u, path, "cl"); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSlowReaderIsBounded: a client pipelines many 1 MiB reads and takes no
// answer. The server must stop reading its requests once the connection (or
// the server) holds its bound, keep serving another connection, and answer
// every request read once the client reads.
func TestSlowReaderIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  rpc.ServerOptions
		bound int64
	}{
		{"connection", rpc.ServerOptions{MaxConnBytes: 8 << 20}, 8 << 20},
		{"server", rpc.ServerOptions{MaxServerBytes: 6 << 20}, 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, size = 200, 1<<20 - 256 // MemFS files stop at 1 MiB
			fs := metatest.NewMemFS()
			data := bigFile(t, fs, "/big", size+256)
			var reads atomic.Int32
			fs.Hook = func(ctx context.Context, m string) error {
				if m == "read" {
					reads.Add(1)
				}
				return nil
			}
			e := start(t, fs, tc.opts)
			nc, br := rawConn(t, e)
			var out []byte
			for i := 1; i <= n; i++ {
				out, _ = rpc.AppendFrame(out, &api.Request{RequestId: uint64(i), User: "u",
					Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/big", Offset: int64(i % 256), Length: size}}}, 0)
			}
			if _, err := nc.Write(out); err != nil {
				t.Fatal(err)
			}
			// The reader stops: it reports waiting, and the reads run stay
			// near what the bound holds.
			waitFor(t, "backpressure", func() bool {
				return metricValue(t, e.reg, "nimbus_rpc_backpressure_waits_total", "") > 0
			})
			time.Sleep(200 * time.Millisecond) // anything still running would show up now
			max := tc.bound + rpc.DefaultMaxFrameSize + 4096
			if p := e.srv.HeldPeak(); p > max {
				t.Fatalf("the server held %d bytes for a client that does not read; bound %d", p, max)
			}
			if r := int64(reads.Load()); r*size > max {
				t.Fatalf("%d reads of 1 MiB ran for a client that does not read; bound %d bytes", r, max)
			}
			if held := metricValue(t, e.reg, "nimbus_rpc_held_bytes", ""); held <= 0 || int64(held) > max {
				t.Fatalf("nimbus_rpc_held_bytes = %v, want in (0, %d]", held, max)
			}
			// Another connection is served meanwhile, reads included (on a
			// server-wide bound it waits its turn: its own read goes through
			// because the slow connection's answers are taken below).
			if tc.name == "connection" {
				c := dial(t, e)
				mustOK(t, call(t, c, "u", &api.Request{Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}))
				got := mustOK(t, call(t, c, "u", &api.Request{Body: &api.Request_Read{Read: &api.ReadRequest{Path: "/big", Length: size}}}))
				if !bytes.Equal(got.GetRead().GetData(), data[:size]) {
					t.Fatal("another connection's read came back wrong")
				}
			}
			// The client reads at last: every answer, correct.
			seen := make(map[uint64]bool)
			nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			for len(seen) < n {
				frame, err := rpc.ReadFrame(br, nil, 0)
				if err != nil {
					t.Fatalf("after %d answers: %v", len(seen), err)
				}
				resp := &api.Response{}
				if err := proto.Unmarshal(frame, resp); err != nil {
					t.Fatal(err)
				}
				id := resp.GetRequestId()
				if resp.GetError() != nil || seen[id] || id < 1 || id > n {
					t.Fatalf("answer %d: %v (seen before: %v)", id, resp.GetError(), seen[id])
				}
				off := int(id % 256)
				if !bytes.Equal(resp.GetRead().GetData(), data[off:off+size]) {
					t.Fatalf("answer %d: wrong data", id)
				}
				seen[id] = true
			}
			waitFor(t, "held bytes back to 0", func() bool { return e.srv.HeldBytes() == 0 })
		})
	}
}

// TestUnfinishedFrameClosed: garbage after the upgrade that reads as a
// length, or a frame cut short, is not waited for forever: the connection
// is closed after the frame timeout. A connection idle between frames stays
// open past it, until its own idle timeout.
func TestUnfinishedFrameClosed(t *testing.T) {
	e := start(t, metatest.NewMemFS(), rpc.ServerOptions{FrameTimeout: 300 * time.Millisecond, IdleTimeout: 2 * time.Second})
	idle, idleBR := rawConn(t, e)
	for _, partial := range [][]byte{
		{0x85},             // a length prefix that never ends
		{100, 0x08, 0x01},  // 100 bytes announced, 2 sent
		[]byte("GET / HT"), // text: 'G' is a length of 71
	} {
		nc, br := rawConn(t, e)
		start := time.Now()
		nc.Write(partial)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := rpc.ReadFrame(br, nil, 0); err != io.EOF && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("partial frame %q: read %v, want the server to close the connection", partial, err)
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("partial frame %q: closed after %v, before the frame timeout", partial, d)
		}
	}
	if got := metricValue(t, e.reg, "nimbus_rpc_connections_closed_total", "frame_timeout"); got != 3 {
		t.Fatalf("frame_timeout closes = %v, want 3", got)
	}
	// The idle connection outlived the frame timeouts above and still works.
	out, _ := rpc.AppendFrame(nil, &api.Request{RequestId: 7, Body: &api.Request_Echo{Echo: &api.EchoRequest{}}}, 0)
	idle.Write(out)
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := rpc.ReadFrame(idleBR, nil, 0)
	if err != nil {
		t.Fatalf("idle connection after %v: %v", 300*time.Millisecond, err)
	}
	resp := &api.Response{}
	if err := proto.Unmarshal(frame, resp); err != nil || resp.GetRequestId() != 7 || resp.GetError() != nil {
		t.Fatalf("echo on the idle connection: %v %v", resp, err)
	}
	// Then left alone past the idle timeout, it is closed.
	if _, err := rpc.ReadFrame(idleBR, nil, 0); err != io.EOF && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("idle connection: read %v, want closed after the idle timeout", err)
	}
	if got := metricValue(t, e.reg, "nimbus_rpc_connections_closed_total", "idle_timeout"); got != 1 {
		t.Fatalf("idle_timeout closes = %v, want 1", got)
	}
}

// TestIdleTimeoutSparesWaitingConnection: a client silent because it waits
// for a long request is not idle; the idle timeout counts once it has its
// answer.
func TestIdleTimeoutSparesWaitingConnection(t *testing.T) {
	// The hook reads the count at the end of the slow request, before its
	// answer: read after the answer, a busy machine could let the idle
	// timeout pass (rightly) before the test looks.
	var reg *prometheus.Registry
	closedDuring := make(chan float64, 1)
	fs := metatest.NewMemFS()
	fs.Hook = func(ctx context.Context, m string) error {
		if m == "mkdirs" {
			time.Sleep(1200 * time.Millisecond) // four idle timeouts
			closedDuring <- metricValue(t, reg, "nimbus_rpc_connections_closed_total", "idle_timeout")
		}
		return nil
	}
	e := start(t, fs, rpc.ServerOptions{IdleTimeout: 300 * time.Millisecond})
	reg = e.reg
	c := dial(t, e)
	mustOK(t, call(t, c, "u", &api.Request{Body: &api.Request_Mkdirs{Mkdirs: &api.MkdirsRequest{Path: "/slow"}}}))
	if got := <-closedDuring; got != 0 {
		t.Fatalf("idle_timeout closes = %v while a request was under way", got)
	}
	waitFor(t, "the idle close after the answer", func() bool {
		return metricValue(t, e.reg, "nimbus_rpc_connections_closed_total", "idle_timeout") == 1
	})
}
