package main

import "testing"

// --instance-max-connections: as given, or the platform's caps for one
// instance (its slots and its deployment's queue) plus the platform's own
// connections.
func TestInstanceMaxConnections(t *testing.T) {
	c := caps(2, 4, 8) // --concurrency 4, --max-queue 4096
	if got := instanceMaxConnections(0, c); got != 4+4096+platformConns {
		t.Errorf("default: %d, want %d", got, 4+4096+platformConns)
	}
	c.Concurrency, c.MaxQueue = 2, 4
	if got := instanceMaxConnections(0, c); got != 22 {
		t.Errorf("--concurrency 2 --max-queue 4: %d, want 22", got)
	}
	if got := instanceMaxConnections(100, c); got != 100 {
		t.Errorf("given 100: %d", got)
	}
}
