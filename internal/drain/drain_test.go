package drain

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A closed gate refuses new requests, and Wait returns only once every
// request it let in has left.
func TestGateDrains(t *testing.T) {
	var g Gate
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on an empty gate: %v", err)
	}
	const n = 8
	release := make(chan struct{})
	var left sync.WaitGroup
	for range n {
		if !g.Enter() {
			t.Fatal("an open gate refused a request")
		}
		left.Go(func() {
			<-release
			g.Exit()
		})
	}
	if g.Closed() {
		t.Fatal("Closed before Close")
	}
	g.Close()
	if !g.Closed() {
		t.Fatal("not Closed after Close")
	}
	if g.Enter() {
		t.Fatal("a closed gate let a request in")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with %d requests in: %v, want the deadline", n, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- g.Wait(context.Background()) }()
	select {
	case err := <-waited:
		t.Fatalf("Wait returned %v with requests still in", err)
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	left.Wait()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return once the last request left")
	}
	// Empty again: a second Wait returns at once.
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
