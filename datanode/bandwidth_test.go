package datanode

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// The background transfers' bandwidth: a reader through it gets at most a
// burst per Read, and once the burst is spent the next Read waits for
// tokens (a context that ends sooner than they come fails it: rate's
// WaitN refuses a wait longer than the deadline, so no clock is measured).
func TestBandwidth(t *testing.T) {
	if newBandwidth(0) != nil {
		t.Fatal("bandwidth 0 is not unbounded")
	}
	bw := newBandwidth(1000) // burst 1000 bytes, 1000 bytes/s
	src := bytes.Repeat([]byte{1}, 10_000)
	r := &throttledReader{ReadCloser: io.NopCloser(bytes.NewReader(src)), ctx: context.Background(), bw: bw}
	buf := make([]byte, 5000)
	n, err := r.Read(buf)
	if err != nil || n != 1000 {
		t.Fatalf("first read: %d, %v; want the burst, 1000", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r.ctx = ctx
	if n, err := r.Read(buf); err == nil {
		t.Fatalf("a read past the burst with 50 ms left got %d bytes; the tokens come in 1 s", n)
	}
}
