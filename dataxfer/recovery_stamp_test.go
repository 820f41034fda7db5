package dataxfer

import (
	"context"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

// TestStreamingRecoveryAcceptsNewerStamp: a streaming recovery naming the
// block under an older stamp than the replica's (a previous recovery's
// setup moved it and then failed downstream) reopens it, as HDFS's
// recoverRbw accepts a stamp between the op's block and the latest; a
// stamp outside that range is refused.
func TestStreamingRecoveryAcceptsNewerStamp(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, nil)
	data := randBytes(21, 3000)
	w, err := n.store.Create(ctx, blocks.ID{Block: 77, GenStamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:1000]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// A failed recovery attempt moved the replica to stamp 2.
	w2, err := n.store.OpenAppend(ctx, blocks.ID{Block: 77, GenStamp: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()

	c := &Client{Name: "DFSClient_test"}
	b := Block{Pool: testPool, ID: 77, GenStamp: 1, NumBytes: 1000}
	// Stamp 2 is not between 1 and 2 exclusive of the latest: refused.
	if bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, []Target{n.target()}, WriteOptions{
		Stage: StageStreamingRecovery, Offset: 1000, MinBytesRcvd: 1000, MaxBytesRcvd: 1000, LatestGenStamp: 2,
	}); err == nil {
		bw.Abort()
		t.Fatal("a recovery to the replica's own stamp was accepted")
	}
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, []Target{n.target()}, WriteOptions{
		Stage: StageStreamingRecovery, Offset: 1000, MinBytesRcvd: 1000, MaxBytesRcvd: 1000, LatestGenStamp: 3,
	})
	if err != nil {
		t.Fatalf("recovery naming stamp 1 of a replica under stamp 2: %v", err)
	}
	if _, err := bw.Write(data[1000:]); err != nil {
		t.Fatal(err)
	}
	if got, err := bw.Close(ctx); err != nil || got != int64(len(data)) {
		t.Fatalf("close: %d, %v", got, err)
	}
	mustEqual(t, "recovered replica", storedBytes(t, n, blocks.ID{Block: 77, GenStamp: 3}), data)
}
