package loop

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nimbus-fs/nimbus/cache"
	"github.com/nimbus-fs/nimbus/coherence"
	"github.com/nimbus-fs/nimbus/coordinator"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

// newLoop is a loop that is never started: the tests drive its transport.
func newLoop(t *testing.T) *Loop {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := cache.New(cache.Config{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Cache, cfg.Store, cfg.Auth = c, st, testKey(t)
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

func inv(seq uint64) []coherence.Message {
	return []coherence.Message{{Type: coherence.MsgInv, From: "a", To: "b", Op: coherence.OpID{Writer: "a", Seq: seq},
		Targets: []cache.Target{cache.Key(1, "x")}}}
}

func viewOf(url string) *view {
	return &view{rev: 1, members: map[string]coordinator.Member{"b": {ID: "b", Addr: url}}}
}

// TestStreamCarriesBatches: batches to one peer travel on one stream, in
// frames, every one delivered.
func TestStreamCarriesBatches(t *testing.T) {
	a, b := newLoop(t), newLoop(t)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(b.Handler())
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	const n = 500
	for i := range n {
		a.send(a.ctx, inv(uint64(i)), viewOf(srv.URL))
	}
	seen := map[uint64]bool{}
	for deadline := time.After(10 * time.Second); len(seen) < n; {
		select {
		case ms := <-b.inbox:
			for _, m := range ms {
				seen[m.Op.Seq] = true
			}
		case <-deadline:
			t.Fatalf("%d of %d batches arrived", len(seen), n)
		}
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("%d connections for one peer's batches, want one stream", c)
	}
}

// TestStreamFallsBackToPost: a peer that answers the stream's request as a
// batch (204, no upgrade) gets every batch as a POST of its own.
func TestStreamFallsBackToPost(t *testing.T) {
	a := newLoop(t)
	var mu sync.Mutex
	seen := map[uint64]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			ms, err := decodeBatch(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			for _, m := range ms {
				seen[m.Op.Seq] = true
			}
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	const n = 20
	for i := range n {
		a.send(a.ctx, inv(uint64(i)), viewOf(srv.URL))
	}
	waitFor(t, "every batch posted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
}

// TestStreamRedials: a stream whose connection broke is opened again for
// the next batch.
func TestStreamRedials(t *testing.T) {
	a, b := newLoop(t), newLoop(t)
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	recv := func(seq uint64) {
		t.Helper()
		for deadline := time.After(10 * time.Second); ; {
			select {
			case ms := <-b.inbox:
				if ms[0].Op.Seq == seq {
					return
				}
			case <-deadline:
				t.Fatalf("batch %d did not arrive", seq)
			}
		}
	}
	a.send(a.ctx, inv(1), viewOf(srv.URL))
	recv(1)
	srv.CloseClientConnections() // does not reach hijacked ones: break them from the receiving side
	b.cancel()
	b = newLoop(t)
	srv.Config.Handler = b.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seq := uint64(2); ; seq++ {
		a.send(a.ctx, inv(seq), viewOf(srv.URL))
		select {
		case ms := <-b.inbox:
			if ms[0].Op.Seq >= 2 {
				return
			}
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no batch arrived after the stream broke")
		}
	}
}

// TestStreamToStalledPeer: a peer that takes the stream and then stops
// reading (a stopped process) does not block its sender: the write is cut
// off after SendTimeout, counted as a send error, and the stream closed.
func TestStreamToStalledPeer(t *testing.T) {
	a := newLoop(t)
	a.cfg.SendTimeout = 100 * time.Millisecond
	stalled := make(chan struct{})
	t.Cleanup(func() { close(stalled) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + upgradeProto + "\r\n\r\n")
		brw.Flush()
		<-stalled // never reads
	}))
	t.Cleanup(srv.Close)
	big := inv(1)
	for i := range 2000 {
		big[0].Targets = append(big[0].Targets, cache.Key(uint64(i), "a-long-enough-name-to-fill-the-socket-buffers"))
	}
	deadline := time.Now().Add(20 * time.Second)
	for sendErrors(a) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no send error: the stream to a stalled peer was never cut off")
		}
		a.send(a.ctx, big, viewOf(srv.URL))
		time.Sleep(time.Millisecond)
	}
}

// sendErrors reads the loop's send errors.
func sendErrors(l *Loop) float64 {
	var m dto.Metric
	if err := l.m.sendErrors.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// TestHandlerRefusesNonMembers: a batch or a stream without a member's
// credential, or with another cluster's, is answered 401 or 403, counted
// as refused, and never reaches the loop; a signed one does.
func TestHandlerRefusesNonMembers(t *testing.T) {
	b := newLoop(t)
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	other, err := clusterauth.New(bytes.Repeat([]byte{8}, clusterauth.SecretSize), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := appendBatch(nil, inv(1))
	for _, tc := range []struct {
		key    *clusterauth.Key
		stream bool
		want   int
	}{{nil, false, http.StatusUnauthorized}, {other, false, http.StatusForbidden}, {nil, true, http.StatusUnauthorized}, {other, true, http.StatusForbidden}} {
		var rd io.Reader = bytes.NewReader(body)
		if tc.stream {
			rd = nil
		}
		req, err := http.NewRequest(http.MethodPost, srv.URL+Path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if tc.stream {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", upgradeProto)
		}
		if tc.key != nil {
			if tc.stream {
				tc.key.Sign(req, nil)
			} else {
				tc.key.Sign(req, body)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("stream %v, signed by another cluster %v: %s, want %d", tc.stream, tc.key != nil, resp.Status, tc.want)
		}
	}
	var m dto.Metric
	var refused float64
	for _, reason := range []string{"missing", "invalid"} {
		if err := b.m.refused.WithLabelValues(reason).Write(&m); err != nil {
			t.Fatal(err)
		}
		refused += m.GetCounter().GetValue()
	}
	if refused != 4 {
		t.Errorf("%v requests counted as refused, want 4", refused)
	}
	select {
	case ms := <-b.inbox:
		t.Fatalf("a refused batch reached the loop: %v", ms)
	default:
	}
	// A member's batch goes through.
	a := newLoop(t)
	if err := a.post(t.Context(), srv.URL+Path, body); err != nil {
		t.Fatalf("a member's POST: %v", err)
	}
	if ms := <-b.inbox; len(ms) != 1 || ms[0].Op.Seq != 1 {
		t.Fatalf("delivered %v, want the INV", ms)
	}
}
