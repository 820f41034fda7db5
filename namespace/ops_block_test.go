package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// fakeDataNodes is an in-memory DataNodes: three DataNodes (ids 1..3, in
// zones a, b, c), replicas the test reports itself.
type fakeDataNodes struct {
	mu       sync.Mutex
	nodes    []DataNodeInfo
	replicas map[uint64][]ReplicaInfo
	excluded [][]uint64 // the exclude list of every ChooseTargets
}

func newFakeDataNodes(n int) *fakeDataNodes {
	f := &fakeDataNodes{replicas: map[uint64][]ReplicaInfo{}}
	for i := 1; i <= n; i++ {
		f.nodes = append(f.nodes, DataNodeInfo{ID: uint64(i), UUID: fmt.Sprintf("uuid-%d", i),
			DataAddr: fmt.Sprintf("10.0.0.%d:9866", i), HTTPAddr: fmt.Sprintf("10.0.0.%d:9864", i), Host: fmt.Sprintf("h%d", i), Zone: string(rune('a' + i - 1))})
	}
	return f
}

func (f *fakeDataNodes) BlockPool() string { return "BP-test" }

func (f *fakeDataNodes) ChooseTargets(ctx context.Context, n int, blockSize int64, writer Location, exclude, chosen []uint64) ([]DataNodeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.excluded = append(f.excluded, slices.Clone(exclude))
	var out []DataNodeInfo
	for _, d := range f.nodes {
		if len(out) < n && !slices.Contains(exclude, d.ID) && !slices.Contains(chosen, d.ID) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeDataNodes) Replicas(ctx context.Context, blocks []uint64, reader Location) ([][]ReplicaInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]ReplicaInfo, len(blocks))
	for i, b := range blocks {
		for _, r := range f.replicas[b] {
			if r.Node.Zone == reader.Zone {
				out[i] = append([]ReplicaInfo{r}, out[i]...)
			} else {
				out[i] = append(out[i], r)
			}
		}
	}
	return out, nil
}

func (f *fakeDataNodes) Token(user string, block uint64, modes ...TokenMode) BlockToken {
	return BlockToken{Identifier: fmt.Appendf(nil, "%s/%d/%v", user, block, modes), Kind: "HDFS_BLOCK_TOKEN"}
}

// report records that DataNodes nodes hold block b finalized.
func (f *fakeDataNodes) report(b BlockRef, state ReplicaState, nodes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicas[b.ID] = nil
	for _, n := range nodes {
		f.replicas[b.ID] = append(f.replicas[b.ID], ReplicaInfo{Node: f.nodes[n-1], GenStamp: b.GenStamp, Length: b.NumBytes, State: state})
	}
}

func newDNEngine(t *testing.T, dn DataNodes) *Engine {
	t.Helper()
	e, _, err := openEngineDirWith(t.TempDir(), func(c *Config) {
		c.InlineThreshold = 1000
		c.MinBlockSize = 0
		c.DataNodes = dn
		c.LeaseMonitor = false
	})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

func wantNotYet(t *testing.T, err error) {
	t.Helper()
	wantKind(t, err, ErrNotYetReplicated)
	if meta.KindOf(err) != meta.KindBusy {
		t.Fatalf("%v: kind %v, want busy (retryable)", err, meta.KindOf(err))
	}
}

func TestDataNodeModeBlocks(t *testing.T) {
	dn := newFakeDataNodes(3)
	e := newDNEngine(t, dn)
	ctx := context.Background()
	const bs = 4096
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: bs, Replication: 3})
	must(t, err)
	lb, err := e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{Zone: "b"})
	must(t, err)
	if lb.Offset != 0 || lb.GenStamp == 0 || len(lb.Targets) != 3 || lb.Pool != "BP-test" || len(lb.Token.Identifier) == 0 {
		t.Fatalf("first block %+v", lb)
	}
	b0 := BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: bs}
	// The second block waits for a replica of the first.
	_, err = e.AddBlock(ctx, root, "/f", "w", &b0, nil, Location{})
	wantNotYet(t, err)
	dn.report(BlockRef{ID: b0.ID, GenStamp: b0.GenStamp, NumBytes: bs - 1}, ReplicaFinalized, 1)
	_, err = e.AddBlock(ctx, root, "/f", "w", &b0, nil, Location{})
	wantNotYet(t, err) // the wrong length
	dn.report(b0, ReplicaFinalized, 1, 2, 3)
	lb1, err := e.AddBlock(ctx, root, "/f", "w", &b0, []uint64{2}, Location{})
	must(t, err)
	if lb1.Offset != bs || lb1.ID == lb.ID || len(lb1.Targets) != 2 {
		t.Fatalf("second block %+v", lb1)
	}
	for _, d := range lb1.Targets {
		if d.ID == 2 {
			t.Fatalf("excluded DataNode 2 chosen: %+v", lb1.Targets)
		}
	}
	// A DataNode to replace one the pipeline lost: not one it has, nor an excluded one.
	add, err := e.AdditionalDataNode(ctx, root, "/f", "w", BlockRef{ID: lb1.ID}, []uint64{1}, []uint64{3}, 1, Location{})
	must(t, err)
	if len(add.Targets) != 1 || add.Targets[0].ID != 2 || add.ID != lb1.ID {
		t.Fatalf("additional DataNode %+v, want DataNode 2", add)
	}
	_, err = e.AdditionalDataNode(ctx, root, "/f", "w", BlockRef{ID: lb1.ID}, []uint64{1, 2, 3}, nil, 1, Location{})
	wantKind(t, err, ErrNoDataNode)
	// A resent AddBlock answers the same block.
	again, err := e.AddBlock(ctx, root, "/f", "w", &b0, nil, Location{})
	must(t, err)
	if again.ID != lb1.ID {
		t.Fatalf("resent add block: block %d, want %d", again.ID, lb1.ID)
	}
	// Fsync makes the written length visible to readers.
	must(t, e.Fsync(ctx, root, "/f", "w", 100))
	locs, err := e.GetBlockLocations(ctx, root, "/f", 0, 1<<20, Location{})
	must(t, err)
	if !locs.UnderConstruction || locs.FileLength != bs+100 || len(locs.Blocks) != 2 || locs.LastBlockComplete {
		t.Fatalf("locations while written: %+v", locs)
	}
	// A pipeline recovery: new stamp, then the pipeline's outcome.
	nb, err := e.UpdateBlockForPipeline(ctx, root, "/f", "w", BlockRef{ID: lb1.ID, GenStamp: lb1.GenStamp})
	must(t, err)
	if nb.GenStamp <= lb1.GenStamp {
		t.Fatalf("stamp %d after %d", nb.GenStamp, lb1.GenStamp)
	}
	last := BlockRef{ID: nb.ID, GenStamp: nb.GenStamp, NumBytes: 300}
	must(t, e.UpdatePipeline(ctx, root, "/f", "w", BlockRef{ID: lb1.ID, GenStamp: lb1.GenStamp}, last, []uint64{1, 3}))
	// Complete waits for the last block's replica under its new stamp.
	dn.report(BlockRef{ID: lb1.ID, GenStamp: lb1.GenStamp, NumBytes: 300}, ReplicaFinalized, 1)
	_, err = e.CompleteBlock(ctx, root, "/f", "w", &last)
	wantNotYet(t, err)
	dn.report(last, ReplicaFinalized, 1, 3)
	st, err := e.CompleteBlock(ctx, root, "/f", "w", &last)
	must(t, err)
	if st.Length != bs+300 || st.UnderConstruction {
		t.Fatalf("completed: %+v", st)
	}
	locs, err = e.GetBlockLocations(ctx, root, "/f", bs+10, 5, Location{Zone: "c"})
	must(t, err)
	if locs.FileLength != bs+300 || len(locs.Blocks) != 1 || locs.Blocks[0].ID != last.ID || !locs.LastBlockComplete ||
		locs.Blocks[0].Offset != bs || len(locs.Blocks[0].Targets) != 2 || locs.Blocks[0].Targets[0].Zone != "c" {
		t.Fatalf("locations: %+v", locs)
	}
	// The file's bytes are not the engine's: Read and Write say where.
	_, err = e.Read(ctx, root, "/f", 0, 10)
	wantKind(t, err, meta.ErrUnsupported)
	fsckClean(t, e)
	if err := e.Delete(ctx, root, "/f", false); err != nil {
		t.Fatal(err)
	}
	fsckClean(t, e)
}

func TestDataNodeModeInlineToBlocks(t *testing.T) {
	dn := newFakeDataNodes(1)
	e := newDNEngine(t, dn)
	ctx := context.Background()
	must(t, e.Mkdirs(ctx, root, "/q", 0))
	must(t, e.SetQuota(ctx, root, "/q", -1, 1<<20))
	_, err := e.Create(ctx, root, "/q/f", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 1})
	must(t, err)
	must(t, e.Write(ctx, root, "/q/f", "w", 0, make([]byte, 600)))
	err = e.Write(ctx, root, "/q/f", "w", 600, make([]byte, 600))
	wantKind(t, err, meta.ErrTooLarge)
	lb, err := e.AddBlock(ctx, root, "/q/f", "w", nil, nil, Location{})
	must(t, err)
	if lb.Offset != 0 || len(lb.Targets) != 1 {
		t.Fatalf("block 0: %+v", lb)
	}
	err = e.Write(ctx, root, "/q/f", "w", 600, make([]byte, 10))
	wantKind(t, err, meta.ErrUnsupported)
	last := BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: 1200}
	dn.report(last, ReplicaFinalized, 1)
	st, err := e.CompleteBlock(ctx, root, "/q/f", "w", &last)
	must(t, err)
	if st.Length != 1200 {
		t.Fatalf("length %d", st.Length)
	}
	cs, err := e.ContentSummary(ctx, root, "/q")
	must(t, err)
	if cs.SpaceConsumed != 1200 {
		t.Fatalf("space consumed %d, want 1200", cs.SpaceConsumed)
	}
	fsckClean(t, e)
	must(t, e.Delete(ctx, root, "/q/f", false))
	cs, err = e.ContentSummary(ctx, root, "/q")
	must(t, err)
	if cs.SpaceConsumed != 0 {
		t.Fatalf("space consumed after delete %d, want 0", cs.SpaceConsumed)
	}
	// A quota without room for a whole block refuses the block.
	must(t, e.SetQuota(ctx, root, "/q", -1, 4000))
	_, err = e.Create(ctx, root, "/q/g", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 1})
	must(t, err)
	_, err = e.AddBlock(ctx, root, "/q/g", "w", nil, nil, Location{})
	wantKind(t, err, meta.ErrQuota)
}

func TestDataNodeModeRefusals(t *testing.T) {
	dn := newFakeDataNodes(0)
	e := newDNEngine(t, dn)
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096})
	must(t, err)
	_, err = e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	wantKind(t, err, ErrNoDataNode)
	_, err = e.AddBlock(ctx, alice, "/f", "other", nil, nil, Location{})
	if err == nil {
		t.Fatal("another client added a block")
	}
	dn.nodes = newFakeDataNodes(1).nodes
	lb, err := e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	must(t, err)
	// The wrong previous block, the wrong stamp.
	_, err = e.AddBlock(ctx, root, "/f", "w", &BlockRef{ID: lb.ID + 100, GenStamp: lb.GenStamp}, nil, Location{})
	wantKind(t, err, meta.ErrInvalidArgument)
	_, err = e.CompleteBlock(ctx, root, "/f", "w", &BlockRef{ID: lb.ID, GenStamp: lb.GenStamp + 1, NumBytes: 5})
	wantKind(t, err, meta.ErrInvalidArgument)
	// Abandon drops the block; Complete with no block then closes the file empty.
	must(t, e.AbandonBlock(ctx, root, "/f", "w", BlockRef{ID: lb.ID, GenStamp: lb.GenStamp}))
	st, err := e.CompleteBlock(ctx, root, "/f", "w", nil)
	must(t, err)
	if st.Length != 0 {
		t.Fatalf("length %d", st.Length)
	}
	locs, err := e.GetBlockLocations(ctx, root, "/f", 0, 10, Location{})
	must(t, err)
	if locs.LastBlock != nil || len(locs.Blocks) != 0 {
		t.Fatalf("abandoned block still located: %+v", locs)
	}
	fsckClean(t, e)
	// Not in the DataNode mode: the calls say so.
	e2, _ := newEngine(t)
	_, err = e2.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	wantKind(t, err, meta.ErrUnsupported)
	if !errors.Is(err, meta.ErrUnsupported) {
		t.Fatal(err)
	}
}

func TestDataNodeModeLeaseRecovery(t *testing.T) {
	dn := newFakeDataNodes(2)
	e := newDNEngine(t, dn)
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 2})
	must(t, err)
	lb, err := e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	must(t, err)
	// Being written everywhere: recovery needs the DataNodes, the file stays open.
	dn.report(BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: 50}, ReplicaBeingWritten, 1, 2)
	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	err = e.RecoverExpiredLeases(ctx)
	if err == nil {
		t.Fatal("recovered a block only being written")
	}
	dn.report(BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: 70}, ReplicaFinalized, 2)
	must(t, e.RecoverExpiredLeases(ctx))
	st, err := e.Stat(ctx, root, "/f")
	must(t, err)
	if st.Length != 70 || st.UnderConstruction {
		t.Fatalf("after recovery: %+v", st)
	}
}

// fakeRecovery is BlockRecovery over the fake's reported replicas: a
// DataNode answers the replica reported for it, and finishing replaces it
// by a finalized one.
type fakeRecovery struct {
	f        *fakeDataNodes
	down     string // the HTTP address of a DataNode that does not answer
	finished []string
}

func (r *fakeRecovery) find(addr string, b BlockRef) (int, error) {
	if addr == r.down {
		return 0, errors.New("connection refused")
	}
	for i, rep := range r.f.replicas[b.ID] {
		if rep.Node.HTTPAddr == addr && rep.GenStamp == b.GenStamp {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no replica blk_%d_%d", b.ID, b.GenStamp)
}

func (r *fakeRecovery) InitRecovery(ctx context.Context, addr string, b BlockRef, id uint64) (RecoveredReplica, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	i, err := r.find(addr, b)
	if err != nil {
		return RecoveredReplica{}, err
	}
	rep := r.f.replicas[b.ID][i]
	return RecoveredReplica{GenStamp: rep.GenStamp, Length: rep.Length, State: rep.State}, nil
}

func (r *fakeRecovery) FinishRecovery(ctx context.Context, addr string, b BlockRef, id uint64, length int64) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	i, err := r.find(addr, b)
	if err != nil {
		return err
	}
	rep := &r.f.replicas[b.ID][i]
	rep.GenStamp, rep.Length, rep.State = id, length, ReplicaFinalized
	r.finished = append(r.finished, fmt.Sprintf("%s %d %d", addr, id, length))
	return nil
}

func TestDataNodeModeBlockRecovery(t *testing.T) {
	dn := newFakeDataNodes(3)
	rec := &fakeRecovery{f: dn, down: dn.nodes[2].HTTPAddr}
	e, _, err := openEngineDirWith(t.TempDir(), func(c *Config) {
		c.InlineThreshold = 1000
		c.MinBlockSize = 0
		c.DataNodes = dn
		c.BlockRecovery = rec
		c.LeaseMonitor = false
	})
	must(t, err)
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	_, err = e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 3})
	must(t, err)
	lb, err := e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	must(t, err)
	must(t, e.Fsync(ctx, root, "/f", "w", 40))
	// Being written on three DataNodes, at different lengths; the third
	// does not answer.
	dn.mu.Lock()
	for i, l := range []int64{80, 50, 90} {
		dn.replicas[lb.ID] = append(dn.replicas[lb.ID], ReplicaInfo{Node: dn.nodes[i], GenStamp: lb.GenStamp, Length: l, State: ReplicaBeingWritten})
	}
	dn.mu.Unlock()
	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	must(t, e.RecoverExpiredLeases(ctx))
	st, err := e.Stat(ctx, root, "/f")
	must(t, err)
	if st.UnderConstruction || st.Length != 50 {
		t.Fatalf("after recovery: %+v, want closed at the shortest replica's 50 bytes", st)
	}
	id := lb.GenStamp + 1
	want := []string{fmt.Sprintf("%s %d 50", dn.nodes[0].HTTPAddr, id), fmt.Sprintf("%s %d 50", dn.nodes[1].HTTPAddr, id)}
	if !slices.Equal(rec.finished, want) {
		t.Fatalf("finished %q, want %q", rec.finished, want)
	}
	locs, err := e.GetBlockLocations(ctx, root, "/f", 0, 100, Location{})
	must(t, err)
	if len(locs.Blocks) != 1 || locs.Blocks[0].GenStamp != id || len(locs.Blocks[0].Targets) != 2 || !locs.LastBlockComplete {
		t.Fatalf("located after recovery: %+v", locs)
	}
	fsckClean(t, e)
}

func TestDataNodeModeAppend(t *testing.T) {
	dn := newFakeDataNodes(2)
	e := newDNEngine(t, dn)
	ctx := context.Background()
	_, err := e.Create(ctx, root, "/f", meta.CreateOptions{Client: "w", BlockSize: 4096, Replication: 2})
	must(t, err)
	lb, err := e.AddBlock(ctx, root, "/f", "w", nil, nil, Location{})
	must(t, err)
	b0 := BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: 4096}
	dn.report(b0, ReplicaFinalized, 1, 2)
	lb, err = e.AddBlock(ctx, root, "/f", "w", &b0, nil, Location{})
	must(t, err)
	b1 := BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: 100}
	dn.report(b1, ReplicaFinalized, 1, 2)
	_, err = e.CompleteBlock(ctx, root, "/f", "w", &b1)
	must(t, err)

	// The partial last block comes back under a new stamp, on its replicas.
	st, ab, err := e.AppendBlock(ctx, root, "/f", "a", Location{})
	must(t, err)
	if !st.UnderConstruction || ab == nil || ab.ID != b1.ID || ab.GenStamp != b1.GenStamp+1 || ab.NumBytes != 100 ||
		ab.Offset != 4096 || len(ab.Targets) != 2 {
		t.Fatalf("append: %+v, block %+v", st, ab)
	}
	// Lease recovery of an append that wrote nothing restores the block.
	now := time.Now().Add(e.cfg.LeaseHardLimit + time.Minute)
	e.cfg.Now = func() time.Time { return now }
	must(t, e.RecoverExpiredLeases(ctx))
	e.cfg.Now = time.Now
	locs, err := e.GetBlockLocations(ctx, root, "/f", 0, 1<<20, Location{})
	must(t, err)
	if locs.UnderConstruction || locs.FileLength != 4196 || locs.LastBlock.GenStamp != b1.GenStamp || len(locs.LastBlock.Targets) != 2 {
		t.Fatalf("after recovering an empty append: %+v, last %+v", locs, locs.LastBlock)
	}
	// Append again, write 50 bytes, complete.
	_, ab, err = e.AppendBlock(ctx, root, "/f", "a", Location{})
	must(t, err)
	grown := BlockRef{ID: ab.ID, GenStamp: ab.GenStamp, NumBytes: 150}
	dn.report(grown, ReplicaFinalized, 2)
	st, err = e.CompleteBlock(ctx, root, "/f", "a", &grown)
	must(t, err)
	if st.Length != 4246 {
		t.Fatalf("length after append %d, want 4246", st.Length)
	}
	fsckClean(t, e)
	// A file whose last block is full: no block back; the client adds one,
	// naming the full block as the previous.
	must(t, e.Truncate(ctx, root, "/f", 4096))
	err = e.Truncate(ctx, root, "/f", 4000)
	wantKind(t, err, meta.ErrUnsupported) // inside a block
	st, ab, err = e.AppendBlock(ctx, root, "/f", "a", Location{})
	must(t, err)
	if ab != nil || st.Length != 4096 {
		t.Fatalf("append to a file ending on a full block: %+v, %+v", st, ab)
	}
	nb, err := e.AddBlock(ctx, root, "/f", "a", &BlockRef{ID: b0.ID, GenStamp: b0.GenStamp, NumBytes: 4096}, nil, Location{})
	must(t, err)
	if nb.Offset != 4096 {
		t.Fatalf("block after append at %d", nb.Offset)
	}
}
