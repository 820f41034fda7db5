package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
)

// Liveness is a reader's judgement of a DataNode.
type Liveness uint8

const (
	// Live: its Beat moved within Config.StaleAfter.
	Live Liveness = iota
	// Stale: its Beat stood still longer than StaleAfter, or this reader
	// has not seen it move yet. Not given new replicas; readers try it last.
	Stale
	// Dead: its Beat stood still longer than DeadAfter; its replicas do
	// not count.
	Dead
)

func (l Liveness) String() string {
	switch l {
	case Live:
		return "live"
	case Stale:
		return "stale"
	case Dead:
		return "dead"
	}
	return fmt.Sprintf("liveness(%d)", uint8(l))
}

// Info is a DataNode as this reader sees it: its row and its liveness.
type Info struct {
	store.DataNode
	Liveness Liveness
	// Silent is how long this reader has seen the Beat stand still (0 when
	// it moved since the last look).
	Silent time.Duration
}

// judge records that DataNode id's row shows beat and returns its
// liveness by this reader's clock.
func (r *Registry) judge(id, beat uint64, now time.Time) (Liveness, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.seen[id]
	if !ok || s.beat != beat {
		r.seen[id] = beatSeen{beat: beat, at: now, first: !ok}
		if !ok {
			return Stale, 0 // not seen moving yet
		}
		return Live, 0
	}
	silent := now.Sub(s.at)
	switch {
	case silent >= r.cfg.DeadAfter:
		return Dead, silent
	case silent >= r.cfg.StaleAfter || s.first:
		return Stale, silent
	}
	return Live, silent
}

func (r *Registry) info(row store.DataNode, now time.Time) Info {
	l, silent := r.judge(row.ID, row.Beat, now)
	return Info{DataNode: row, Liveness: l, Silent: silent}
}

// DataNodes returns every registered DataNode in id order, judged by this
// reader's clock (one scan of the DataNode table).
func (r *Registry) DataNodes(ctx context.Context) ([]Info, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: list DataNodes: %w", err)
	}
	defer txn.Rollback()
	var rows []store.DataNode
	var derr error
	start, end := store.AllDataNodesRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var dn store.DataNode
		if derr = store.DecodeDataNode(k, v, &dn); derr != nil {
			return false
		}
		rows = append(rows, dn)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("registry: list DataNodes: %w", err)
	}
	now := r.cfg.Now()
	out := make([]Info, len(rows))
	for i, row := range rows {
		out[i] = r.info(row, now)
	}
	return out, nil
}

// DataNode returns DataNode id; ErrUnknownDataNode when it has no row.
func (r *Registry) DataNode(ctx context.Context, id uint64) (Info, error) {
	rows, err := r.readNodes(ctx, []uint64{id})
	if err != nil {
		return Info{}, fmt.Errorf("registry: read DataNode %d: %w", id, err)
	}
	if rows[0] == nil {
		return Info{}, fmt.Errorf("registry: read DataNode %d: %w", id, ErrUnknownDataNode)
	}
	return r.info(*rows[0], r.cfg.Now()), nil
}

// readNodes reads the rows of ids (nil where there is none), in one batch.
func (r *Registry) readNodes(ctx context.Context, ids []uint64) ([]*store.DataNode, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	reqs := make([]store.ReadReq, len(ids))
	for i, id := range ids {
		reqs[i] = store.ReadReq{Key: store.DataNodeKey(id)}
	}
	vals, err := txn.Read(ctx, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]*store.DataNode, len(ids))
	for i, v := range vals {
		if v == nil {
			continue
		}
		out[i] = new(store.DataNode)
		if err := store.DecodeDataNode(reqs[i].Key, v, out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Located is a replica with the DataNode that holds it.
type Located struct {
	Replica store.Replica
	Node    Info
}

// Replicas returns the replicas of block with their DataNodes, in DataNode
// id order: every reported replica, whatever its state or its DataNode's
// liveness (the caller chooses; placement.SortForReader orders them for a
// reader). A replica whose DataNode has no row is left out.
func (r *Registry) Replicas(ctx context.Context, block uint64) ([]Located, error) {
	reps, err := r.replicaRows(ctx, block)
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of blk_%d: %w", block, err)
	}
	if len(reps) == 0 {
		return nil, nil
	}
	ids := make([]uint64, len(reps))
	for i, p := range reps {
		ids[i] = p.Node
	}
	rows, err := r.readNodes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of blk_%d: %w", block, err)
	}
	now := r.cfg.Now()
	out := make([]Located, 0, len(reps))
	for i, p := range reps {
		if rows[i] != nil {
			out = append(out, Located{Replica: p, Node: r.info(*rows[i], now)})
		}
	}
	return out, nil
}

// ReplicasOf is Replicas for several blocks (a file's, for a reader): the
// DataNodes' rows are read once for all of them. out[i] are the replicas
// of blocks[i].
func (r *Registry) ReplicasOf(ctx context.Context, blocks []uint64) ([][]Located, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of %d blocks: %w", len(blocks), err)
	}
	defer txn.Rollback()
	reps := make([][]store.Replica, len(blocks))
	var ids []uint64
	seen := map[uint64]int{}
	for i, b := range blocks {
		if reps[i], err = scanReplicas(ctx, txn, b); err != nil {
			return nil, fmt.Errorf("registry: replicas of blk_%d: %w", b, err)
		}
		for _, p := range reps[i] {
			if _, ok := seen[p.Node]; !ok {
				seen[p.Node] = len(ids)
				ids = append(ids, p.Node)
			}
		}
	}
	rows, err := r.readNodes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of %d blocks: %w", len(blocks), err)
	}
	now := r.cfg.Now()
	infos := make([]*Info, len(rows))
	for i, row := range rows {
		if row != nil {
			info := r.info(*row, now)
			infos[i] = &info
		}
	}
	out := make([][]Located, len(blocks))
	for i := range blocks {
		for _, p := range reps[i] {
			if info := infos[seen[p.Node]]; info != nil {
				out[i] = append(out[i], Located{Replica: p, Node: *info})
			}
		}
	}
	return out, nil
}

func (r *Registry) replicaRows(ctx context.Context, block uint64) ([]store.Replica, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer txn.Rollback()
	return scanReplicas(ctx, txn, block)
}

func scanReplicas(ctx context.Context, txn store.Txn, block uint64) ([]store.Replica, error) {
	var reps []store.Replica
	var derr error
	start, end := store.ReplicasOfBlockRange(block)
	err := txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var p store.Replica
		if derr = store.DecodeReplica(k, v, &p); derr != nil {
			return false
		}
		reps = append(reps, p)
		return true
	})
	if err == nil {
		err = derr
	}
	return reps, err
}

// NodeReplicas returns up to limit replicas of DataNode id from block from
// on, in block order (limit <= 0: all), for decommissioning and checks.
func (r *Registry) NodeReplicas(ctx context.Context, id, from uint64, limit int) ([]store.Replica, error) {
	txn, err := r.st.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of DataNode %d: %w", id, err)
	}
	defer txn.Rollback()
	var reps []store.Replica
	var derr error
	start, end := store.ReplicasOfNodeRange(id, from)
	err = txn.Scan(ctx, start, end, limit, func(k, v []byte) bool {
		var p store.Replica
		if derr = store.DecodeReplica(k, v, &p); derr != nil {
			return false
		}
		reps = append(reps, p)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("registry: replicas of DataNode %d: %w", id, err)
	}
	return reps, nil
}

// Counts are totals over the DataNodes, for status pages and metrics.
type Counts struct {
	Live, Stale, Dead int
	Decommissioning   int // admin state decommissioning (any liveness)
	Decommissioned    int
	Full, Failed      int // live DataNodes that take no new replicas for these reasons
	// Space and transfers of the live DataNodes.
	Capacity, Used, Remaining int64
	Transfers                 int64
}

// Count returns the totals of nodes.
func Count(nodes []Info) Counts {
	var c Counts
	for _, n := range nodes {
		switch n.Liveness {
		case Live:
			c.Live++
			c.Capacity += n.Capacity
			c.Used += n.Used
			c.Remaining += n.Remaining
			c.Transfers += int64(n.Transfers)
			if n.Full {
				c.Full++
			}
			if n.Failed {
				c.Failed++
			}
		case Stale:
			c.Stale++
		case Dead:
			c.Dead++
		}
		switch n.Admin {
		case store.AdminDecommissioning:
			c.Decommissioning++
		case store.AdminDecommissioned:
			c.Decommissioned++
		}
	}
	return c
}

// Counts lists the DataNodes and returns their totals.
func (r *Registry) Counts(ctx context.Context) (Counts, error) {
	nodes, err := r.DataNodes(ctx)
	if err != nil {
		return Counts{}, err
	}
	return Count(nodes), nil
}

// PlacementNode is the DataNode as package placement sees it.
func (i Info) PlacementNode() placement.Node {
	return placement.Node{
		ID: i.ID, Host: i.Host, Zone: i.Zone, Remaining: i.Remaining, Transfers: int(i.Transfers),
		Liveness: placement.Liveness(i.Liveness), Admin: placement.Admin(i.Admin), Full: i.Full, Failed: i.Failed,
	}
}
