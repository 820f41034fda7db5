package datapath

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/dataxfer"
	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/placement"
	"github.com/nimbus-fs/nimbus/store"
)

// Config configures DataNodes.
type Config struct {
	// Registry reads the DataNodes and their replicas. Required.
	Registry *registry.Registry
	// Cluster is the cluster's identity (its block pool id goes into every
	// block and token). Required.
	Cluster registry.Cluster
	// Secret is the cluster secret (internal/clusterauth): block tokens are
	// issued under blocktoken's key derived from it, which the DataNodes
	// derive alike to verify them.
	Secret [32]byte
	// KeyID is the block key id tokens are issued under.
	KeyID int32
	// TokenLifetime is how long a token is valid (HDFS's
	// dfs.block.access.token.lifetime, 10 min); 0: that default.
	TokenLifetime time.Duration
	// Seed seeds the random choices of placement (ties between equal
	// DataNodes); 0: a random seed.
	Seed uint64
	// Now is the tokens' clock; nil: time.Now.
	Now func() time.Time
}

// DataNodes implements namespace.DataNodes. Safe for concurrent use.
type DataNodes struct {
	cfg    Config
	tokens *blocktoken.Manager
	mu     sync.Mutex // guards rnd
	rnd    *rand.Rand
}

var _ namespace.DataNodes = (*DataNodes)(nil)

// New returns the DataNodes of cfg.
func New(cfg Config) (*DataNodes, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("datapath: no registry")
	case cfg.Cluster.BlockPoolID == "":
		return nil, errors.New("datapath: no block pool id")
	case cfg.Secret == [32]byte{}:
		return nil, errors.New("datapath: no cluster secret")
	case cfg.TokenLifetime < 0:
		return nil, fmt.Errorf("datapath: TokenLifetime %v", cfg.TokenLifetime)
	}
	if cfg.TokenLifetime == 0 {
		cfg.TokenLifetime = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &DataNodes{cfg: cfg, tokens: blocktoken.NewManager(cfg.Secret, cfg.KeyID, cfg.Now),
		rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, nil
}

// Tokens returns the token manager (issuing and verifying under the
// cluster's key), for tests and tools that act as a DataNode.
func (d *DataNodes) Tokens() *blocktoken.Manager { return d.tokens }

// BlockPool implements namespace.DataNodes.
func (d *DataNodes) BlockPool() string { return d.cfg.Cluster.BlockPoolID }

func info(i registry.Info) namespace.DataNodeInfo {
	return namespace.DataNodeInfo{ID: i.ID, UUID: i.UUID, StorageID: i.StorageID, DataAddr: i.DataAddr,
		HTTPAddr: i.HTTPAddr, Host: i.Host, Zone: i.Zone}
}

func loc(l namespace.Location) placement.Location {
	return placement.Location{Host: l.Host, Zone: l.Zone}
}

// ChooseTargets implements namespace.DataNodes with placement.ChooseTargets
// over the registry's DataNodes.
func (d *DataNodes) ChooseTargets(ctx context.Context, n int, blockSize int64, writer namespace.Location, exclude, chosen []uint64) ([]namespace.DataNodeInfo, error) {
	nodes, err := d.cfg.Registry.DataNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("datapath: listing the DataNodes: %w", err)
	}
	byID := make(map[uint64]registry.Info, len(nodes))
	pn := make([]placement.Node, len(nodes))
	for i, nd := range nodes {
		byID[nd.ID] = nd
		pn[i] = nd.PlacementNode()
	}
	req := placement.Request{Writer: loc(writer), Replicas: n, BlockSize: blockSize, Exclude: exclude}
	for _, id := range chosen {
		if nd, ok := byID[id]; ok {
			req.Chosen = append(req.Chosen, nd.PlacementNode())
		}
	}
	d.mu.Lock()
	picked := placement.ChooseTargets(pn, req, d.rnd)
	d.mu.Unlock()
	out := make([]namespace.DataNodeInfo, len(picked))
	for i, p := range picked {
		out[i] = info(byID[p.ID])
	}
	return out, nil
}

// Replicas implements namespace.DataNodes: the registry's reported
// replicas, ordered by placement.SortForReader (dead DataNodes left out);
// corrupt replicas come last.
func (d *DataNodes) Replicas(ctx context.Context, blocks []uint64, reader namespace.Location) ([][]namespace.ReplicaInfo, error) {
	located, err := d.cfg.Registry.ReplicasOf(ctx, blocks)
	if err != nil {
		return nil, err
	}
	out := make([][]namespace.ReplicaInfo, len(blocks))
	for i, ls := range located {
		byNode := make(map[uint64]registry.Located, len(ls))
		var good, bad []placement.Node
		for _, l := range ls {
			byNode[l.Node.ID] = l
			if l.Replica.State == store.ReplicaCorrupt {
				bad = append(bad, l.Node.PlacementNode())
			} else {
				good = append(good, l.Node.PlacementNode())
			}
		}
		d.mu.Lock()
		sorted := append(placement.SortForReader(loc(reader), good, d.rnd), placement.SortForReader(loc(reader), bad, d.rnd)...)
		d.mu.Unlock()
		for _, p := range sorted {
			l := byNode[p.ID]
			out[i] = append(out[i], namespace.ReplicaInfo{Node: info(l.Node), GenStamp: l.Replica.GenStamp,
				Length: l.Replica.Length, State: State(l.Replica.State)})
		}
	}
	return out, nil
}

// State converts a replica state of the store (the registry's rows, the
// DataNode commands' answers) to the namespace's.
func State(s store.ReplicaState) namespace.ReplicaState {
	switch s {
	case store.ReplicaFinalized:
		return namespace.ReplicaFinalized
	case store.ReplicaBeingWritten:
		return namespace.ReplicaBeingWritten
	}
	return namespace.ReplicaCorrupt
}

// Token implements namespace.DataNodes.
func (d *DataNodes) Token(user string, block uint64, modes ...namespace.TokenMode) namespace.BlockToken {
	ms := make([]blocktoken.AccessMode, len(modes))
	for i, m := range modes {
		ms[i] = blocktoken.AccessMode(m)
	}
	t := d.tokens.IssueFor(user, d.cfg.Cluster.BlockPoolID, block, d.cfg.TokenLifetime, ms...)
	return namespace.BlockToken{Identifier: t.Identifier, Password: t.Password, Kind: t.Kind, Service: t.Service}
}

// BlockToken converts a token of the namespace to the data transfer
// protocol's.
func BlockToken(t namespace.BlockToken) blocktoken.Token {
	return blocktoken.Token{Identifier: t.Identifier, Password: t.Password, Kind: t.Kind, Service: t.Service}
}

// Targets converts DataNodes the engine named (a pipeline, a block's
// replicas) to the data transfer protocol's targets.
func Targets(ds []namespace.DataNodeInfo) []dataxfer.Target {
	out := make([]dataxfer.Target, len(ds))
	for i, d := range ds {
		out[i] = dataxfer.Target{Addr: d.DataAddr, UUID: d.UUID, Hostname: d.Host, StorageID: d.StorageID}
	}
	return out
}
