package maintain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath"
	"github.com/nimbus-fs/nimbus/datapath/maintain"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pebblestore"
)

var root = meta.User{Name: "root"}

// clock is the maintainer's and its registry's clock: it stands still
// unless a test moves it, so a DataNode seen beating once stays live and
// one that stopped is judged dead only when the test says so.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// cluster: a store, four DataNodes serving the data transfer protocol and
// their commands (zones a, b, c, a), an engine in the DataNode mode and a
// Maintainer over a registry on the fake clock.
type cluster struct {
	st    store.Store
	e     *namespace.Engine
	nodes []*datanode.DataNode
	dirs  []string
	stop  []func()
	reg   *registry.Registry
	clk   *clock
	m     *maintain.Maintainer
	xfer  dataxfer.Client
	prom  *prometheus.Registry
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	ctx := context.Background()
	opts := pebblestore.DefaultOptions()
	opts.CacheSize, opts.MemTableSize = 8<<20, 4<<20
	st, err := pebblestore.Open(t.TempDir(), opts)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	secret, err := clusterauth.LoadSecret(ctx, st)
	must(t, err)
	live := registry.Config{Heartbeat: 10 * time.Millisecond, StaleAfter: time.Minute, DeadAfter: 2 * time.Minute, Batch: 100}
	c := &cluster{st: st, clk: &clock{}, xfer: dataxfer.Client{Name: "test-client"}, prom: prometheus.NewRegistry()}
	c.clk.ns.Store(time.Now().UnixNano())
	for i, z := range []string{"a", "b", "c", "a"} {
		cfg := datanode.DefaultConfig()
		cfg.Dir = t.TempDir()
		cfg.Zone, cfg.Host = z, "h"+string(rune('0'+i))
		cfg.DataAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
		cfg.Liveness = live
		cfg.NewDataServer = func(env datanode.DataServerEnv) (datanode.DataServer, error) {
			xc := dataxfer.DefaultConfig(env.Store)
			xc.Tokens = blocktoken.NewManager([32]byte(secret), 0, nil)
			return dataxfer.New(xc)
		}
		d, err := datanode.New(ctx, cfg, st)
		must(t, err)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.Run(rctx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("DataNode %d: %v", i, err)
				}
			})
		}
		t.Cleanup(stop)
		c.nodes = append(c.nodes, d)
		c.dirs = append(c.dirs, cfg.Dir)
		c.stop = append(c.stop, stop)
	}
	reg, err := registry.New(st, live)
	must(t, err)
	cl, err := registry.LoadCluster(ctx, st)
	must(t, err)
	dn, err := datapath.New(datapath.Config{Registry: reg, Cluster: cl, Secret: [32]byte(secret), KeyID: 7, Seed: 1})
	must(t, err)
	ecfg := namespace.DefaultConfig()
	ecfg.Superuser = "root"
	ecfg.InlineThreshold = 100
	ecfg.MinBlockSize = 0
	ecfg.LeaseMonitor = false
	ecfg.DataNodes = dn
	c.e, err = namespace.New(st, ecfg)
	must(t, err)
	t.Cleanup(func() { c.e.Close() })

	mlive := live
	mlive.Now = c.clk.now
	c.reg, err = registry.New(st, mlive)
	must(t, err)
	key, err := clusterauth.New(secret, nil)
	must(t, err)
	mc := maintain.DefaultConfig()
	mc.Store, mc.Registry, mc.Commands = st, c.reg, &command.Client{Key: key}
	mc.Now, mc.Registerer, mc.Seed = c.clk.now, c.prom, 1
	c.m, err = maintain.New(mc)
	must(t, err)
	c.waitLive(t, 4)
	eventually(t, "the engine sees four DataNodes", func() bool {
		ts, err := dn.ChooseTargets(ctx, 4, 1, namespace.Location{}, nil, nil)
		must(t, err)
		return len(ts) == 4
	})
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds (a minute at most: the DataNodes'
// reports arrive in their own time).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLive waits until the maintainer's registry judges n DataNodes live.
func (c *cluster) waitLive(t *testing.T, n int) {
	t.Helper()
	eventually(t, "DataNodes live", func() bool {
		nodes, err := c.reg.DataNodes(context.Background())
		must(t, err)
		live := 0
		for _, d := range nodes {
			if d.Liveness == registry.Live {
				live++
			}
		}
		return live == n
	})
}

// settle runs rounds until cond holds.
func (c *cluster) settle(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() bool {
		_, err := c.m.Round(context.Background())
		must(t, err)
		return cond()
	})
}

// write creates p with replication repl and writes n bytes in blocks of bs.
func (c *cluster) write(t *testing.T, p string, n, bs int, repl uint16) []uint64 {
	t.Helper()
	return c.writeEx(t, p, n, bs, repl, nil)
}

// writeEx is write with DataNodes excluded from the pipelines.
func (c *cluster) writeEx(t *testing.T, p string, n, bs int, repl uint16, exclude []uint64) []uint64 {
	t.Helper()
	ctx := context.Background()
	_, err := c.e.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: int64(bs), Replication: repl})
	must(t, err)
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var prev *namespace.BlockRef
	var ids []uint64
	for off := 0; off < n; off += bs {
		lb, err := retry(t, func() (*namespace.LocatedBlock, error) {
			return c.e.AddBlock(ctx, root, p, "w", prev, exclude, namespace.Location{})
		})
		must(t, err)
		ids = append(ids, lb.ID)
		bw, err := c.xfer.WriteBlock(ctx, dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp}, datapath.BlockToken(lb.Token), datapath.Targets(lb.Targets), dataxfer.WriteOptions{})
		must(t, err)
		_, err = bw.Write(data[off:min(n, off+bs)])
		must(t, err)
		got, err := bw.Close(ctx)
		must(t, err)
		prev = &namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: got}
	}
	_, err = retry(t, func() (*meta.FileStatus, error) { return c.e.CompleteBlock(ctx, root, p, "w", prev) })
	must(t, err)
	return ids
}

func retry[T any](t *testing.T, fn func() (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := fn()
		if !errors.Is(err, namespace.ErrNotYetReplicated) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replicas returns the finalized replicas of block by DataNode id, with
// the zones of their DataNodes.
func (c *cluster) replicas(t *testing.T, block uint64) (map[uint64]store.ReplicaState, map[string]bool) {
	t.Helper()
	ls, err := c.reg.Replicas(context.Background(), block)
	must(t, err)
	out, zones := map[uint64]store.ReplicaState{}, map[string]bool{}
	for _, l := range ls {
		out[l.Node.ID] = l.Replica.State
		if l.Replica.State == store.ReplicaFinalized && l.Node.Liveness != registry.Dead {
			zones[l.Node.Zone] = true
		}
	}
	return out, zones
}

func (c *cluster) liveGood(t *testing.T, block uint64, not uint64) (int, int) {
	reps, zones := c.replicas(t, block)
	n := 0
	for id, s := range reps {
		if s == store.ReplicaFinalized && id != not {
			n++
		}
	}
	return n, len(zones)
}

func TestDeadDataNodeReplaced(t *testing.T) {
	c := newCluster(t)
	ids := c.write(t, "/f", 5000, 2048, 3)
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.Blocks != 3 || rep.Healthy != 3 || rep.Replicated != 0 {
		t.Fatalf("after the write: %+v", rep)
	}
	// Kill a DataNode holding blk 0 and let the registry judge it dead.
	reps, _ := c.replicas(t, ids[0])
	victim := -1
	for i, d := range c.nodes {
		if _, ok := reps[d.ID()]; ok {
			victim = i
			break
		}
	}
	dead := c.nodes[victim].ID()
	c.stop[victim]()
	_, err = c.reg.DataNodes(context.Background()) // its last beat seen
	must(t, err)
	c.clk.advance(3 * time.Minute)
	c.waitLive(t, 3)
	rep, err = c.m.Round(context.Background())
	must(t, err)
	if rep.UnderReplicated == 0 || rep.Replicated == 0 || rep.BytesMoved == 0 {
		t.Fatalf("round after a DataNode died: %+v", rep)
	}
	c.settle(t, "3 live replicas of every block", func() bool {
		for _, id := range ids {
			n, z := c.liveGood(t, id, dead)
			if n < 3 || z < 2 {
				return false
			}
		}
		return true
	})
	mfs, err := c.prom.Gather()
	must(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "nimbus_blocks_replicated_total" && mf.GetMetric()[0].GetCounter().GetValue() > 0 {
			found = true
		}
	}
	if !found {
		t.Fatal("nimbus_blocks_replicated_total not counted")
	}
}

func TestSetReplicationDown(t *testing.T) {
	c := newCluster(t)
	ids := c.write(t, "/s", 3000, 2048, 3)
	must(t, c.e.SetReplication(context.Background(), root, "/s", 1))
	c.settle(t, "one replica of each block", func() bool {
		for _, id := range ids {
			if reps, _ := c.replicas(t, id); len(reps) != 1 {
				return false
			}
		}
		return true
	})
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.Healthy != len(ids) || rep.Deleted != 0 {
		t.Fatalf("after setrep 1: %+v", rep)
	}
	// The replicas are gone from the DataNodes too, not only from the registry.
	for _, id := range ids {
		reps, _ := c.replicas(t, id)
		for _, d := range c.nodes {
			_, keep := reps[d.ID()]
			var n int
			must(t, d.Blocks().Report(context.Background(), func(r blocks.Replica) error {
				if r.ID.Block == id {
					n++
				}
				return nil
			}))
			if keep != (n == 1) || n > 1 {
				t.Fatalf("blk_%d: DataNode %d holds %d replicas, registry says kept=%v", id, d.ID(), n, keep)
			}
		}
	}
}

func TestCorruptReplicaReplaced(t *testing.T) {
	c := newCluster(t)
	ids := c.write(t, "/c", 1500, 2048, 3)
	reps, _ := c.replicas(t, ids[0])
	var bad *datanode.DataNode
	for _, d := range c.nodes {
		if _, ok := reps[d.ID()]; ok {
			bad = d
			break
		}
	}
	// A byte flipped in its block file: a read fails its checksum and the
	// DataNode reports the replica corrupt.
	ctx := context.Background()
	dir := c.dirs[slices.Index(c.nodes, bad)]
	var path string
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == fmt.Sprintf("blk_%d", ids[0]) {
			path = p
		}
		return err
	}))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	one := make([]byte, 1)
	_, err = f.ReadAt(one, 700)
	must(t, err)
	one[0] ^= 0x40
	_, err = f.WriteAt(one, 700)
	must(t, err)
	must(t, f.Close())
	locs, err := c.e.GetBlockLocations(ctx, root, "/c", 0, 1500, namespace.Location{})
	must(t, err)
	lb := locs.Blocks[0]
	br, err := c.xfer.ReadBlock(ctx, bad.DataAddr(), dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: lb.NumBytes},
		datapath.BlockToken(lb.Token), 0, lb.NumBytes)
	if err == nil {
		_, err = io.ReadAll(br)
		br.Close()
	}
	if !errors.Is(err, dataxfer.ErrChecksum) {
		t.Fatalf("read of the corrupted replica: %v, want a checksum error", err)
	}
	p := store.Replica{GenStamp: lb.GenStamp}
	eventually(t, "the replica reported corrupt", func() bool {
		reps, _ := c.replicas(t, ids[0])
		return reps[bad.ID()] == store.ReplicaCorrupt
	})
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.CorruptReplicas != 1 || rep.UnderReplicated != 1 || rep.Replicated != 1 {
		t.Fatalf("round with a corrupt replica: %+v", rep)
	}
	c.settle(t, "corrupt replica replaced", func() bool {
		reps, zones := c.replicas(t, ids[0])
		_, still := reps[bad.ID()]
		return !still && len(reps) == 3 && len(zones) >= 2
	})
	if _, err := bad.Blocks().Stat(context.Background(), blocks.ID{Block: ids[0], GenStamp: p.GenStamp}); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("the corrupt replica is still on its DataNode: %v", err)
	}
}

func TestOrphanAfterGrace(t *testing.T) {
	c := newCluster(t)
	ids := c.write(t, "/o", 1500, 2048, 2)
	must(t, c.e.Delete(context.Background(), root, "/o", false))
	holders := func() int { reps, _ := c.replicas(t, ids[0]); return len(reps) }
	if holders() != 2 {
		t.Fatalf("%d replicas of the deleted file's block, want 2 until the grace ends", holders())
	}
	for range 3 {
		rep, err := c.m.Round(context.Background())
		must(t, err)
		if rep.OrphansDeleted != 0 || holders() != 2 {
			t.Fatalf("orphans removed before the grace: %+v", rep)
		}
	}
	c.clk.advance(59 * time.Minute)
	c.waitLive(t, 4)
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.OrphansDeleted != 0 {
		t.Fatalf("orphans removed before the grace: %+v", rep)
	}
	c.clk.advance(2 * time.Minute)
	c.waitLive(t, 4)
	rep, err = c.m.Round(context.Background())
	must(t, err)
	if rep.OrphansDeleted != 2 {
		t.Fatalf("after the grace: %+v, want 2 orphans deleted", rep)
	}
	eventually(t, "orphan replicas reported deleted", func() bool { return holders() == 0 })
}

func TestDecommission(t *testing.T) {
	c := newCluster(t)
	ids := c.write(t, "/d", 5000, 2048, 3)
	d := c.nodes[0]
	must(t, c.reg.SetAdminState(context.Background(), d.ID(), store.AdminDecommissioning))
	c.settle(t, "decommissioned", func() bool {
		info, err := c.reg.DataNode(context.Background(), d.ID())
		must(t, err)
		return info.Admin == store.AdminDecommissioned
	})
	for _, id := range ids {
		if n, z := c.liveGood(t, id, d.ID()); n < 3 || z < 2 {
			t.Fatalf("blk_%d: %d replicas over %d zones besides the decommissioned DataNode", id, n, z)
		}
	}
	// A decommissioned DataNode's replicas are excess no longer counted:
	// the block stays healthy with its three others.
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.Healthy != len(ids) {
		t.Fatalf("after decommission: %+v", rep)
	}
}

// TestRun: the loop runs rounds until its context ends, then returns nil.
func TestRun(t *testing.T) {
	c := newCluster(t)
	c.write(t, "/r", 1500, 2048, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.m.Run(ctx) }()
	eventually(t, "a round reported", func() bool { return c.m.Last().Blocks == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := c.m.Last(); r.Healthy != 1 {
		t.Fatalf("last round %+v", r)
	}
}

// TestMisReplicatedSpread: a block whose two replicas are in one zone gets
// a copy in another zone, then loses one of the two in the first.
func TestMisReplicatedSpread(t *testing.T) {
	c := newCluster(t)
	ids := c.writeEx(t, "/m", 1500, 2048, 2, []uint64{c.nodes[1].ID(), c.nodes[2].ID()}) // zones b and c
	if _, z := c.replicas(t, ids[0]); len(z) != 1 {
		t.Fatalf("written over zones %v, want one", z)
	}
	rep, err := c.m.Round(context.Background())
	must(t, err)
	if rep.MisReplicated != 1 || rep.Replicated != 1 {
		t.Fatalf("round: %+v", rep)
	}
	c.settle(t, "two replicas over two zones", func() bool {
		reps, z := c.replicas(t, ids[0])
		return len(reps) == 2 && len(z) == 2
	})
}
