package bench

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestFloorCountsRoundTrips(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- FloorServe(ctx, ln) }()

	results, err := Floor(ctx, ln.Addr().String(), RunConfig{OpsPerClient: 200}, []int{1, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	spun, err := Floor(ctx, ln.Addr().String(), RunConfig{OpsPerClient: 200}, []int{1, 3}, 50*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, spun...)
	if len(results) != 4 {
		t.Fatalf("%d results, want 4", len(results))
	}
	for i, want := range []int64{200, 600, 200, 600} {
		r := results[i]
		op := "pingpong"
		if i >= 2 {
			op = "pingpong-spin"
		}
		if r.Workload != "floor" || r.Op != op || r.System != "tcp-loopback" {
			t.Errorf("result %d is %s/%s/%s", i, r.Workload, r.Op, r.System)
		}
		if r.Ops != want || r.Errors != 0 || r.ThroughputOpsS <= 0 {
			t.Errorf("%d clients: %d ops, %d errors, %.0f/s; want %d ops", r.Clients, r.Ops, r.Errors, r.ThroughputOpsS, want)
		}
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("FloorServe after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("FloorServe did not return after its context ended")
	}
}

// A peer that answers with other bytes than it got is counted as an error,
// not as a round trip.
func TestFloorRejectsAWrongPong(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, FloorMessageSize)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			c.Write(make([]byte, FloorMessageSize)) // zeros, not the ping
		}
	}()
	results, err := Floor(context.Background(), ln.Addr().String(), RunConfig{OpsPerClient: 5}, []int{1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Ops != 0 || r.Errors != 5 {
		t.Fatalf("%d ops and %d errors against a wrong peer, want 0 and 5", r.Ops, r.Errors)
	}
}
