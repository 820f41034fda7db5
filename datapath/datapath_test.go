package datapath

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/datanode"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

var root = meta.User{Name: "root"}

// cluster is a store, three DataNodes serving the data transfer protocol
// (in zones a, b and c, on hosts ha, hb and hc) that verify block tokens
// under the cluster secret, and an engine in the DataNode mode.
type cluster struct {
	st    store.Store
	e     *namespace.Engine
	dn    *DataNodes
	nodes []*datanode.DataNode
	zone  map[uint64]string // DataNode id -> zone
	xfer  dataxfer.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	ctx := context.Background()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize, opts.MemTableSize = 8<<20, 4<<20
	st, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	live := registry.Config{Heartbeat: 10 * time.Millisecond, StaleAfter: time.Minute, DeadAfter: 2 * time.Minute, Batch: 100}
	c := &cluster{st: st, zone: map[uint64]string{}, xfer: dataxfer.Client{Name: "test-client"}}
	for _, z := range []string{"a", "b", "c"} {
		cfg := datanode.DefaultConfig()
		cfg.Dir = t.TempDir()
		cfg.Zone, cfg.Host = z, "h"+z
		cfg.DataAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Liveness = live
		cfg.NewDataServer = func(env datanode.DataServerEnv) (datanode.DataServer, error) {
			xc := dataxfer.DefaultConfig(env.Store)
			// The DataNodes' side of the tokens: the same derivation from
			// the cluster secret, any key id.
			xc.Tokens = blocktoken.NewManager(secret, 0, nil)
			return dataxfer.New(xc)
		}
		d, err := datanode.New(ctx, cfg, st)
		must(t, err)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(rctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("DataNode %s: %v", z, err)
			}
		})
		c.nodes = append(c.nodes, d)
	}
	reg, err := registry.New(st, live)
	must(t, err)
	cl, err := registry.LoadCluster(ctx, st)
	must(t, err)
	c.dn, err = New(Config{Registry: reg, Cluster: cl, Secret: secret, KeyID: 7, Seed: 1})
	must(t, err)
	ecfg := namespace.DefaultConfig()
	ecfg.Superuser = "root"
	ecfg.InlineThreshold = 1000
	ecfg.MinBlockSize = 0
	ecfg.LeaseMonitor = false
	ecfg.DataNodes = c.dn
	c.e, err = namespace.New(st, ecfg)
	must(t, err)
	t.Cleanup(func() { c.e.Close() })
	// The registry judges a DataNode live once it has seen its heartbeat
	// count move: wait for the three.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ts, err := c.dn.ChooseTargets(wctx, 3, 1, namespace.Location{}, nil, nil)
		must(t, err)
		if len(ts) == 3 {
			for _, d := range ts {
				c.zone[d.ID] = d.Zone
			}
			break
		}
		pause(t, wctx)
	}
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func pause(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(5 * time.Millisecond):
	}
}

// retry calls fn until it does not fail with ErrNotYetReplicated, as a
// client backs off.
func retry[T any](t *testing.T, fn func() (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		v, err := fn()
		if !errors.Is(err, namespace.ErrNotYetReplicated) {
			return v, err
		}
		if meta.KindOf(err) != meta.KindBusy {
			t.Fatalf("not yet replicated, but not retryable: %v", err)
		}
		pause(t, ctx)
	}
}

// writeBlocks writes data (from the file's offset 0) to the file's blocks
// as a client does: AddBlock, the pipeline, and the next; it returns the
// last block and the blocks it was given.
func (c *cluster) writeBlocks(t *testing.T, p string, data []byte, bs int, writer namespace.Location, exclude []uint64) (*namespace.BlockRef, []*namespace.LocatedBlock) {
	t.Helper()
	ctx := context.Background()
	var prev *namespace.BlockRef
	var got []*namespace.LocatedBlock
	for off := 0; off < len(data); off += bs {
		lb, err := retry(t, func() (*namespace.LocatedBlock, error) {
			return c.e.AddBlock(ctx, root, p, "w", prev, exclude, writer)
		})
		must(t, err)
		if lb.Offset != int64(off) {
			t.Fatalf("%s: block at offset %d, want %d", p, lb.Offset, off)
		}
		got = append(got, lb)
		b := dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp}
		bw, err := c.xfer.WriteBlock(ctx, b, BlockToken(lb.Token), Targets(lb.Targets), dataxfer.WriteOptions{})
		must(t, err)
		chunk := data[off:min(len(data), off+bs)]
		_, err = bw.Write(chunk)
		must(t, err)
		n, err := bw.Close(ctx)
		must(t, err)
		prev = &namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: n}
	}
	return prev, got
}

func (c *cluster) complete(t *testing.T, p string, last *namespace.BlockRef) *meta.FileStatus {
	t.Helper()
	st, err := retry(t, func() (*meta.FileStatus, error) {
		return c.e.CompleteBlock(context.Background(), root, p, "w", last)
	})
	must(t, err)
	return st
}

// readBack reads every replica of every block of p and compares it with
// data; it returns the located blocks.
func (c *cluster) readBack(t *testing.T, p string, data []byte, reader namespace.Location) *namespace.LocatedBlocks {
	t.Helper()
	ctx := context.Background()
	locs, err := c.e.GetBlockLocations(ctx, root, p, 0, int64(len(data)), reader)
	must(t, err)
	if locs.FileLength != int64(len(data)) || locs.UnderConstruction || !locs.LastBlockComplete {
		t.Fatalf("%s: located %+v", p, locs)
	}
	var off int64
	for _, lb := range locs.Blocks {
		if lb.Offset != off || len(lb.Targets) == 0 || lb.Corrupt {
			t.Fatalf("%s: block %+v at %d", p, lb, off)
		}
		want := data[off : off+lb.NumBytes]
		for _, d := range lb.Targets {
			br, err := c.xfer.ReadBlock(ctx, d.DataAddr, dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: lb.NumBytes},
				BlockToken(lb.Token), 0, lb.NumBytes)
			must(t, err)
			got, err := io.ReadAll(br)
			br.Close()
			must(t, err)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: blk_%d on DataNode %d (zone %s): %d bytes that differ from the %d written", p, lb.ID, d.ID, d.Zone, len(got), len(want))
			}
		}
		off += lb.NumBytes
	}
	if off != int64(len(data)) {
		t.Fatalf("%s: the blocks hold %d bytes, want %d", p, off, len(data))
	}
	return locs
}

func randomBytes(n int, seed uint64) []byte {
	r := mrand.New(mrand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestThreeBlocksOnThreeZones(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	const bs = 64 << 10
	data := randomBytes(2*bs+12345, 1)
	_, err := c.e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: bs, Replication: 3})
	must(t, err)
	last, given := c.writeBlocks(t, "/f", data, bs, namespace.Location{Host: "ha", Zone: "a"}, nil)
	if len(given) != 3 {
		t.Fatalf("%d blocks, want 3", len(given))
	}
	for _, lb := range given {
		zones := map[string]bool{}
		for _, d := range lb.Targets {
			zones[d.Zone] = true
		}
		if len(lb.Targets) != 3 || len(zones) < 2 || lb.Targets[0].Host != "ha" {
			t.Fatalf("blk_%d: pipeline %+v: want 3 DataNodes over at least two zones, the writer's first", lb.ID, lb.Targets)
		}
	}
	// Write is refused for a file in blocks: the client writes to DataNodes.
	err = c.e.Write(ctx, root, "/f", "w", int64(len(data)), []byte("x"))
	if meta.KindOf(err) != meta.KindUnsupported {
		t.Fatalf("write to a file in blocks: %v", err)
	}
	st := c.complete(t, "/f", last)
	if st.Length != int64(len(data)) {
		t.Fatalf("length %d, want %d", st.Length, len(data))
	}
	// A reader in zone b is sent to zone b first.
	locs := c.readBack(t, "/f", data, namespace.Location{Host: "elsewhere", Zone: "b"})
	for _, lb := range locs.Blocks {
		if lb.Targets[0].Zone != "b" {
			t.Fatalf("blk_%d: a reader in zone b is sent first to %+v", lb.ID, lb.Targets[0])
		}
	}
	// A token for another block is refused by the DataNodes.
	b0, b1 := locs.Blocks[0], locs.Blocks[1]
	br, err := c.xfer.ReadBlock(ctx, b0.Targets[0].DataAddr, dataxfer.Block{Pool: b0.Pool, ID: b0.ID, GenStamp: b0.GenStamp, NumBytes: b0.NumBytes},
		BlockToken(b1.Token), 0, b0.NumBytes)
	if err == nil {
		_, err = io.ReadAll(br)
		br.Close()
	}
	if !errors.Is(err, dataxfer.ErrAccessToken) {
		t.Fatalf("read with another block's token: %v, want %v", err, dataxfer.ErrAccessToken)
	}
}

func TestInlineFileGrowsIntoBlocks(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	data := randomBytes(5000, 2)
	_, err := c.e.Create(ctx, root, "/g", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 2})
	must(t, err)
	must(t, c.e.Write(ctx, root, "/g", "w", 0, data[:700]))
	err = c.e.Write(ctx, root, "/g", "w", 700, data[700:1200])
	if meta.KindOf(err) != meta.KindTooLarge {
		t.Fatalf("write past the inline threshold: %v", err)
	}
	// AddBlock moves the file to blocks; the client writes its kept bytes first.
	last, given := c.writeBlocks(t, "/g", data, 4096, namespace.Location{}, nil)
	if len(given) != 2 || len(given[0].Targets) != 2 {
		t.Fatalf("blocks %+v", given)
	}
	if st := c.complete(t, "/g", last); st.Length != int64(len(data)) {
		t.Fatalf("length %d", st.Length)
	}
	c.readBack(t, "/g", data, namespace.Location{})
	// An inline file answers inline.
	_, err = c.e.CreateFile(ctx, root, "/small", meta.CreateOptions{}, []byte("hello"))
	must(t, err)
	locs, err := c.e.GetBlockLocations(ctx, root, "/small", 0, 10, namespace.Location{})
	must(t, err)
	if !locs.Inline || locs.FileLength != 5 || len(locs.Blocks) != 0 {
		t.Fatalf("inline file located as %+v", locs)
	}
}

func TestExcludedDataNode(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	var zoneC uint64
	for id, z := range c.zone {
		if z == "c" {
			zoneC = id
		}
	}
	data := randomBytes(3000, 3)
	_, err := c.e.Create(ctx, root, "/x", meta.CreateOptions{Client: "w", BlockSize: 2048, Replication: 3})
	must(t, err)
	last, given := c.writeBlocks(t, "/x", data, 2048, namespace.Location{Zone: "a"}, []uint64{zoneC})
	for _, lb := range given {
		if len(lb.Targets) != 2 {
			t.Fatalf("blk_%d: %d targets with one of three DataNodes excluded", lb.ID, len(lb.Targets))
		}
		for _, d := range lb.Targets {
			if d.ID == zoneC {
				t.Fatalf("blk_%d: the excluded DataNode %d was chosen", lb.ID, zoneC)
			}
		}
	}
	c.complete(t, "/x", last)
	locs := c.readBack(t, "/x", data, namespace.Location{Zone: "c"})
	for _, lb := range locs.Blocks {
		for _, d := range lb.Targets {
			if d.Zone == "c" {
				t.Fatalf("blk_%d located on the excluded DataNode", lb.ID)
			}
		}
	}
}

func TestReadWhileWritten(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	data := randomBytes(3000, 4)
	_, err := c.e.Create(ctx, root, "/w", meta.CreateOptions{Client: "w", BlockSize: 8192, Replication: 3})
	must(t, err)
	lb, err := c.e.AddBlock(ctx, root, "/w", "w", nil, nil, namespace.Location{Zone: "b"})
	must(t, err)
	b := dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp}
	bw, err := c.xfer.WriteBlock(ctx, b, BlockToken(lb.Token), Targets(lb.Targets), dataxfer.WriteOptions{})
	must(t, err)
	_, err = bw.Write(data[:1000])
	must(t, err)
	must(t, bw.Sync(ctx)) // hsync: every DataNode of the pipeline has the bytes on disk
	must(t, c.e.Fsync(ctx, root, "/w", "w", 1000))
	// The block being written is located on the DataNodes that reported
	// their replica being written, and readable to the committed length.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var locs *namespace.LocatedBlocks
	for {
		locs, err = c.e.GetBlockLocations(ctx, root, "/w", 0, 1<<20, namespace.Location{Zone: "c"})
		must(t, err)
		if locs.LastBlock != nil && len(locs.LastBlock.Targets) == 3 {
			break
		}
		pause(t, wctx)
	}
	if !locs.UnderConstruction || locs.FileLength != 1000 || locs.LastBlockComplete || locs.LastBlock.NumBytes != 1000 ||
		locs.LastBlock.Targets[0].Zone != "c" {
		t.Fatalf("a file being written located as %+v, last %+v", locs, locs.LastBlock)
	}
	lbr := locs.LastBlock
	br, err := c.xfer.ReadBlock(ctx, lbr.Targets[0].DataAddr, dataxfer.Block{Pool: lbr.Pool, ID: lbr.ID, GenStamp: lbr.GenStamp, NumBytes: lbr.NumBytes},
		BlockToken(lbr.Token), 0, 1000)
	must(t, err)
	got, err := io.ReadAll(br)
	br.Close()
	must(t, err)
	if !bytes.Equal(got, data[:1000]) {
		t.Fatalf("read %d bytes of the block being written that differ from the 1000 flushed", len(got))
	}
	_, err = bw.Write(data[1000:])
	must(t, err)
	n, err := bw.Close(ctx)
	must(t, err)
	c.complete(t, "/w", &namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: n})
	c.readBack(t, "/w", data, namespace.Location{})
}

// TestPipelineRecovery: the client drops the last DataNode of a pipeline in
// the middle of a block (as when it fails), gets a new stamp, finishes the
// block on the two others by a streaming recovery and records the new
// pipeline; readers are sent to the two replicas of the new stamp only.
func TestPipelineRecovery(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	data := randomBytes(200_000, 5)
	_, err := c.e.Create(ctx, root, "/r", meta.CreateOptions{Client: "w", BlockSize: 1 << 20, Replication: 3})
	must(t, err)
	lb, err := c.e.AddBlock(ctx, root, "/r", "w", nil, nil, namespace.Location{Zone: "a"})
	must(t, err)
	old := dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp}
	bw, err := c.xfer.WriteBlock(ctx, old, BlockToken(lb.Token), Targets(lb.Targets), dataxfer.WriteOptions{})
	must(t, err)
	_, err = bw.Write(data[:100_000])
	must(t, err)
	must(t, bw.Flush(ctx))
	acked := bw.Acked()
	bw.Abort()
	nb, err := c.e.UpdateBlockForPipeline(ctx, root, "/r", "w", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp})
	must(t, err)
	if nb.GenStamp <= lb.GenStamp {
		t.Fatalf("new stamp %d after %d", nb.GenStamp, lb.GenStamp)
	}
	kept := lb.Targets[:2]
	rb, err := c.xfer.WriteBlock(ctx, old, BlockToken(nb.Token), Targets(kept), dataxfer.WriteOptions{
		Stage: dataxfer.StageStreamingRecovery, Offset: acked, MinBytesRcvd: acked, MaxBytesRcvd: 100_000, LatestGenStamp: nb.GenStamp,
	})
	must(t, err)
	must(t, c.e.UpdatePipeline(ctx, root, "/r", "w", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp},
		namespace.BlockRef{ID: lb.ID, GenStamp: nb.GenStamp, NumBytes: acked}, []uint64{kept[0].ID, kept[1].ID}))
	_, err = rb.Write(data[acked:])
	must(t, err)
	n, err := rb.Close(ctx)
	must(t, err)
	if n != int64(len(data)) {
		t.Fatalf("recovered block of %d bytes, want %d", n, len(data))
	}
	c.complete(t, "/r", &namespace.BlockRef{ID: lb.ID, GenStamp: nb.GenStamp, NumBytes: n})
	locs := c.readBack(t, "/r", data, namespace.Location{})
	got := locs.Blocks[0].Targets
	if len(got) != 2 || locs.Blocks[0].GenStamp != nb.GenStamp {
		t.Fatalf("located on %+v under stamp %d, want the two DataNodes kept under %d", got, locs.Blocks[0].GenStamp, nb.GenStamp)
	}
	for _, d := range got {
		if d.ID == lb.Targets[2].ID {
			t.Fatalf("located on the dropped DataNode %d", d.ID)
		}
	}
}

// TestConcurrentWriters: clients write files at once through the same
// engine and DataNodes.
func TestConcurrentWriters(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	t.Run("writers", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				p := fmt.Sprintf("/c%d", i)
				data := randomBytes(9000+i*1000, uint64(10+i))
				_, err := c.e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 2, CreateParent: true})
				must(t, err)
				last, _ := c.writeBlocks(t, p, data, 4096, namespace.Location{Zone: string(rune('a' + i%3))}, nil)
				c.complete(t, p, last)
				c.readBack(t, p, data, namespace.Location{})
			})
		}
	})
}

// TestAppend: a file whose last block is partial is appended to through a
// PIPELINE_SETUP_APPEND pipeline on that block's replicas, under the stamp
// AppendBlock gives.
func TestAppend(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	data := randomBytes(7000, 6)
	_, err := c.e.Create(ctx, root, "/a", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 3})
	must(t, err)
	last, _ := c.writeBlocks(t, "/a", data[:5000], 4096, namespace.Location{}, nil)
	c.complete(t, "/a", last)
	st, ab, err := c.e.AppendBlock(ctx, root, "/a", "w2", namespace.Location{Zone: "b"})
	must(t, err)
	if !st.UnderConstruction || ab == nil || ab.ID != last.ID || ab.GenStamp <= last.GenStamp || ab.Offset != 4096 || len(ab.Targets) != 3 {
		t.Fatalf("append: %+v, block %+v", st, ab)
	}
	bw, err := c.xfer.WriteBlock(ctx, dataxfer.Block{Pool: ab.Pool, ID: ab.ID, GenStamp: last.GenStamp, NumBytes: ab.NumBytes},
		BlockToken(ab.Token), Targets(ab.Targets), dataxfer.WriteOptions{Append: true, Offset: ab.NumBytes, LatestGenStamp: ab.GenStamp})
	must(t, err)
	_, err = bw.Write(data[5000:])
	must(t, err)
	n, err := bw.Close(ctx)
	must(t, err)
	if n != 7000-4096 {
		t.Fatalf("appended block of %d bytes, want %d", n, 7000-4096)
	}
	st, err = retry(t, func() (*meta.FileStatus, error) {
		return c.e.CompleteBlock(ctx, root, "/a", "w2", &namespace.BlockRef{ID: ab.ID, GenStamp: ab.GenStamp, NumBytes: n})
	})
	must(t, err)
	if st.Length != 7000 {
		t.Fatalf("length %d after append", st.Length)
	}
	c.readBack(t, "/a", data, namespace.Location{})
}
