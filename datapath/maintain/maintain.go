package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
)

// Config configures a Maintainer.
type Config struct {
	Store    store.Store
	Registry *registry.Registry
	Commands *command.Client
	Limits   Limits
	// Interval between rounds of Run.
	Interval time.Duration
	// OrphanGrace: a replica no block row names is deleted once this
	// Maintainer has seen it so for this long (by its own clock), so that
	// the replica of a block being allocated is never taken for an orphan.
	OrphanGrace time.Duration
	// PendingTimeout: how long a copy or deletion is assumed under way
	// before the DataNodes' reports show it (HDFS's
	// dfs.namenode.reconstruction.pending.timeout-sec, 5 min).
	PendingTimeout time.Duration
	// Batch: blocks whose replicas are read in one registry call.
	Batch      int
	Now        func() time.Time // nil: time.Now
	Seed       uint64
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: no metrics
}

// DefaultConfig returns HDFS-like bounds: rounds every 3 s, 2 streams per
// DataNode, 1000 blocks a round, a grace of 1 hour for orphans.
func DefaultConfig() Config {
	return Config{Limits: Limits{BlocksPerRound: 1000, StreamsPerNode: 2}, Interval: 3 * time.Second, OrphanGrace: time.Hour, PendingTimeout: 5 * time.Minute, Batch: 500}
}

// Maintainer runs rounds of the replication duty. One Maintainer runs at
// a time in a cluster (an elected duty); its orphan clock is its own.
type Maintainer struct {
	cfg Config
	log *slog.Logger
	rnd *rand.Rand

	mu      sync.Mutex
	orphans map[orphanKey]time.Time // first seen without a block row
	// pending are the copies and deletions of earlier rounds whose
	// DataNodes' reports have not shown yet: a copy counts as a replica,
	// a deleted replica as gone, until the report shows or PendingTimeout
	// passes (HDFS's pending reconstruction), so a round never copies a
	// block twice to one DataNode nor deletes more than the excess.
	pending map[uint64]*pending
	last    Report
	m       *metrics
}

type pending struct {
	added   map[uint64]Replica // DataNode id -> the replica copied there
	removed map[uint64]bool    // DataNode ids told to delete their replica
	until   time.Time
}

type orphanKey struct {
	node, block, stamp uint64
}

// New returns a Maintainer.
func New(cfg Config) (*Maintainer, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Commands == nil {
		return nil, errors.New("maintain: Store, Registry and Commands are required")
	}
	if cfg.Interval <= 0 || cfg.OrphanGrace < 0 {
		return nil, fmt.Errorf("maintain: Interval %v, OrphanGrace %v: want > 0 and >= 0", cfg.Interval, cfg.OrphanGrace)
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 5 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Maintainer{cfg: cfg, log: cfg.Logger.With("part", "maintain"), rnd: rand.New(rand.NewPCG(cfg.Seed, 0x6d61696e)),
		orphans: map[orphanKey]time.Time{}, pending: map[uint64]*pending{}}
	var err error
	if m.m, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	return m, nil
}

// Last is the report of the last finished round.
func (m *Maintainer) Last() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Run runs a round every Interval until ctx ends; a failed round is
// logged and the next one tries again. It returns nil when ctx ends.
func (m *Maintainer) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := m.Round(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("replication round failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scan is what a round read.
type scan struct {
	nodes   []registry.Info
	pnodes  []placement.Node
	byID    map[uint64]registry.Info
	blocks  []Block
	rows    map[uint64]bool // every block id with a row (complete files or not)
	pinned  map[uint64]bool // DataNodes holding a replica of a block of a file being written
	underOf map[uint64]bool // DataNodes holding a replica of a block not yet at its replication
}

// Round runs one round: scan, plan, act, remove orphans, finish
// decommissions. Its report counts the blocks and the work done.
func (m *Maintainer) Round(ctx context.Context) (Report, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.scan(ctx)
	if err != nil {
		return Report{}, err
	}
	acts, rep := Plan(s.blocks, s.pnodes, m.cfg.Limits, m.rnd)
	m.act(ctx, s, acts, &rep)
	if err := m.removeOrphans(ctx, s, &rep); err != nil {
		return rep, err
	}
	if err := m.decommission(ctx, s, &rep); err != nil {
		return rep, err
	}
	m.last = rep
	m.m.observe(rep)
	return rep, nil
}

func (m *Maintainer) scan(ctx context.Context) (*scan, error) {
	nodes, err := m.cfg.Registry.DataNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("maintain: scan: %w", err)
	}
	s := &scan{nodes: nodes, byID: map[uint64]registry.Info{}, rows: map[uint64]bool{}, pinned: map[uint64]bool{}, underOf: map[uint64]bool{}}
	for _, n := range nodes {
		s.pnodes = append(s.pnodes, n.PlacementNode())
		s.byID[n.ID] = n
	}
	files := map[uint64]store.Inode{} // file id -> inode, files in blocks
	var rows []store.Block
	txn, err := m.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("maintain: scan: %w", err)
	}
	defer txn.Rollback()
	var derr error
	start, end := store.AllInodesRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var n store.Inode
		if derr = store.DecodeInode(k, v, &n); derr != nil {
			return false
		}
		if n.Blocks {
			files[n.ID] = n
		}
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("maintain: scan inodes: %w", err)
	}
	start, end = store.AllBlocksRange()
	err = txn.Scan(ctx, start, end, 0, func(k, v []byte) bool {
		var b store.Block
		if derr = store.DecodeBlock(k, v, &b); derr != nil {
			return false
		}
		rows = append(rows, b)
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("maintain: scan block rows: %w", err)
	}
	for i := 0; i < len(rows); i += m.cfg.Batch {
		part := rows[i:min(len(rows), i+m.cfg.Batch)]
		ids := make([]uint64, len(part))
		for j, b := range part {
			ids[j] = b.ID
		}
		reps, err := m.cfg.Registry.ReplicasOf(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("maintain: scan: %w", err)
		}
		for j, b := range part {
			s.rows[b.ID] = true
			f, ok := files[b.File]
			if !ok || f.UnderConstruction() || !b.Complete {
				// Being written (or its file is gone in this snapshot):
				// its DataNodes are not drained yet.
				for _, l := range reps[j] {
					s.pinned[l.Node.ID] = true
				}
				continue
			}
			blk := Block{Row: b, Replication: int(f.Replication)}
			for _, l := range reps[j] {
				blk.Replicas = append(blk.Replicas, Replica{Node: l.Node.PlacementNode(), GenStamp: l.Replica.GenStamp, Length: l.Replica.Length, State: l.Replica.State})
			}
			m.applyPending(&blk, s)
			j := Classify(&blk, s.pnodes)
			// A DataNode stays needed while a block it holds is short, or
			// while a copy of it is not reported yet.
			if p := m.pending[b.ID]; len(j.Counted) < blk.Replication || p != nil && len(p.added) > 0 {
				for _, r := range blk.Replicas {
					s.underOf[r.Node.ID] = true
				}
			}
			s.blocks = append(s.blocks, blk)
		}
	}
	return s, nil
}

// applyPending counts the copies of earlier rounds not reported yet and
// leaves out the replicas told to go, and forgets what the reports show
// or what has timed out.
func (m *Maintainer) applyPending(b *Block, s *scan) {
	p := m.pending[b.Row.ID]
	if p == nil {
		return
	}
	if m.cfg.Now().After(p.until) {
		delete(m.pending, b.Row.ID)
		return
	}
	have := map[uint64]bool{}
	kept := b.Replicas[:0]
	for _, r := range b.Replicas {
		have[r.Node.ID] = true
		if p.removed[r.Node.ID] {
			continue // still reported, being deleted
		}
		kept = append(kept, r)
	}
	b.Replicas = kept
	for id := range p.removed {
		if !have[id] {
			delete(p.removed, id)
		}
	}
	for id, r := range p.added {
		if have[id] {
			delete(p.added, id)
			continue
		}
		if n, ok := s.byID[id]; ok {
			r.Node = n.PlacementNode()
		}
		b.Replicas = append(b.Replicas, r)
	}
	if len(p.added) == 0 && len(p.removed) == 0 {
		delete(m.pending, b.Row.ID)
	}
}

func (m *Maintainer) pendingOf(block uint64) *pending {
	p := m.pending[block]
	if p == nil {
		p = &pending{added: map[uint64]Replica{}, removed: map[uint64]bool{}}
		m.pending[block] = p
	}
	p.until = m.cfg.Now().Add(m.cfg.PendingTimeout)
	return p
}

func (m *Maintainer) act(ctx context.Context, s *scan, acts []Action, rep *Report) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, a := range acts {
		wg.Go(func() {
			err := m.do(ctx, s, a)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				rep.Failed++
				m.log.Warn("replication action failed", "block", a.Block, "kind", a.Kind, "why", a.Why, "err", err)
			case a.Kind == Replicate:
				rep.Replicated++
				rep.BytesMoved += a.Length * int64(len(a.Targets))
				p := m.pendingOf(a.Block)
				for _, n := range a.Targets {
					p.added[n.ID] = Replica{Node: n, GenStamp: a.GenStamp, Length: a.Length, State: store.ReplicaFinalized}
				}
			default:
				rep.Deleted += len(a.Nodes)
				p := m.pendingOf(a.Block)
				for _, n := range a.Nodes {
					p.removed[n.ID] = true
				}
			}
		})
	}
	wg.Wait()
}

func (m *Maintainer) do(ctx context.Context, s *scan, a Action) error {
	if a.Kind == Replicate {
		src := s.byID[a.Source.ID]
		ts := make([]dataxfer.Target, len(a.Targets))
		for i, t := range a.Targets {
			n := s.byID[t.ID]
			ts[i] = dataxfer.Target{Addr: n.DataAddr, UUID: n.UUID, Hostname: n.Host, StorageID: n.StorageID}
		}
		return m.cfg.Commands.Replicate(ctx, src.HTTPAddr, blocks.ID{Block: a.Block, GenStamp: a.GenStamp}, ts)
	}
	var errs []error
	for i, n := range a.Nodes {
		stamp := a.GenStamp
		if i < len(a.Stamps) {
			stamp = a.Stamps[i]
		}
		if err := m.cfg.Commands.Delete(ctx, s.byID[n.ID].HTTPAddr, []blocks.ID{{Block: a.Block, GenStamp: stamp}}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeOrphans deletes the replicas no block row names once this
// Maintainer has seen them so for the grace period. The block rows were
// read before the replicas, so a block allocated in between shows as an
// orphan for a while: the grace outlasts that.
func (m *Maintainer) removeOrphans(ctx context.Context, s *scan, rep *Report) error {
	now := m.cfg.Now()
	seen := map[orphanKey]bool{}
	var errs []error
	for _, n := range s.nodes {
		if n.Liveness == registry.Dead {
			continue
		}
		reps, err := m.cfg.Registry.NodeReplicas(ctx, n.ID, 0, 0)
		if err != nil {
			return fmt.Errorf("maintain: orphans: %w", err)
		}
		var del []blocks.ID
		for _, r := range reps {
			if s.rows[r.Block] {
				continue
			}
			k := orphanKey{n.ID, r.Block, r.GenStamp}
			seen[k] = true
			first, ok := m.orphans[k]
			if !ok {
				m.orphans[k] = now
				continue
			}
			if now.Sub(first) >= m.cfg.OrphanGrace {
				del = append(del, blocks.ID{Block: r.Block, GenStamp: r.GenStamp})
			}
		}
		if len(del) == 0 {
			continue
		}
		if err := m.cfg.Commands.Delete(ctx, n.HTTPAddr, del); err != nil {
			errs = append(errs, err)
			rep.Failed++
			continue
		}
		rep.OrphansDeleted += len(del)
		m.log.Info("orphan replicas deleted", "datanode", n.ID, "count", len(del))
	}
	for k := range m.orphans {
		if !seen[k] {
			delete(m.orphans, k)
		}
	}
	return errors.Join(errs...)
}

// decommission marks decommissioned the decommissioning DataNodes none of
// whose replicas is needed: no block they hold is below its replication
// in replicas elsewhere, and none belongs to a file being written.
func (m *Maintainer) decommission(ctx context.Context, s *scan, rep *Report) error {
	for _, n := range s.nodes {
		if n.Admin != store.AdminDecommissioning || s.pinned[n.ID] || s.underOf[n.ID] {
			continue
		}
		if err := m.cfg.Registry.SetAdminState(ctx, n.ID, store.AdminDecommissioned); err != nil {
			return fmt.Errorf("maintain: decommission DataNode %d: %w", n.ID, err)
		}
		rep.Decommissioned++
		m.log.Info("DataNode decommissioned", "datanode", n.ID, "host", n.Host)
	}
	return nil
}

type metrics struct {
	classes              *prometheus.GaugeVec
	corrupt              prometheus.Gauge
	replicated, deleted  prometheus.Counter
	orphans, bytes, fail prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		classes:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nimbus_blocks", Help: "Blocks of complete files by class, as of the last replication round."}, []string{"class"}),
		corrupt:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "nimbus_blocks_corrupt_replicas", Help: "Corrupt replicas on DataNodes not dead, as of the last round."}),
		replicated: prometheus.NewCounter(prometheus.CounterOpts{Name: "nimbus_blocks_replicated_total", Help: "Blocks copied to new DataNodes by the replication duty."}),
		deleted:    prometheus.NewCounter(prometheus.CounterOpts{Name: "nimbus_blocks_replicas_deleted_total", Help: "Excess and corrupt replicas deleted."}),
		orphans:    prometheus.NewCounter(prometheus.CounterOpts{Name: "nimbus_blocks_orphans_deleted_total", Help: "Replicas no block row names, deleted after the grace."}),
		bytes:      prometheus.NewCounter(prometheus.CounterOpts{Name: "nimbus_blocks_replicated_bytes_total", Help: "Bytes copied by the replication duty (length × targets)."}),
		fail:       prometheus.NewCounter(prometheus.CounterOpts{Name: "nimbus_blocks_maintain_failures_total", Help: "Replication actions that failed."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.classes, m.corrupt, m.replicated, m.deleted, m.orphans, m.bytes, m.fail} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("maintain: metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(r Report) {
	for c, v := range map[Class]int{Healthy: r.Healthy, UnderReplicated: r.UnderReplicated, OverReplicated: r.OverReplicated, MisReplicated: r.MisReplicated, Missing: r.Missing} {
		m.classes.WithLabelValues(c.String()).Set(float64(v))
	}
	m.corrupt.Set(float64(r.CorruptReplicas))
	m.replicated.Add(float64(r.Replicated))
	m.deleted.Add(float64(r.Deleted))
	m.orphans.Add(float64(r.OrphansDeleted))
	m.bytes.Add(float64(r.BytesMoved))
	m.fail.Add(float64(r.Failed))
}
