package dfsio

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/meta"
)

const testPool = "BP-1-127.0.0.1-1"

// tnode is a real DataNode data server: a blocks/local store in a
// temporary directory served by dataxfer on 127.0.0.1.
type tnode struct {
	id       uint64
	store    *local.Store
	srv      *dataxfer.Server
	addr     string
	readAddr string // what locations name for reads (a proxy), if set
}

func (n *tnode) info() DataNodeInfo {
	a := n.addr
	if n.readAddr != "" {
		a = n.readAddr
	}
	return DataNodeInfo{ID: n.id, UUID: fmt.Sprintf("dn-%d", n.id), DataAddr: a, Host: "127.0.0.1"}
}

func (n *tnode) kill() { n.srv.Close() }

// fakeNN is the NameNode of the unit tests: the engine's data-path
// semantics over in-memory files, fed by the DataNodes' Received hooks as
// the engine is by block reports.
type fakeNN struct {
	mu          sync.Mutex
	nodes       []*tnode
	replication int
	nextID      uint64
	files       map[string]*ffile
	reported    map[uint64]map[uint64]blocks.Replica // block -> node -> finalized replica
	calls       []string
	bad         []LocatedBlock
}

type ffile struct {
	inline   []byte
	isBlocks bool
	blocks   []*fblock
	complete bool
}

type fblock struct {
	id, gs uint64
	n      int64
	nodes  []uint64
	done   bool // committed by AddBlock/Complete
}

func newCluster(t *testing.T, k, replication int) *fakeNN {
	t.Helper()
	nn := &fakeNN{replication: replication, nextID: 1000, files: map[string]*ffile{}, reported: map[uint64]map[uint64]blocks.Replica{}}
	for i := range k {
		st, err := local.Open(t.TempDir(), local.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		n := &tnode{id: uint64(i + 1), store: st}
		cfg := dataxfer.DefaultConfig(st)
		cfg.Hooks.Received = func(r blocks.Replica) {
			if r.State != blocks.Finalized {
				return
			}
			nn.mu.Lock()
			m := nn.reported[r.ID.Block]
			if m == nil {
				m = map[uint64]blocks.Replica{}
				nn.reported[r.ID.Block] = m
			}
			m[n.id] = r
			nn.mu.Unlock()
		}
		n.srv, err = dataxfer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n.addr = ln.Addr().String()
		done := make(chan struct{})
		go func() { n.srv.Serve(ln); close(done) }()
		t.Cleanup(func() {
			n.srv.Close()
			<-done
			st.Close()
		})
		nn.nodes = append(nn.nodes, n)
	}
	return nn
}

func (nn *fakeNN) create(path string) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.files[path] = &ffile{}
}

func (nn *fakeNN) called(format string, args ...any) {
	nn.calls = append(nn.calls, fmt.Sprintf(format, args...))
}

func (nn *fakeNN) callsOf(prefix string) []string {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var out []string
	for _, c := range nn.calls {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			out = append(out, c)
		}
	}
	return out
}

func notYet(path string, b BlockRef) error {
	return meta.Errorf("complete", path, meta.ErrBusy, "blk_%d_%d has no reported replica of %d bytes yet", b.ID, b.GenStamp, b.NumBytes)
}

// last checks that ref names the file's block being written.
func (f *ffile) last(path string, ref BlockRef) (*fblock, error) {
	if len(f.blocks) == 0 || f.blocks[len(f.blocks)-1].done {
		return nil, fmt.Errorf("%s: no block being written", path)
	}
	b := f.blocks[len(f.blocks)-1]
	if b.id != ref.ID || b.gs != ref.GenStamp {
		return nil, fmt.Errorf("%s: blk_%d_%d is not the last block blk_%d_%d", path, ref.ID, ref.GenStamp, b.id, b.gs)
	}
	return b, nil
}

func (nn *fakeNN) commit(path string, f *ffile, ref *BlockRef) error {
	if ref == nil {
		if len(f.blocks) > 0 && !f.blocks[len(f.blocks)-1].done {
			return fmt.Errorf("%s: name the block being written", path)
		}
		return nil
	}
	if n := len(f.blocks); n > 0 && f.blocks[n-1].done && f.blocks[n-1].id == ref.ID {
		return nil // after an abandoned block, the client names the last one again
	}
	b, err := f.last(path, *ref)
	if err != nil {
		return err
	}
	r, ok := nn.anyReplica(b.id, b.gs, ref.NumBytes)
	if !ok {
		return notYet(path, *ref)
	}
	_ = r
	b.n, b.done = ref.NumBytes, true
	return nil
}

func (nn *fakeNN) anyReplica(id, gs uint64, n int64) (blocks.Replica, bool) {
	for _, r := range nn.reported[id] {
		if r.ID.GenStamp == gs && r.Length == n {
			return r, true
		}
	}
	return blocks.Replica{}, false
}

func (nn *fakeNN) choose(n int, exclude, chosen []uint64) []DataNodeInfo {
	var out []DataNodeInfo
	for _, d := range nn.nodes {
		if len(out) == n {
			break
		}
		if !slices.Contains(exclude, d.id) && !slices.Contains(chosen, d.id) {
			out = append(out, d.info())
		}
	}
	return out
}

func (nn *fakeNN) located(b *fblock, off int64, targets []DataNodeInfo) *LocatedBlock {
	return &LocatedBlock{Pool: testPool, ID: b.id, GenStamp: b.gs, NumBytes: b.n, Offset: off, Targets: targets}
}

func (nn *fakeNN) AddBlock(ctx context.Context, path, client string, previous *BlockRef, exclude []uint64, writer Location) (*LocatedBlock, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("add %v exclude %v", previous, exclude)
	f := nn.files[path]
	if !f.isBlocks {
		f.inline, f.isBlocks = nil, true
	}
	if err := nn.commit(path, f, previous); err != nil {
		return nil, err
	}
	var off int64
	for _, b := range f.blocks {
		off += b.n
	}
	t := nn.choose(nn.replication, exclude, nil)
	nn.nextID++
	b := &fblock{id: nn.nextID, gs: 1}
	for _, d := range t {
		b.nodes = append(b.nodes, d.ID)
	}
	f.blocks = append(f.blocks, b)
	return nn.located(b, off, t), nil
}

func (nn *fakeNN) CompleteBlock(ctx context.Context, path, client string, last *BlockRef) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("complete %v", last)
	f := nn.files[path]
	if err := nn.commit(path, f, last); err != nil {
		return err
	}
	f.complete = true
	return nil
}

func (nn *fakeNN) GetBlockLocations(ctx context.Context, path string, offset, length int64, reader Location) (*LocatedBlocks, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("locate %d %d", offset, length)
	f := nn.files[path]
	if f == nil {
		return nil, fmt.Errorf("%s: no such file", path)
	}
	if !f.isBlocks {
		return &LocatedBlocks{FileLength: int64(len(f.inline)), Inline: true}, nil
	}
	out := &LocatedBlocks{UnderConstruction: !f.complete}
	var off int64
	for i, b := range f.blocks {
		var t []DataNodeInfo
		for _, d := range nn.nodes {
			r, ok := nn.reported[b.id][d.id]
			if ok && r.ID.GenStamp == b.gs || !b.done && slices.Contains(b.nodes, d.id) {
				t = append(t, d.info())
			}
		}
		lb := nn.located(b, off, t)
		if off+b.n > offset && off < offset+length {
			out.Blocks = append(out.Blocks, *lb)
		}
		if i == len(f.blocks)-1 {
			out.LastBlock, out.LastBlockComplete = lb, b.done
		}
		off += b.n
	}
	out.FileLength = off
	return out, nil
}

func (nn *fakeNN) UpdateBlockForPipeline(ctx context.Context, path, client string, block BlockRef) (*LocatedBlock, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("updateblock %v", block)
	b, err := nn.files[path].last(path, block)
	if err != nil {
		return nil, err
	}
	b.gs++
	return nn.located(b, 0, nil), nil
}

func (nn *fakeNN) UpdatePipeline(ctx context.Context, path, client string, old, updated BlockRef, nodes []uint64) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("updatepipeline %v %v %v", old, updated, nodes)
	b, err := nn.files[path].last(path, updated)
	if err != nil {
		return err
	}
	b.nodes, b.n = slices.Clone(nodes), max(b.n, updated.NumBytes)
	return nil
}

func (nn *fakeNN) AbandonBlock(ctx context.Context, path, client string, block BlockRef) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("abandon %v", block)
	f := nn.files[path]
	if _, err := f.last(path, block); err != nil {
		return err
	}
	f.blocks = f.blocks[:len(f.blocks)-1]
	return nil
}

func (nn *fakeNN) Fsync(ctx context.Context, path, client string, n int64) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("fsync %d", n)
	f := nn.files[path]
	if len(f.blocks) > 0 && !f.blocks[len(f.blocks)-1].done {
		b := f.blocks[len(f.blocks)-1]
		b.n = max(b.n, n)
	}
	return nil
}

func (nn *fakeNN) AdditionalDataNode(ctx context.Context, path, client string, block BlockRef, existing, exclude []uint64, n int, writer Location) (*LocatedBlock, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("additional %v %v %v", block, existing, exclude)
	b, err := nn.files[path].last(path, block)
	if err != nil {
		return nil, err
	}
	t := nn.choose(n, exclude, existing)
	if len(t) == 0 {
		return nil, meta.Errorf("get additional datanode", path, meta.ErrBusy, "no DataNode")
	}
	return nn.located(b, 0, t), nil
}

func (nn *fakeNN) ReportBadBlocks(ctx context.Context, bl []LocatedBlock) error {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	nn.called("reportbad %d", len(bl))
	nn.bad = append(nn.bad, bl...)
	return nil
}

// inlineWrite is the NameNode's Write of an inline file.
func (nn *fakeNN) inlineWrite(path string) func(context.Context, []byte) error {
	return func(_ context.Context, p []byte) error {
		nn.mu.Lock()
		defer nn.mu.Unlock()
		f := nn.files[path]
		if f.isBlocks {
			return fmt.Errorf("%s: has blocks", path)
		}
		f.inline = append(f.inline, p...)
		return nil
	}
}

// storedBytes reads a replica straight from a node's store.
func storedBytes(t *testing.T, n *tnode, id blocks.ID) []byte {
	t.Helper()
	rd, err := n.store.Read(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatalf("store read %s at node %d: %v", id, n.id, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("store read %s at node %d: %v", id, n.id, err)
	}
	return b
}

// appendFile reopens a closed file for appending, as the engine's
// AppendBlock does: a partial last block gets a new stamp and is located
// on the DataNodes that hold it under the previous one.
func (nn *fakeNN) appendFile(path string) *AppendConfig {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	f := nn.files[path]
	f.complete = false
	if len(f.blocks) == 0 {
		return &AppendConfig{}
	}
	var off int64
	for _, b := range f.blocks[:len(f.blocks)-1] {
		off += b.n
	}
	b := f.blocks[len(f.blocks)-1]
	if b.n == testBlockSize {
		return &AppendConfig{Previous: &BlockRef{ID: b.id, GenStamp: b.gs, NumBytes: b.n}}
	}
	var t []DataNodeInfo
	for _, d := range nn.nodes {
		if r, ok := nn.reported[b.id][d.id]; ok && r.ID.GenStamp == b.gs {
			t = append(t, d.info())
		}
	}
	b.gs++
	b.done = false
	b.nodes = nil
	for _, d := range t {
		b.nodes = append(b.nodes, d.ID)
	}
	return &AppendConfig{Last: nn.located(b, off, t)}
}
