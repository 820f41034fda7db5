package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nimbus-fs/nimbus/server"
)

// TestPrintDataNodesBlocks: `nimbus status` prints the replication duty's
// last round when the server runs it, and no such line otherwise.
func TestPrintDataNodesBlocks(t *testing.T) {
	var out bytes.Buffer
	printDataNodes(server.DataNodesStatus{}, &out)
	if strings.Contains(out.String(), "blocks:") {
		t.Fatalf("without a report:\n%s", out.String())
	}
	out.Reset()
	printDataNodes(server.DataNodesStatus{Blocks: &server.BlockHealth{Blocks: 5, Healthy: 3, UnderReplicated: 1, Missing: 1, CorruptReplicas: 2, Replicated: 1, OrphansDeleted: 4}}, &out)
	want := "blocks: 5, 3 healthy, 1 under-replicated, 1 missing, 0 over-replicated, 0 mis-replicated, 2 corrupt replicas; last replication round: 1 copied, 0 deleted, 4 orphans deleted, 0 failed\n"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("printed:\n%s\nwant the line %q", out.String(), want)
	}
}
