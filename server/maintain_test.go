package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/nimbus-fs/nimbus/client"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/internal/pgtest"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// TestMaintenanceDuty: a server in the DataNode mode on PostgreSQL runs
// the replication duty (the only server, so it leads its election). A
// file written with replication 2 over three DataNodes loses one of its
// two DataNodes (stopped, then judged dead by the server); the duty copies
// the block to the third, which then serves the same bytes, and the
// Maintainer's report, the server's metrics and GET /status/datanodes
// show the copy and the block healthy again.
func TestMaintenanceDuty(t *testing.T) {
	db := pgtest.DB(t)
	// Short liveness bounds, so that a stopped DataNode is judged dead
	// while the test waits.
	live := registry.Config{Heartbeat: 10 * time.Millisecond, StaleAfter: 500 * time.Millisecond, DeadAfter: time.Second, Batch: 100}
	cfg := testConfig(t)
	cfg.StoreURL = db
	cfg.BlockStorage = BlockStorageDataNodes
	cfg.DataNodeLiveness = live
	cfg.Maintenance = MaintenanceConfig{Interval: 50 * time.Millisecond}
	cfg.Namespace.Superuser = "root"
	cfg.Namespace.InlineThreshold = 1000
	cfg.Namespace.MinBlockSize = 0
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	stops := startDataNodes(t, db, 3, live)

	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := meta.User{Name: "root"}
	writer := namespace.Location{Host: "h0", Zone: "z0"}
	data := bytes.Repeat([]byte("maintained "), 3000)
	const p = "/m/f"
	if _, err := c.Create(ctx, root, p, meta.CreateOptions{Client: "w", BlockSize: 64 << 10, Replication: 2, CreateParent: true, Perm: 0o644}); err != nil {
		t.Fatal(err)
	}
	var lb *namespace.LocatedBlock
	for {
		lb, err = busyRetry(t, func() (*namespace.LocatedBlock, error) { return c.AddBlock(ctx, root, p, "w", nil, nil, writer) })
		if err != nil {
			t.Fatal(err)
		}
		if len(lb.Targets) == 2 {
			break
		}
		if err := c.AbandonBlock(ctx, root, p, "w", namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	xfer := dataxfer.Client{Name: "w"}
	bw, err := xfer.WriteBlock(ctx, dataxfer.Block{Pool: lb.Pool, ID: lb.ID, GenStamp: lb.GenStamp},
		datapath.BlockToken(lb.Token), datapath.Targets(lb.Targets), dataxfer.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(data); err != nil {
		t.Fatal(err)
	}
	n, err := bw.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := &namespace.BlockRef{ID: lb.ID, GenStamp: lb.GenStamp, NumBytes: n}
	if _, err := busyRetry(t, func() (*meta.FileStatus, error) { return c.CompleteBlock(ctx, root, p, "w", last) }); err != nil {
		t.Fatal(err)
	}

	// located waits until the block is listed on want DataNodes, none of
	// them gone, and returns them.
	located := func(want int, gone uint64) namespace.LocatedBlock {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			locs, err := c.GetBlockLocations(ctx, root, p, 0, int64(len(data)), writer)
			if err != nil {
				t.Fatal(err)
			}
			if len(locs.Blocks) != 1 {
				t.Fatalf("located %+v, want one block", locs)
			}
			b := locs.Blocks[0]
			var ok int
			for _, d := range b.Targets {
				if d.ID != gone {
					ok++
				}
			}
			if ok == want {
				return b
			}
			if time.Now().After(deadline) {
				t.Fatalf("blk_%d on %+v after a minute, want %d DataNodes besides %d", b.ID, b.Targets, want, gone)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before := located(2, 0)
	if got := metric(t, srv, "nimbus_blocks_replicated_total"); got != 0 {
		t.Fatalf("nimbus_blocks_replicated_total = %v before any DataNode stopped, want 0", got)
	}
	lost := before.Targets[0]
	stops[int(lost.Host[1]-'0')]()

	after := located(2, lost.ID)
	for _, d := range after.Targets {
		if d.ID == lost.ID {
			continue
		}
		br, err := xfer.ReadBlock(ctx, d.DataAddr, dataxfer.Block{Pool: after.Pool, ID: after.ID, GenStamp: after.GenStamp, NumBytes: after.NumBytes},
			datapath.BlockToken(after.Token), 0, after.NumBytes)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(br)
		br.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("blk_%d on %s (%s): %d bytes that differ from the %d written", after.ID, d.DataAddr, d.Host, len(got), len(data))
		}
	}
	if got := metric(t, srv, "nimbus_blocks_replicated_total"); got < 1 {
		t.Fatalf("nimbus_blocks_replicated_total = %v after the copy, want at least 1", got)
	}
	if got := metric(t, srv, "nimbus_blocks_replicated_bytes_total"); got < float64(len(data)) {
		t.Fatalf("nimbus_blocks_replicated_bytes_total = %v after the copy, want at least %d", got, len(data))
	}
	// The rounds after the copy count the block healthy, in the
	// Maintainer's report and in GET /status/datanodes.
	for deadline := time.Now().Add(time.Minute); ; {
		r := srv.maintainer.Last()
		var dns DataNodesStatus
		resp, err := http.Get(srv.Addr() + "/status/datanodes")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&dns)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		b := dns.Blocks
		if r.Blocks == 1 && r.Healthy == 1 && r.UnderReplicated == 0 && r.Missing == 0 &&
			b != nil && b.Blocks == 1 && b.Healthy == 1 && b.UnderReplicated == 0 && b.Missing == 0 && b.CorruptReplicas == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Maintainer's last report %+v, /status/datanodes %+v after a minute, want one healthy block", r, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
