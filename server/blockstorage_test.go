package server

import (
	"bytes"
	"context"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/datanode"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dfsio"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// startDataNodes runs n DataNodes (zones z0, z1, ...; hosts h0, h1, ...) on
// the PostgreSQL database db, as `nimbus datanode` runs them: serving the
// data transfer protocol with block tokens checked under the cluster
// secret recorded there. It returns a function per DataNode that stops it
// (at most once; the test's cleanup stops the others).
func startDataNodes(t *testing.T, db string, n int, live registry.Config) []func() {
	t.Helper()
	ctx := context.Background()
	st, err := pgstore.Open(ctx, db, pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var stops []func()
	for i := range n {
		cfg := datanode.DefaultConfig()
		cfg.Dir = t.TempDir()
		cfg.Zone, cfg.Host = "z"+string(rune('0'+i)), "h"+string(rune('0'+i))
		cfg.DataAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Liveness = live
		d, err := datanode.New(ctx, cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(rctx) }()
		stop := sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("DataNode %d: %v", i, err)
			}
		})
		t.Cleanup(stop)
		stops = append(stops, stop)
	}
	return stops
}

// busyRetry calls fn until it answers anything but a busy error (a block
// with no reported replica yet, no DataNode live yet), as a client backs
// off.
func busyRetry[T any](t *testing.T, fn func() (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		v, err := fn()
		if meta.KindOf(err) != meta.KindBusy {
			return v, err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still busy after a minute: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestDataNodeModeOverRPC: a server with --block-storage datanodes on
// PostgreSQL and three DataNodes on the same database; a client over RPC
// creates a file, asks for blocks (AddBlock), writes each through its
// pipeline of DataNodes (dataxfer), commits the file (CompleteBlock,
// retried while the DataNodes have not reported the last block), locates
// the blocks (GetBlockLocations) and reads every replica back. A small
// file stays inline and is located as such; the same calls on a server in
// the local mode fail naming the path.
// startDataNodeMode starts a server with block storage on DataNodes on a
// fresh PostgreSQL database, and three DataNodes there.
func startDataNodeMode(t *testing.T, set ...func(*Config)) *Server {
	t.Helper()
	db := pgtest.DB(t)
	live := registry.Config{Heartbeat: 10 * time.Millisecond, StaleAfter: time.Minute, DeadAfter: 2 * time.Minute, Batch: 100}
	cfg := testConfig(t)
	cfg.StoreURL = db
	cfg.BlockStorage = BlockStorageDataNodes
	cfg.DataNodeLiveness = live
	cfg.Namespace.Superuser = "root"
	cfg.Namespace.InlineThreshold = 1000
	cfg.Namespace.MinBlockSize = 0
	for _, f := range set {
		f(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	startDataNodes(t, db, 3, live)

	return srv
}

func TestDataNodeModeOverRPC(t *testing.T) {
	srv := startDataNodeMode(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	writer := namespace.Location{Host: "h1", Zone: "z1"}
	const bs = 64 << 10
	data := make([]byte, 2*bs+4321)
	r := mrand.New(mrand.NewPCG(7, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	const p = "/dn/f"
	if _, err := c.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: bs, Replication: 3, CreateParent: true, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	// The first block: until the server has seen the three DataNodes'
	// heartbeats move, it offers fewer; such a block is abandoned.
	var lb *namespace.LocatedBlock
	for {
		lb, err = busyRetry(t, func() (*namespace.LocatedBlock, error) {
			return c.AddBlock(ctx, root, p, "w", nil, nil, writer)
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(lb.Targets) == 3 {
			break
		}
		if err := c.AbandonBlock(ctx, root, p, "w", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	xfer := dataxfer.Client{Name: "w"}
	var prev *namespace.BlockRef
	for off := 0; off < len(data); off += bs {
		if prev != nil {
			lb, err = busyRetry(t, func() (*namespace.LocatedBlock, error) {
				return c.AddBlock(ctx, root, p, "w", prev, nil, writer)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if lb.Offset != int64(off) || len(lb.Targets) != 3 || lb.Targets[0].Host != "h1" || len(lb.Token.Password) == 0 {
			t.Fatalf("block at %d: %+v: want offset %d, 3 DataNodes the writer's first, a token", off, lb, off)
		}
		bw, err := xfer.WriteBlock(ctx, dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp},
			datapath.BlockToken(lb.Token), datapath.Targets(lb.Targets), dataxfer.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(data[off:min(len(data), off+bs)]); err != nil {
			t.Fatal(err)
		}
		n, err := bw.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		prev = &namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: n}
	}
	st, err := busyRetry(t, func() (*meta.FileStatus, error) {
		return c.CompleteBlock(ctx, root, p, "w", prev)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Length != int64(len(data)) || st.UnderConstruction {
		t.Fatalf("completed: %+v, want %d bytes, closed", st, len(data))
	}
	// The file completed once one replica of its last block was reported;
	// the others' reports follow: locate until every block lists three.
	var locs *namespace.LocatedBlocks
	for deadline := time.Now().Add(time.Minute); ; {
		locs, err = c.GetBlockLocations(ctx, root, p, 0, int64(len(data)), namespace.Location{Host: "h2", Zone: "z2"})
		if err != nil {
			t.Fatal(err)
		}
		all := true
		for _, b := range locs.Blocks {
			all = all && len(b.Targets) == 3
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blocks not all reported on three DataNodes after a minute: %+v", locs.Blocks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if locs.FileLength != int64(len(data)) || locs.UnderConstruction || !locs.LastBlockComplete || locs.Inline ||
		len(locs.Blocks) != 3 || locs.LastBlock == nil || locs.LastBlock.ID != prev.ID {
		t.Fatalf("located %+v", locs)
	}
	var off int64
	for _, b := range locs.Blocks {
		if b.Offset != off || len(b.Targets) == 0 || b.Corrupt {
			t.Fatalf("block %+v at %d", b, off)
		}
		if b.Targets[0].Zone != "z2" {
			t.Fatalf("blk_%d: a reader in z2 is sent first to %+v", b.ID, b.Targets[0])
		}
		for _, d := range b.Targets {
			br, err := xfer.ReadBlock(ctx, d.DataAddr, dataxfer.Block{Pool: b.Pool, ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes},
				datapath.BlockToken(b.Token), 0, b.NumBytes)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(br)
			br.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[off:off+b.NumBytes]) {
				t.Fatalf("blk_%d on %s: %d bytes that differ from the %d written", b.ID, d.DataAddr, len(got), b.NumBytes)
			}
		}
		off += b.NumBytes
	}
	if off != int64(len(data)) {
		t.Fatalf("the blocks hold %d bytes, want %d", off, len(data))
	}

	// The pipeline-recovery calls, on a block of /dn/g that no DataNode
	// holds (they change rows only): a new stamp, a DataNode to replace
	// one lost, the new pipeline recorded, an hflush length, the block
	// abandoned and the empty file closed.
	const g = "/dn/g"
	if _, err := c.Create(ctx, root, g, meta.CreateOptions{Client: "w", BlockSize: bs, Replication: 3, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	gb, err := busyRetry(t, func() (*namespace.LocatedBlock, error) { return c.AddBlock(ctx, root, g, "w", nil, nil, writer) })
	if err != nil || len(gb.Targets) != 3 {
		t.Fatalf("%s: AddBlock %+v, %v", g, gb, err)
	}
	old := namespace.BlockRef{ID: gb.ID, GenStamp: gb.GenStamp}
	nb, err := c.UpdateBlockForPipeline(ctx, root, g, "w", old)
	if err != nil || nb.ID != gb.ID || nb.GenStamp <= gb.GenStamp || len(nb.Token.Password) == 0 {
		t.Fatalf("%s: UpdateBlockForPipeline %+v, %v", g, nb, err)
	}
	updated := namespace.BlockRef{ID: nb.ID, GenStamp: nb.GenStamp}
	kept := []uint64{gb.Targets[0].ID, gb.Targets[1].ID}
	add, err := c.AdditionalDataNode(ctx, root, g, "w", updated, kept, nil, 1, writer)
	if err != nil || len(add.Targets) != 1 || add.Targets[0].ID != gb.Targets[2].ID {
		t.Fatalf("%s: AdditionalDataNode besides %v: %+v, %v; want DataNode %d", g, kept, add, err, gb.Targets[2].ID)
	}
	if err := c.UpdatePipeline(ctx, root, g, "w", old, updated, append(kept, add.Targets[0].ID)); err != nil {
		t.Fatal(err)
	}
	if err := c.Fsync(ctx, root, g, "w", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdatePipeline(ctx, root, g, "w", updated, old, kept); meta.KindOf(err) != meta.KindInvalidArgument {
		t.Fatalf("%s: UpdatePipeline back to an older stamp: %v", g, err)
	}
	if err := c.AbandonBlock(ctx, root, g, "w", updated); err != nil {
		t.Fatal(err)
	}
	if st, err := c.CompleteBlock(ctx, root, g, "w", nil); err != nil || st.Length != 0 {
		t.Fatalf("%s: completed %+v, %v", g, st, err)
	}

	// Appending to /dn/f reopens its partial last block under a new stamp
	// on the DataNodes holding it.
	ast, ab, err := c.AppendBlock(ctx, root, p, "a", writer)
	if err != nil {
		t.Fatal(err)
	}
	if ast == nil || !ast.UnderConstruction || ab == nil || ab.ID != prev.ID || ab.GenStamp <= prev.GenStamp ||
		ab.NumBytes != prev.NumBytes || ab.Offset != 2*bs || len(ab.Targets) != 3 {
		t.Fatalf("AppendBlock: %+v %+v, want blk_%d at %d under a stamp above %d", ast, ab, prev.ID, 2*bs, prev.GenStamp)
	}

	// A small file keeps its bytes in the store.
	if _, err := meta.CreateFile(ctx, c, root, "/dn/small", meta.CreateOptions{Client: "w", Perm: 0o644}, []byte("inline")); err != nil {
		t.Fatal(err)
	}
	if l, err := c.GetBlockLocations(ctx, root, "/dn/small", 0, 100, writer); err != nil || !l.Inline || l.FileLength != 6 {
		t.Fatalf("small file located %+v, %v", l, err)
	}
}

// TestLocalModeRefusesBlockCalls: the data-path calls on a server keeping
// blocks itself fail, naming the path.
func TestLocalModeRefusesBlockCalls(t *testing.T) {
	cfg := testConfig(t)
	cfg.Namespace.Superuser = "root"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	if _, err := c.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	_, err = c.AddBlock(ctx, root, "/f", "w", nil, nil, namespace.Location{})
	if err == nil || meta.KindOf(err) == meta.KindBusy || !strings.Contains(err.Error(), "/f") {
		t.Fatalf("AddBlock on a local-mode server: %v", err)
	}
}

// TestBlockStorageConfig: datanodes on the embedded store, or an unknown
// block storage, is refused at start.
func TestBlockStorageConfig(t *testing.T) {
	for _, bs := range []string{BlockStorageDataNodes, "tape"} {
		cfg := testConfig(t)
		cfg.BlockStorage = bs
		srv, err := New(cfg)
		if err == nil {
			srv.Stop(context.Background())
			t.Fatalf("block storage %q on the embedded store: started", bs)
		}
		if !strings.Contains(err.Error(), "block storage") {
			t.Fatalf("block storage %q: %v", bs, err)
		}
	}
}

// TestDFSIOOverRPC: package dfsio's streams with the client as their
// NameNode (Client.NameNode): a file of three blocks and a bit, hflushed
// midway, written through DataNode pipelines and read back from the
// DataNodes, against a server with block storage on DataNodes.
func TestDFSIOOverRPC(t *testing.T) {
	srv := startDataNodeMode(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	nn := c.NameNode(root)
	const bs = 64 << 10
	data := make([]byte, 3*bs+999)
	r := mrand.New(mrand.NewPCG(11, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	const p = "/io/f"
	if _, err := c.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: bs, Replication: 3, CreateParent: true, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	// The DataNodes are live for the server once it has seen their
	// heartbeats move: until then a pipeline may be short.
	for {
		lb, err := busyRetry(t, func() (*namespace.LocatedBlock, error) {
			return c.AddBlock(ctx, root, p, "w", nil, nil, namespace.Location{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AbandonBlock(ctx, root, p, "w", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp}); err != nil {
			t.Fatal(err)
		}
		if len(lb.Targets) == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, err := dfsio.Create(ctx, dfsio.WriterConfig{NameNode: nn, Data: &dataxfer.Client{Name: "w"}, Path: p, Client: "w",
		Writer: dfsio.Location{Host: "h0", Zone: "z0"}, BlockSize: bs, Replication: 3})
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if _, err := out.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	if err := out.Hflush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stat(ctx, root, p)
	if err != nil || st.Length != int64(len(data)) || st.UnderConstruction {
		t.Fatalf("%s after close: %+v, %v; want %d bytes, closed", p, st, err, len(data))
	}
	in, err := dfsio.Open(ctx, dfsio.ReaderConfig{NameNode: nn, Data: &dataxfer.Client{Name: "r"}, Path: p, Reader: dfsio.Location{Host: "h2", Zone: "z2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	got, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%s: read %d bytes that differ from the %d written", p, len(got), len(data))
	}
	if err := nn.ReportBadBlocks(ctx, nil); meta.KindOf(err) != meta.KindUnsupported {
		t.Fatalf("ReportBadBlocks: %v", err)
	}
}

// TestLeaseRecoveryOnDataNodes: a writer stops in the middle of a block,
// its replicas being written on three DataNodes; past the lease hard
// limit the server's lease monitor recovers the file by block recovery
// over the DataNodes' commands (each replica's writer stopped, all
// finalized at the length they hold under a new stamp) and closes it, and
// a reader gets the bytes the writer had flushed.
func TestLeaseRecoveryOnDataNodes(t *testing.T) {
	srv := startDataNodeMode(t, func(cfg *Config) {
		cfg.Namespace.LeaseSoftLimit = 200 * time.Millisecond
		cfg.Namespace.LeaseHardLimit = 500 * time.Millisecond
		cfg.Namespace.LeaseCheckInterval = 50 * time.Millisecond
	})
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	const p = "/rec/f"
	if _, err := c.Create(ctx, root, p, meta.CreateOptions{Client: "gone", BlockSize: 1 << 20, Replication: 3, CreateParent: true, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	var lb *namespace.LocatedBlock
	for {
		lb, err = busyRetry(t, func() (*namespace.LocatedBlock, error) {
			return c.AddBlock(ctx, root, p, "gone", nil, nil, namespace.Location{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(lb.Targets) == 3 {
			break
		}
		if err := c.AbandonBlock(ctx, root, p, "gone", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	data := make([]byte, 12345)
	r := mrand.New(mrand.NewPCG(13, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	bw, err := (&dataxfer.Client{Name: "gone"}).WriteBlock(ctx, dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp},
		datapath.BlockToken(lb.Token), datapath.Targets(lb.Targets), dataxfer.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The writer goes silent: no renewal, no close. The recovery stops
	// its pipeline; its Close then fails, which is the point.
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, _ = bw.Close(cctx)
	}()
	deadline := time.Now().Add(time.Minute)
	var st *meta.FileStatus
	for {
		st, err = c.Stat(ctx, root, p)
		if err != nil {
			t.Fatal(err)
		}
		if !st.UnderConstruction {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still open a minute after its writer went silent", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Length != int64(len(data)) {
		t.Fatalf("%s recovered at %d bytes, want the %d flushed", p, st.Length, len(data))
	}
	locs, err := c.GetBlockLocations(ctx, root, p, 0, st.Length, namespace.Location{})
	if err != nil {
		t.Fatal(err)
	}
	if len(locs.Blocks) != 1 || locs.Blocks[0].GenStamp <= lb.GenStamp || len(locs.Blocks[0].Targets) == 0 {
		t.Fatalf("recovered blocks %+v: want one under a stamp above %d", locs.Blocks, lb.GenStamp)
	}
	b := locs.Blocks[0]
	br, err := (&dataxfer.Client{Name: "r"}).ReadBlock(ctx, b.Targets[0].DataAddr, dataxfer.Block{Pool: b.Pool, ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes},
		datapath.BlockToken(b.Token), 0, b.NumBytes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	br.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
}
