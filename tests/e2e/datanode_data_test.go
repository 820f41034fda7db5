package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/store"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// dataCluster is three `nimbus datanode` processes in three zones on one
// PostgreSQL database, and what a NameNode would hold: the registry, the
// cluster's block pool, block tokens and the command client under the
// cluster secret.
type dataCluster struct {
	t      *testing.T
	db     string
	reg    *registry.Registry
	pool   string
	tokens *blocktoken.Manager
	cmd    *command.Client
	dirs   [3]string
	procs  [3]*testproc.Server
	xc     dataxfer.Client
}

func newDataCluster(t *testing.T) *dataCluster {
	ctx := context.Background()
	c := &dataCluster{t: t, db: pgtest.DB(t), xc: dataxfer.Client{Name: "DFSClient_e2e"}}
	st, err := pgstore.Open(ctx, c.db, pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := registry.DefaultConfig()
	cfg.Heartbeat, cfg.StaleAfter, cfg.DeadAfter = 100*time.Millisecond, time.Second, 3*time.Second
	if c.reg, err = registry.New(st, cfg); err != nil {
		t.Fatal(err)
	}
	cl, err := registry.LoadCluster(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	c.pool = cl.BlockPoolID
	secret, err := clusterauth.LoadSecret(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	key, err := clusterauth.New(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.tokens = blocktoken.NewManager([32]byte(secret), 1, nil)
	c.cmd = &command.Client{Key: key}
	for i := range c.dirs {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	c.waitLive(3)
	return c
}

func (c *dataCluster) start(i int) {
	c.procs[i] = startDatanode(c.t, c.dirs[i], c.db, nil, "--zone", fmt.Sprintf("z%d", i+1), "--transfer-timeout", "20s")
}

// waitLive waits until n DataNodes are live.
func (c *dataCluster) waitLive(n int) {
	c.t.Helper()
	c.eventually(fmt.Sprintf("%d DataNodes live", n), func() (bool, string) {
		nodes, err := c.reg.DataNodes(context.Background())
		live := 0
		for _, d := range nodes {
			if d.Liveness == registry.Live {
				live++
			}
		}
		return err == nil && live == n, fmt.Sprint(live, err)
	})
}

// node is DataNode i's row (by zone).
func (c *dataCluster) node(i int) registry.Info {
	c.t.Helper()
	nodes, err := c.reg.DataNodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Zone == fmt.Sprintf("z%d", i+1) {
			return n
		}
	}
	c.t.Fatalf("no DataNode in zone z%d", i+1)
	return registry.Info{}
}

func (c *dataCluster) target(i int) dataxfer.Target {
	n := c.node(i)
	return dataxfer.Target{Addr: n.DataAddr, UUID: n.UUID, StorageID: n.StorageID}
}

func (c *dataCluster) eventually(what string, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waiting for %s: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rows is block's replica rows by zone index ("z1" -> 0).
func (c *dataCluster) rows(block uint64) map[int]store.Replica {
	c.t.Helper()
	reps, err := c.reg.Replicas(context.Background(), block)
	if err != nil {
		c.t.Fatal(err)
	}
	m := map[int]store.Replica{}
	for _, r := range reps {
		var z int
		fmt.Sscanf(r.Node.Zone, "z%d", &z)
		m[z-1] = r.Replica
	}
	return m
}

// waitRows waits until block's rows are exactly want (by zone index).
func (c *dataCluster) waitRows(what string, block uint64, want map[int]store.Replica) {
	c.t.Helper()
	c.eventually(what, func() (bool, string) {
		got := c.rows(block)
		if len(got) != len(want) {
			return false, fmt.Sprintf("%+v", got)
		}
		for i, w := range want {
			g, ok := got[i]
			if !ok || g.GenStamp != w.GenStamp || g.Length != w.Length || g.State != w.State {
				return false, fmt.Sprintf("%+v", got)
			}
		}
		return true, ""
	})
}

func (c *dataCluster) block(id, gs uint64) dataxfer.Block {
	return dataxfer.Block{Pool: c.pool, ID: id, GenStamp: gs}
}

// read reads block b whole from DataNode i.
func (c *dataCluster) read(i int, b dataxfer.Block, n int64) ([]byte, error) {
	tok := c.tokens.IssueFor("test", c.pool, b.ID, time.Minute, blocktoken.Read)
	br, err := c.xc.ReadBlock(context.Background(), c.node(i).DataAddr, b, tok, 0, n)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	return io.ReadAll(br)
}

// TestDatanodeDataPath runs three `nimbus datanode` processes in three
// zones and uses them as a NameNode and a client would: blocks written
// through a three-DataNode pipeline (their rows follow by incremental
// reports) and read back from each replica; a token under another key
// refused; a DataNode killed mid-write, the survivors' replicas recovered
// through the signed commands at their common length; a replica corrupted
// on disk refused on read and reported corrupt; a replica deleted and
// another replicated, the rows following.
func TestDatanodeDataPath(t *testing.T) {
	ctx := context.Background()
	c := newDataCluster(t)
	pipeline := []dataxfer.Target{c.target(0), c.target(1), c.target(2)}
	rnd := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}

	// Three blocks through the pipeline.
	sizes := []int{1, 513, 5<<20 + 333}
	datas := map[uint64][]byte{}
	for k, n := range sizes {
		id := uint64(1000 + k)
		data := randBytes(n)
		datas[id] = data
		b := c.block(id, 1)
		tok := c.tokens.IssueFor("test", c.pool, id, time.Minute, blocktoken.Write)
		bw, err := c.xc.WriteBlock(ctx, b, tok, pipeline, dataxfer.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(data); err != nil {
			t.Fatal(err)
		}
		if got, err := bw.Close(ctx); err != nil || got != int64(n) {
			t.Fatalf("write blk_%d: %d bytes, %v", id, got, err)
		}
		fin := store.Replica{GenStamp: 1, Length: int64(n), State: store.ReplicaFinalized}
		c.waitRows(fmt.Sprintf("three finalized replicas of blk_%d", id), id, map[int]store.Replica{0: fin, 1: fin, 2: fin})
		for i := range 3 {
			got, err := c.read(i, b, int64(n))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read blk_%d from z%d: %d bytes, %v", id, i+1, len(got), err)
			}
		}
	}

	// A token made under another secret is refused, reading and writing.
	forged := blocktoken.NewManager([32]byte(bytes.Repeat([]byte{9}, 32)), 1, nil)
	rtok := forged.IssueFor("test", c.pool, 1001, time.Minute, blocktoken.Read)
	if _, err := c.xc.ReadBlock(ctx, pipeline[0].Addr, c.block(1001, 1), rtok, 0, 513); !errors.Is(err, dataxfer.ErrAccessToken) {
		t.Fatalf("read under another key: %v, want ErrAccessToken", err)
	}
	wtok := forged.IssueFor("test", c.pool, 1500, time.Minute, blocktoken.Write)
	if _, err := c.xc.WriteBlock(ctx, c.block(1500, 1), wtok, pipeline, dataxfer.WriteOptions{}); !errors.Is(err, dataxfer.ErrAccessToken) {
		t.Fatalf("write under another key: %v, want ErrAccessToken", err)
	}
	if len(c.rows(1500)) != 0 {
		t.Fatalf("a refused write left rows: %+v", c.rows(1500))
	}

	// The middle DataNode killed mid-write: the error names it; the
	// survivors hold every acknowledged byte; the recovery commands
	// finalize them at their common length.
	const killed uint64 = 2000
	data := randBytes(3 << 20)
	tok := c.tokens.IssueFor("test", c.pool, killed, time.Minute, blocktoken.Write)
	bw, err := c.xc.WriteBlock(ctx, c.block(killed, 1), tok, pipeline, dataxfer.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.procs[1].Kill()
	var werr error
	for off := 1 << 20; off < len(data) && werr == nil; off += 64 << 10 {
		_, werr = bw.Write(data[off : off+64<<10])
	}
	if werr == nil {
		werr = bw.Flush(ctx)
	}
	var pe *dataxfer.PipelineError
	if !errors.As(werr, &pe) || pe.Addr != pipeline[1].Addr || !strings.Contains(werr.Error(), pipeline[1].Addr) {
		t.Fatalf("write through a killed DataNode: %v, want a PipelineError naming %s", werr, pipeline[1].Addr)
	}
	acked := bw.Acked()
	bw.Abort()
	if acked < 1<<20 {
		t.Fatalf("acknowledged %d bytes, fewer than the flushed 1 MiB", acked)
	}
	const recoveryID = 7
	common := int64(-1)
	for _, i := range []int{0, 2} {
		info, err := c.cmd.InitRecovery(ctx, c.node(i).HTTPAddr, blocks.ID{Block: killed, GenStamp: 1}, recoveryID)
		if err != nil {
			t.Fatalf("InitRecovery on z%d: %v", i+1, err)
		}
		if info.GenStamp != 1 || info.State != store.ReplicaBeingWritten || info.Length < acked {
			t.Fatalf("InitRecovery on z%d: %+v; %d bytes were acknowledged", i+1, info, acked)
		}
		if common < 0 || info.Length < common {
			common = info.Length
		}
	}
	for _, i := range []int{0, 2} {
		if err := c.cmd.FinishRecovery(ctx, c.node(i).HTTPAddr, blocks.ID{Block: killed, GenStamp: 1}, recoveryID, common); err != nil {
			t.Fatalf("FinishRecovery on z%d: %v", i+1, err)
		}
	}
	rec := store.Replica{GenStamp: recoveryID, Length: common, State: store.ReplicaFinalized}
	// The killed DataNode's row stays as it last reported (being written).
	c.eventually("the survivors' rows recovered", func() (bool, string) {
		r := c.rows(killed)
		ok := r[0].GenStamp == recoveryID && r[0].Length == common && r[0].State == store.ReplicaFinalized &&
			r[2].GenStamp == recoveryID && r[2].Length == common && r[2].State == store.ReplicaFinalized
		return ok, fmt.Sprintf("%+v", r)
	})
	for _, i := range []int{0, 2} {
		got, err := c.read(i, c.block(killed, recoveryID), common)
		if err != nil || !bytes.Equal(got, data[:common]) {
			t.Fatalf("read the recovered replica from z%d: %d bytes, %v", i+1, len(got), err)
		}
	}

	// The killed DataNode back: its stale replica deleted by command, a
	// replica copied to it by command; the rows follow.
	c.start(1)
	c.waitLive(3)
	c.eventually("the restarted DataNode's full report", func() (bool, string) {
		r := c.rows(killed)
		_, ok := r[1]
		return ok, fmt.Sprintf("%+v", r)
	})
	stale := c.rows(killed)[1]
	if err := c.cmd.Delete(ctx, c.node(1).HTTPAddr, []blocks.ID{{Block: killed, GenStamp: stale.GenStamp}}); err != nil {
		t.Fatal(err)
	}
	c.waitRows("the stale replica deleted", killed, map[int]store.Replica{0: rec, 2: rec})
	if err := c.cmd.Replicate(ctx, c.node(0).HTTPAddr, blocks.ID{Block: killed, GenStamp: recoveryID}, []dataxfer.Target{c.target(1)}); err != nil {
		t.Fatal(err)
	}
	c.waitRows("a third replica replicated", killed, map[int]store.Replica{0: rec, 1: rec, 2: rec})
	if got, err := c.read(1, c.block(killed, recoveryID), common); err != nil || !bytes.Equal(got, data[:common]) {
		t.Fatalf("read the replicated replica: %d bytes, %v", len(got), err)
	}
	if err := c.cmd.Delete(ctx, c.node(2).HTTPAddr, []blocks.ID{{Block: killed, GenStamp: recoveryID}}); err != nil {
		t.Fatal(err)
	}
	c.waitRows("a replica deleted", killed, map[int]store.Replica{0: rec, 1: rec})
	if _, err := c.cmd.InitRecovery(ctx, c.node(2).HTTPAddr, blocks.ID{Block: killed, GenStamp: recoveryID}, recoveryID+1); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("recovery of a deleted replica: %v, want ErrNotFound", err)
	}

	// A NameNode on the same database lists them: `nimbus status`, the
	// status page, /metrics.
	srv := startServer(t, "", "", "--store", c.db)
	c.eventually("nimbus status lists three live DataNodes", func() (bool, string) {
		out := srv.ok("status")
		live := 0
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && strings.HasPrefix(f[2], "z") && strings.Contains(l, "live") {
				live++
			}
		}
		return live == 3 && strings.Contains(out, "datanodes: 3 live"), out
	})
	out := srv.ok("status")
	for i := range 3 {
		if !strings.Contains(out, c.node(i).DataAddr) {
			t.Fatalf("nimbus status does not list %s:\n%s", c.node(i).DataAddr, out)
		}
	}
	if code, page := testproc.Get(t, srv.url()+"/"); code != 200 || !strings.Contains(page, "<h2>DataNodes</h2>") || !strings.Contains(page, c.node(2).DataAddr) {
		t.Fatalf("status page: %d\n%s", code, page)
	}
	if code, m := testproc.Get(t, srv.url()+"/metrics"); code != 200 || !strings.Contains(m, `nimbus_datanodes{state="live"} 3`) {
		t.Fatalf("/metrics: %d, no nimbus_datanodes{state=\"live\"} 3:\n%s", code, grepMetric(m, "nimbus_datanodes"))
	}

	// A byte flipped in a replica's block file: the read is refused with a
	// checksum error and the replica reported corrupt.
	const bad uint64 = 1002
	path := blockFile(t, c.dirs[0], bad)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	f.ReadAt(one, 4<<20)
	one[0] ^= 0x40
	if _, err := f.WriteAt(one, 4<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := int64(len(datas[bad]))
	got, err := c.read(0, c.block(bad, 1), n)
	if err == nil || !errors.Is(err, dataxfer.ErrChecksum) {
		t.Fatalf("read of a corrupted replica: %d bytes, %v; want a checksum error", len(got), err)
	}
	if int64(len(got)) > 4<<20 || !bytes.Equal(got, datas[bad][:len(got)]) {
		t.Fatalf("read of a corrupted replica returned %d bytes, some past the corrupt chunk or wrong", len(got))
	}
	fin := store.Replica{GenStamp: 1, Length: n, State: store.ReplicaFinalized}
	c.waitRows("the corrupt replica reported", bad, map[int]store.Replica{0: {GenStamp: 1, Length: n, State: store.ReplicaCorrupt}, 1: fin, 2: fin})
	if got, err := c.read(1, c.block(bad, 1), n); err != nil || !bytes.Equal(got, datas[bad]) {
		t.Fatalf("read of a good replica: %d bytes, %v", len(got), err)
	}
}

// blockFile finds the data file of block under a DataNode's directory.
func blockFile(t *testing.T, dir string, block uint64) string {
	t.Helper()
	name := fmt.Sprintf("blk_%d", block)
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			found = append(found, p)
		}
		return nil
	})
	sort.Strings(found)
	if len(found) != 1 {
		t.Fatalf("data files of %s under %s: %v", name, dir, found)
	}
	return found[0]
}

func grepMetric(text, name string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
