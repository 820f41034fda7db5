package dataxfer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
)

var sizes = []int{0, 1, 511, 512, 513, 64<<10 - 1, 64 << 10, 64<<10 + 1, 5<<20 + 333}

// TestWriteRead writes blocks of every size through pipelines of one and
// three DataNodes, then checks every replica's bytes in its store, reads
// whole and partial ranges back from every DataNode, and the block
// checksum against one computed in memory.
func TestWriteRead(t *testing.T) {
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", k), func(t *testing.T) {
			ns := startNodes(t, k, nil)
			c := &Client{Name: "DFSClient_test"}
			for i, size := range sizes {
				b := Block{Pool: testPool, ID: uint64(1000 + i), GenStamp: 1001}
				data := randBytes(uint64(size), size)
				writeBlock(t, c, b, blocktoken.Token{}, ns, data)
				want := blocks.ChunkCRCsMD5(data)
				for _, n := range ns {
					rep, err := n.store.Stat(context.Background(), b.BlockID())
					if err != nil || rep.State != blocks.Finalized || rep.Length != int64(size) {
						t.Fatalf("size %d at %s: replica %+v, %v", size, n.addr, rep, err)
					}
					mustEqual(t, fmt.Sprintf("size %d stored at %s", size, n.addr), storedBytes(t, n, b.BlockID()), data)
					got, err := readAll(t, c, n.addr, b, blocktoken.Token{}, 0, int64(size))
					if err != nil {
						t.Fatalf("size %d: read from %s: %v", size, n.addr, err)
					}
					mustEqual(t, fmt.Sprintf("size %d read from %s", size, n.addr), got, data)
					if size > 2 {
						off, l := int64(size/3), int64(size/3)
						got, err := readAll(t, c, n.addr, b, blocktoken.Token{}, off, l)
						if err != nil {
							t.Fatalf("size %d: read [%d,+%d) from %s: %v", size, off, l, n.addr, err)
						}
						mustEqual(t, "range", got, data[off:off+l])
					}
					bc, err := c.BlockChecksum(context.Background(), n.addr, b, blocktoken.Token{})
					if err != nil {
						t.Fatalf("size %d: checksum at %s: %v", size, n.addr, err)
					}
					if bc.MD5 != want.MD5 || bc.CRCCount != want.CRCCount || bc.BytesPerCRC != 512 {
						t.Fatalf("size %d: checksum at %s %+v, want %+v", size, n.addr, bc, want)
					}
					n.mu.Lock()
					got1 := len(n.received) > 0 && n.received[len(n.received)-1].ID == b.BlockID()
					n.mu.Unlock()
					if !got1 {
						t.Fatalf("size %d at %s: Received hook not called for %s", size, n.addr, b)
					}
				}
			}
		})
	}
}

// TestChecksumOfPrefix asks for the checksum of the first bytes of a
// replica, as a file checksum of a length does.
func TestChecksumOfPrefix(t *testing.T) {
	n := startNode(t, nil)
	c := &Client{Name: "DFSClient_test"}
	data := randBytes(7, 3000)
	b := Block{Pool: testPool, ID: 7, GenStamp: 1}
	writeBlock(t, c, b, blocktoken.Token{}, []*node{n}, data)
	b.NumBytes = 1500
	bc, err := c.BlockChecksum(context.Background(), n.addr, b, blocktoken.Token{})
	if err != nil {
		t.Fatal(err)
	}
	if want := blocks.ChunkCRCsMD5(data[:1500]); bc.MD5 != want.MD5 || bc.CRCCount != want.CRCCount {
		t.Fatalf("prefix checksum %+v, want %+v", bc, want)
	}
}

// TestFlushSyncAppend: hflush waits for every DataNode's ack; hsync makes
// the bytes durable and readable from each store while the block is being
// written; the block is then appended to under a new generation stamp.
func TestFlushSyncAppend(t *testing.T) {
	ns := startNodes(t, 3, nil)
	c := &Client{Name: "DFSClient_test"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 42, GenStamp: 5}
	data := randBytes(42, 200_000)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[:1000])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := bw.Acked(); got != 1000 {
		t.Fatalf("acked %d after hflush of 1000 bytes", got)
	}
	bw.Write(data[1000:100_003])
	if err := bw.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		rep, err := n.store.Stat(ctx, b.BlockID())
		if err != nil || rep.State != blocks.BeingWritten || rep.Length != 100_003 {
			t.Fatalf("after hsync at %s: %+v %v", n.addr, rep, err)
		}
		mustEqual(t, "synced bytes", storedBytes(t, n, b.BlockID()), data[:100_003])
	}
	bw.Write(data[100_003:150_000])
	if _, err := bw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Append the rest under generation stamp 6.
	bw, err = c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{Append: true, Offset: 150_000, LatestGenStamp: 6})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[150_000:])
	if n, err := bw.Close(ctx); err != nil || n != int64(len(data)) {
		t.Fatalf("append close: %d %v", n, err)
	}
	b.GenStamp = 6
	for _, n := range ns {
		mustEqual(t, "appended replica", storedBytes(t, n, b.BlockID()), data)
		bc, err := c.BlockChecksum(ctx, n.addr, b, blocktoken.Token{})
		if err != nil || bc.MD5 != blocks.ChunkCRCsMD5(data).MD5 {
			t.Fatalf("checksum after append at %s: %v", n.addr, err)
		}
	}
}

// TestDownstreamDies kills the last DataNode of a three-node pipeline in
// the middle of a block: the client's error names index 2; the first two
// DataNodes keep every acknowledged byte, and a streaming recovery with the
// two of them under a new generation stamp finishes the block.
func TestDownstreamDies(t *testing.T) {
	ns := startNodes(t, 3, nil)
	c := &Client{Name: "DFSClient_test"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 77, GenStamp: 10}
	data := randBytes(77, 1<<20)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[:300_000])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acked := bw.Acked()
	ns[2].kill()
	var pe *PipelineError
	for off := 300_000; off < len(data) && err == nil; off += 10_000 {
		_, err = bw.Write(data[off : off+10_000])
		if err == nil {
			err = bw.Flush(ctx)
		}
	}
	if !errors.As(err, &pe) || pe.Index != 2 || pe.Addr != ns[2].addr {
		t.Fatalf("write after the last DataNode died: %v, want a PipelineError at index 2", err)
	}
	sent := bw.bufOff + int64(len(bw.buf))
	acked = max(acked, bw.Acked())
	bw.Abort()

	// Recovery: the surviving pipeline, a new generation stamp, the bytes
	// from the acknowledged offset on.
	rb, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns[:2]), WriteOptions{
		Stage: StageStreamingRecovery, Offset: acked, MinBytesRcvd: acked, MaxBytesRcvd: sent, LatestGenStamp: 11,
	})
	if err != nil {
		t.Fatalf("streaming recovery: %v", err)
	}
	rb.Write(data[acked:])
	if n, err := rb.Close(ctx); err != nil || n != int64(len(data)) {
		t.Fatalf("recovered close: %d %v", n, err)
	}
	b.GenStamp = 11
	for _, n := range ns[:2] {
		mustEqual(t, "recovered replica at "+n.addr, storedBytes(t, n, b.BlockID()), data)
	}
}

// TestDownstreamDiesKeepsAcked: the upstream replicas of a broken pipeline
// stay being written with every acknowledged byte, durable.
func TestDownstreamDiesKeepsAcked(t *testing.T) {
	ns := startNodes(t, 3, nil)
	c := &Client{Name: "DFSClient_test"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 78, GenStamp: 1}
	data := randBytes(78, 400_000)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[:250_001])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ns[1].kill()
	_, err = bw.Write(data[250_001:])
	if err == nil {
		err = bw.Flush(ctx)
	}
	var pe *PipelineError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("write after DataNode 1 died: %v, want a PipelineError at index 1", err)
	}
	acked := bw.Acked()
	bw.Abort()
	ns[0].kill() // waits for its connection to end: the replica is left as it is
	rep, err := ns[0].store.Stat(ctx, b.BlockID())
	if err != nil || rep.State != blocks.BeingWritten || rep.Length < acked {
		t.Fatalf("first DataNode's replica %+v, %v; %d bytes were acknowledged", rep, err, acked)
	}
	got := storedBytes(t, ns[0], b.BlockID())
	mustEqual(t, "kept bytes", got, data[:len(got)])
}

// TestCorruptReplicaNotServed: a replica whose stored byte no longer
// matches its checksum is served up to the bad chunk and no further; the
// client's error is a checksum error naming the DataNode and the chunk's
// offset, the Corrupt hook the chunk.
func TestCorruptReplicaNotServed(t *testing.T) {
	n := startNode(t, nil)
	c := &Client{Name: "DFSClient_test"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 9, GenStamp: 1}
	data := randBytes(9, 300_000)
	writeBlock(t, c, b, blocktoken.Token{}, []*node{n}, data)
	const bad = 200_000
	if err := n.store.Corrupt(ctx, b.BlockID(), bad); err != nil {
		t.Fatal(err)
	}
	br, err := c.ReadBlock(ctx, n.addr, b, blocktoken.Token{}, 0, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		k, err := br.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			var re *ReadError
			if !errors.As(err, &re) || re.Addr != n.addr || re.Offset != bad-bad%512 || !errors.Is(err, ErrChecksum) {
				t.Fatalf("read of a corrupt replica: %v, want a checksum ReadError from %s at %d", err, n.addr, bad-bad%512)
			}
			break
		}
	}
	br.Close()
	if len(got) > bad-bad%512 {
		t.Fatalf("%d bytes served, the chunk at %d is corrupt", len(got), bad-bad%512)
	}
	mustEqual(t, "bytes before the corrupt chunk", got, data[:len(got)])
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.corrupt) != 1 || n.corrupt[0] != bad-bad%512 {
		t.Fatalf("Corrupt hook got %v, want [%d]", n.corrupt, bad-bad%512)
	}
	// The good chunks are still served.
	ok, err := readAll(t, c, n.addr, b, blocktoken.Token{}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "good range", ok, data[:1000])
}

// TestTransfer: TRANSFER_BLOCK sends a finalized replica from one
// DataNode to another; SendReplica (re-replication) does the same without
// a client.
func TestTransfer(t *testing.T) {
	ns := startNodes(t, 3, nil)
	c := &Client{Name: "DFSClient_test"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 55, GenStamp: 3}
	data := randBytes(55, 777_777)
	writeBlock(t, c, b, blocktoken.Token{}, ns[:1], data)
	b.NumBytes = int64(len(data))
	if err := c.TransferBlock(ctx, ns[0].addr, b, blocktoken.Token{}, []Target{ns[1].target()}); err != nil {
		t.Fatal(err)
	}
	rep, err := ns[1].store.Stat(ctx, b.BlockID())
	if err != nil || rep.State != blocks.Finalized {
		t.Fatalf("transferred replica %+v %v", rep, err)
	}
	mustEqual(t, "transferred replica", storedBytes(t, ns[1], b.BlockID()), data)

	if err := SendReplica(ctx, ns[0].store, b, blocktoken.Token{}, "", []Target{ns[2].target()}, SendOptions{}); err != nil {
		t.Fatal(err)
	}
	// The re-replication target answers nothing: it reports the replica
	// (the Received hook, an incremental block report) when it has it.
	ns[2].waitReceived(b.BlockID())
	mustEqual(t, "re-replicated replica", storedBytes(t, ns[2], b.BlockID()), data)
}

// TestAddDatanodeToPipeline is HDFS's recovery that replaces a failed
// DataNode: the client asks a surviving DataNode to TRANSFER_BLOCK its
// being-written replica (TRANSFER_RBW) to a new one, then sets up a
// streaming recovery through the survivors and the new DataNode under a
// new generation stamp and finishes the block.
func TestAddDatanodeToPipeline(t *testing.T) {
	ns := startNodes(t, 3, nil)
	fresh := startNode(t, nil)
	c := &Client{Name: "DFSClient_add"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 88, GenStamp: 20}
	data := randBytes(88, 500_000)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[:200_000])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ns[1].kill()
	_, err = bw.Write(data[200_000:300_000])
	if err == nil {
		err = bw.Flush(ctx)
	}
	var pe *PipelineError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("write after DataNode 1 died: %v", err)
	}
	acked := bw.Acked()
	sent := bw.bufOff + int64(len(bw.buf))
	bw.Abort()

	tb := b
	tb.NumBytes = acked
	if err := c.TransferBlock(ctx, ns[0].addr, tb, blocktoken.Token{}, []Target{fresh.target()}); err != nil {
		t.Fatalf("TRANSFER_BLOCK to the new DataNode: %v", err)
	}
	rep, err := fresh.store.Stat(ctx, b.BlockID())
	if err != nil || rep.State != blocks.BeingWritten || rep.Length != acked {
		t.Fatalf("transferred rbw replica %+v %v, want %d bytes being written", rep, err, acked)
	}
	pipeline := []Target{ns[0].target(), fresh.target(), ns[2].target()}
	rb, err := c.WriteBlock(ctx, b, blocktoken.Token{}, pipeline, WriteOptions{
		Stage: StageStreamingRecovery, Offset: acked, MinBytesRcvd: acked, MaxBytesRcvd: sent, LatestGenStamp: 21,
	})
	if err != nil {
		t.Fatalf("recovery through the new pipeline: %v", err)
	}
	rb.Write(data[acked:])
	if _, err := rb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.GenStamp = 21
	for _, n := range []*node{ns[0], fresh, ns[2]} {
		mustEqual(t, "replica at "+n.addr, storedBytes(t, n, b.BlockID()), data)
	}
}

// TestWriterHeartbeats: a writer that pauses for longer than the
// DataNodes' timeout keeps its pipeline, because it sends heartbeat
// packets when idle.
func TestWriterHeartbeats(t *testing.T) {
	ns := startNodes(t, 2, func(c *Config) { c.Timeout = time.Second })
	c := &Client{Name: "DFSClient_slow", Timeout: time.Second}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 66, GenStamp: 1}
	data := randBytes(66, 10_000)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data[:5000])
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // three server timeouts without data
	bw.Write(data[5000:])
	if _, err := bw.Close(ctx); err != nil {
		t.Fatalf("close after a pause: %v", err)
	}
	for _, n := range ns {
		mustEqual(t, "replica after a pause", storedBytes(t, n, b.BlockID()), data)
	}
}

// TestCloseRecovery: a pipeline that broke on its last packet is recovered
// with PIPELINE_CLOSE_RECOVERY: each DataNode finalizes its replica under
// the new generation stamp during the setup, and no packet follows.
func TestCloseRecovery(t *testing.T) {
	ns := startNodes(t, 2, nil)
	c := &Client{Name: "DFSClient_close"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 67, GenStamp: 4}
	data := randBytes(67, 70_000)
	bw, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(data)
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	bw.Abort() // the last packet never goes out
	rb, err := c.WriteBlock(ctx, b, blocktoken.Token{}, targets(ns), WriteOptions{
		Stage: StageCloseRecovery, MinBytesRcvd: int64(len(data)), MaxBytesRcvd: int64(len(data)), LatestGenStamp: 5,
	})
	if err != nil {
		t.Fatalf("close recovery: %v", err)
	}
	rb.Abort()
	b.GenStamp = 5
	for _, n := range ns {
		n.waitReceived(b.BlockID())
		rep, err := n.store.Stat(ctx, b.BlockID())
		if err != nil || rep.State != blocks.Finalized || rep.Length != int64(len(data)) {
			t.Fatalf("after close recovery at %s: %+v %v", n.addr, rep, err)
		}
		mustEqual(t, "recovered replica", storedBytes(t, n, b.BlockID()), data)
	}
}

// TestReplaceBlock is the balancer's move: REPLACE_BLOCK makes a DataNode
// copy a replica from another (COPY_BLOCK) and report it with the delete
// hint; a corrupt source replica is not copied.
func TestReplaceBlock(t *testing.T) {
	ns := startNodes(t, 3, nil)
	c := &Client{Name: "DFSClient_balancer"}
	ctx := context.Background()
	b := Block{Pool: testPool, ID: 91, GenStamp: 2}
	data := randBytes(91, 654_321)
	writeBlock(t, c, b, blocktoken.Token{}, ns[:1], data)
	if err := c.ReplaceBlock(ctx, ns[1].addr, b, blocktoken.Token{}, "dn-old", ns[0].target()); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "moved replica", storedBytes(t, ns[1], b.BlockID()), data)
	ns[1].mu.Lock()
	got := ns[1].replaced
	nrecv := len(ns[1].received)
	ns[1].mu.Unlock()
	if len(got) != 1 || got[0] != b.BlockID().String()+" dn-old" || nrecv != 0 {
		t.Fatalf("Replaced hook %v, Received hook %d times", got, nrecv)
	}
	if err := ns[0].store.Corrupt(ctx, b.BlockID(), 100_000); err != nil {
		t.Fatal(err)
	}
	if err := c.ReplaceBlock(ctx, ns[2].addr, b, blocktoken.Token{}, "", ns[0].target()); err == nil {
		t.Fatal("REPLACE_BLOCK from a corrupt replica succeeded")
	}
	if _, err := ns[2].store.Stat(ctx, b.BlockID()); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("a failed replace left a replica: %v", err)
	}
}
