package soak

import (
	"bytes"
	"context"
	"crypto/rand"
	be "encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/internal/testproc"
	"github.com/nimbus-fs/nimbus/store/pgstore"
)

// dnStallBound is the DataNodes' --transfer-timeout in the soak: a
// well-behaved transfer that took this long waited for a hostile one.
const dnStallBound = 3 * time.Second

// TestSoakDataNode: two `nimbus datanode` processes serve a well-behaved
// client that writes blocks through both and reads them back, beside
// hostile peers of their data ports: garbage instead of an op, packets
// whose length lies (beyond any bound, or within it and never sent),
// pipelines that stall after a few packets, readers that do not read. The
// well-behaved client sees no error and no transfer of its waits as long
// as the DataNodes' transfer timeout; both DataNodes stay healthy.
func TestSoakDataNode(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: seconds of load; run without -short")
	}
	_, hostileDur := phases()
	hostileDur /= 3 // the data path's share of the soak's time
	ctx := context.Background()
	db := pgtest.DB(t)
	st, err := pgstore.Open(ctx, db, pgstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg, err := registry.New(st, registry.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := registry.LoadCluster(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := clusterauth.LoadSecret(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	tokens := blocktoken.NewManager([32]byte(secret), 1, nil)
	var procs []*testproc.Server
	for i := range 2 {
		httpAddr := testproc.FreeAddr(t)
		cmd := exec.Command(binary, "datanode", "--data", t.TempDir(), "--store", db, "--addr", "127.0.0.1:0",
			"--http-addr", httpAddr, "--zone", fmt.Sprintf("z%d", i+1), "--transfer-timeout", dnStallBound.String(),
			"--log-level", "warn")
		p := testproc.Launch(t, cmd, "", httpAddr)
		procs = append(procs, p)
		waitHealthy(t, p)
	}
	nodes, err := reg.DataNodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("DataNodes: %d, %v", len(nodes), err)
	}
	var pipeline []dataxfer.Target
	for _, n := range nodes {
		pipeline = append(pipeline, dataxfer.Target{Addr: n.DataAddr, UUID: n.UUID, StorageID: n.StorageID})
	}
	pool := cl.BlockPoolID
	blk := func(id uint64) dataxfer.Block { return dataxfer.Block{Pool: pool, ID: id, GenStamp: 1} }
	wtok := func(id uint64) blocktoken.Token {
		return tokens.IssueFor("soak", pool, id, time.Hour, blocktoken.Write)
	}
	rtok := func(id uint64) blocktoken.Token { return tokens.IssueFor("soak", pool, id, time.Hour, blocktoken.Read) }
	good := &dataxfer.Client{Name: "DFSClient_good"}

	// A block the slow readers ask for.
	big := make([]byte, 4<<20)
	rand.Read(big)
	if err := writeBlock(ctx, good, blk(1), wtok(1), pipeline, big); err != nil {
		t.Fatal(err)
	}

	hctx, hcancel := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	var stats struct{ garbage, lieBig, lieStall, stalled, slowRead atomic.Int64 }
	var nextID atomic.Uint64
	nextID.Store(1 << 40)
	loop := func(f func(ctx context.Context, i int)) {
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			for i := 0; hctx.Err() == nil; i++ {
				f(hctx, i)
				select {
				case <-hctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}
	// Garbage instead of an op header.
	loop(func(ctx context.Context, i int) {
		nc, err := net.Dial("tcp", pipeline[i%2].Addr)
		if err != nil {
			return
		}
		defer nc.Close()
		junk := make([]byte, 64)
		rand.Read(junk)
		if i%2 == 0 {
			junk[0], junk[1], junk[2] = 0, 28, 80 // a WRITE_BLOCK op header, then junk as its proto
		}
		nc.Write(junk)
		nc.SetReadDeadline(time.Now().Add(2 * dnStallBound))
		io.Copy(io.Discard, nc)
		stats.garbage.Add(1)
	})
	// A packet length beyond every bound, after a valid op.
	loop(func(ctx context.Context, i int) {
		id := nextID.Add(1)
		raw, bw, err := rawWrite(ctx, blk(id), wtok(id), pipeline)
		if err != nil {
			return
		}
		defer bw.Abort()
		var p [4]byte
		be.BigEndian.PutUint32(p[:], 0x7fff0000)
		raw.Write(p[:])
		raw.Write(make([]byte, 100))
		select { // the DataNode refuses the packet and closes
		case <-ctx.Done():
		case <-time.After(dnStallBound / 2):
		}
		stats.lieBig.Add(1)
	})
	// A packet length within the bound, a few bytes of it sent, then
	// silence until the DataNode gives up.
	loop(func(ctx context.Context, i int) {
		id := nextID.Add(1)
		raw, bw, err := rawWrite(ctx, blk(id), wtok(id), pipeline)
		if err != nil {
			return
		}
		defer bw.Abort()
		var p [6]byte
		be.BigEndian.PutUint32(p[:], 8<<20)
		raw.Write(p[:])
		select { // the DataNode times the packet out
		case <-ctx.Done():
		case <-time.After(2 * dnStallBound):
		}
		stats.lieStall.Add(1)
	})
	// Pipelines that stall after a few packets.
	for range 2 {
		loop(func(ctx context.Context, i int) {
			id := nextID.Add(1)
			c := &dataxfer.Client{Name: "DFSClient_stall", Timeout: time.Hour}
			bw, err := c.WriteBlock(ctx, blk(id), wtok(id), pipeline, dataxfer.WriteOptions{})
			if err != nil {
				return
			}
			bw.Write(big[:200<<10])
			bw.Flush(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(2 * dnStallBound):
			}
			bw.Abort()
			stats.stalled.Add(1)
		})
	}
	// Readers that do not read.
	loop(func(ctx context.Context, i int) {
		br, err := good.ReadBlock(ctx, pipeline[i%2].Addr, blk(1), rtok(1), 0, int64(len(big)))
		if err != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * dnStallBound):
		}
		br.Close()
		stats.slowRead.Add(1)
	})
	time.Sleep(500 * time.Millisecond) // let the hostile share set in

	// The well-behaved client.
	data := make([]byte, 1<<20)
	rand.Read(data)
	var ops int
	var worst time.Duration
	var goodErrs []error
	end := time.Now().Add(hostileDur)
	for id := uint64(100); time.Now().Before(end); id++ {
		start := time.Now()
		err := writeBlock(ctx, good, blk(id), wtok(id), pipeline, data)
		if err == nil {
			var got []byte
			got, err = readBlock(ctx, good, pipeline[1].Addr, blk(id), rtok(id), int64(len(data)))
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("blk_%d read back differs", id)
			}
		}
		took := time.Since(start)
		worst = max(worst, took)
		ops++
		if err != nil {
			goodErrs = append(goodErrs, err)
		}
	}
	hcancel()
	hwg.Wait()
	t.Logf("%d good transfers (1 MiB written through 2 DataNodes and read back), the slowest %v; hostile: %d garbage, %d lying lengths, %d lying and stalled packets, %d stalled pipelines, %d slow readers",
		ops, worst.Round(time.Millisecond), stats.garbage.Load(), stats.lieBig.Load(), stats.lieStall.Load(), stats.stalled.Load(), stats.slowRead.Load())
	for i, err := range goodErrs {
		if i < 5 {
			t.Errorf("well-behaved client: %v", err)
		}
	}
	if ops == 0 {
		t.Fatal("no good transfer")
	}
	if worst >= dnStallBound {
		t.Errorf("a good transfer took %v: as long as the DataNodes' transfer timeout (%v), so it waited for a hostile one", worst, dnStallBound)
	}
	if stats.garbage.Load() == 0 || stats.lieBig.Load() == 0 || stats.lieStall.Load() == 0 || stats.stalled.Load() == 0 || stats.slowRead.Load() == 0 {
		t.Errorf("a hostile kind never ran: %d %d %d %d %d", stats.garbage.Load(), stats.lieBig.Load(), stats.lieStall.Load(), stats.stalled.Load(), stats.slowRead.Load())
	}
	for _, p := range procs {
		if code, body := testproc.Get(t, p.URL()+"/healthz"); code != http.StatusOK {
			t.Errorf("DataNode %s after the soak: /healthz %d %s", p.Addr, code, body)
		}
		if err := p.Stop(); err != nil {
			t.Errorf("DataNode %s: exit after SIGTERM: %v\n%s", p.Addr, err, p.Log.String())
		}
	}
}

func waitHealthy(t *testing.T, p *testproc.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nimbus datanode did not become healthy: %v\n%s", err, p.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeBlock(ctx context.Context, c *dataxfer.Client, b dataxfer.Block, tok blocktoken.Token, pipeline []dataxfer.Target, data []byte) error {
	bw, err := c.WriteBlock(ctx, b, tok, pipeline, dataxfer.WriteOptions{})
	if err != nil {
		return err
	}
	if _, err := bw.Write(data); err != nil {
		bw.Abort()
		return err
	}
	_, err = bw.Close(ctx)
	return err
}

func readBlock(ctx context.Context, c *dataxfer.Client, addr string, b dataxfer.Block, tok blocktoken.Token, n int64) ([]byte, error) {
	br, err := c.ReadBlock(ctx, addr, b, tok, 0, n)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	return io.ReadAll(br)
}

// rawWrite sets up a write through pipeline and returns its connection to
// the first DataNode, on which the caller then sends what it likes (the
// writer's own heartbeats wait for an hour; its ack reader reads the
// connection).
func rawWrite(ctx context.Context, b dataxfer.Block, tok blocktoken.Token, pipeline []dataxfer.Target) (net.Conn, *dataxfer.BlockWriter, error) {
	var raw net.Conn
	c := &dataxfer.Client{Name: "DFSClient_hostile", Timeout: time.Hour, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		raw = nc
		return nc, err
	}}
	bw, err := c.WriteBlock(ctx, b, tok, pipeline, dataxfer.WriteOptions{})
	if err != nil {
		return nil, nil, err
	}
	return raw, bw, nil
}
