package dataxfer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

const testPool = "BP-1-127.0.0.1-1"

// node is one DataNode of a test: a blocks/local store in a temporary
// directory served on 127.0.0.1.
type node struct {
	t     testing.TB
	store *local.Store
	srv   *Server
	ln    net.Listener
	addr  string
	done  chan error

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when received changes
	received []blocks.Replica
	corrupt  []int64
	replaced []string
}

func startNode(t testing.TB, tune func(*Config)) *node {
	t.Helper()
	st, err := local.Open(t.TempDir(), local.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, store: st, done: make(chan error, 1), changed: make(chan struct{})}
	cfg := DefaultConfig(st)
	cfg.Hooks.Received = func(r blocks.Replica) {
		n.mu.Lock()
		n.received = append(n.received, r)
		close(n.changed)
		n.changed = make(chan struct{})
		n.mu.Unlock()
	}
	cfg.Hooks.Replaced = func(id blocks.ID, delHint string) {
		n.mu.Lock()
		n.replaced = append(n.replaced, fmt.Sprintf("%s %s", id, delHint))
		n.mu.Unlock()
	}
	cfg.Hooks.Corrupt = func(_ blocks.ID, off int64) {
		n.mu.Lock()
		n.corrupt = append(n.corrupt, off)
		n.mu.Unlock()
	}
	if tune != nil {
		tune(&cfg)
	}
	n.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = n.ln.Addr().String()
	go func() { n.done <- n.srv.Serve(n.ln) }()
	t.Cleanup(func() {
		n.kill()
		st.Close()
	})
	return n
}

// kill closes the node's listener and every connection, as a DataNode that
// dies.
func (n *node) kill() {
	n.srv.Close()
}

// waitReceived waits until the Received hook reported id.
func (n *node) waitReceived(id blocks.ID) {
	for {
		n.mu.Lock()
		for _, r := range n.received {
			if r.ID == id {
				n.mu.Unlock()
				return
			}
		}
		ch := n.changed
		n.mu.Unlock()
		<-ch
	}
}

func (n *node) target() Target { return Target{Addr: n.addr, UUID: "dn-" + n.addr} }

func startNodes(t testing.TB, k int, tune func(*Config)) []*node {
	var ns []*node
	for range k {
		ns = append(ns, startNode(t, tune))
	}
	return ns
}

func targets(ns []*node) []Target {
	var ts []Target
	for _, n := range ns {
		ts = append(ts, n.target())
	}
	return ts
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// storedBytes reads a replica straight from a node's store.
func storedBytes(t testing.TB, n *node, id blocks.ID) []byte {
	t.Helper()
	rd, err := n.store.Read(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatalf("store read %s at %s: %v", id, n.addr, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("store read %s at %s: %v", id, n.addr, err)
	}
	return b
}

func writeBlock(t testing.TB, c *Client, b Block, tok blocktoken.Token, ns []*node, data []byte) {
	t.Helper()
	ctx := context.Background()
	bw, err := c.WriteBlock(ctx, b, tok, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatalf("write %s: %v", b, err)
	}
	// Uneven writes, to cut packets at every kind of boundary.
	for rest, i := data, 0; len(rest) > 0; i++ {
		k := min(len(rest), 1+(i*7919)%100000)
		if _, err := bw.Write(rest[:k]); err != nil {
			t.Fatalf("write %s: %v", b, err)
		}
		rest = rest[k:]
	}
	n, err := bw.Close(ctx)
	if err != nil {
		t.Fatalf("close %s: %v", b, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("close %s: length %d, wrote %d", b, n, len(data))
	}
}

func readAll(t testing.TB, c *Client, addr string, b Block, tok blocktoken.Token, off, n int64) ([]byte, error) {
	t.Helper()
	br, err := c.ReadBlock(context.Background(), addr, b, tok, off, n)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	return io.ReadAll(br)
}

func mustEqual(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes, want %d; first difference at %d", what, len(got), len(want), i)
	}
}

var _ = time.Second
