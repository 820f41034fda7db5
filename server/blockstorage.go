package server

import (
	"context"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/blocks"
	"github.com/nimbus-fs/nimbus/blocks/local"
	"github.com/nimbus-fs/nimbus/datanode/command"
	"github.com/nimbus-fs/nimbus/datanode/registry"
	"github.com/nimbus-fs/nimbus/datapath"
	"github.com/nimbus-fs/nimbus/datapath/maintain"
	"github.com/nimbus-fs/nimbus/internal/clusterauth"
	"github.com/nimbus-fs/nimbus/namespace"
	"github.com/nimbus-fs/nimbus/store"
)

// The values of Config.BlockStorage.
const (
	// BlockStorageLocal keeps blocks in DataDir/blocks: clients send their
	// bytes in Write calls and this server stores them (the default).
	BlockStorageLocal = "local"
	// BlockStorageDataNodes keeps blocks on the DataNodes registered in the
	// store: the engine's DataNode mode (docs/NAMESPACE.md), with clients
	// writing and reading blocks on the DataNodes and asking this server
	// for blocks and their locations (AddBlock, GetBlockLocations, ...).
	BlockStorageDataNodes = "datanodes"
)

// openBlocks gives nc the block storage cfg.BlockStorage names: the local
// store in DataDir/blocks (kept in s.blocks), or the DataNodes of st over a
// registry (datapath), with block tokens under a key from the cluster
// secret, which the DataNodes derive alike.
func (s *Server) openBlocks(cfg Config, st store.Store, nc *namespace.Config) error {
	switch cfg.BlockStorage {
	case "", BlockStorageLocal:
		bc := local.DefaultConfig()
		bc.Logger = s.log.With("component", "blocks")
		bc.Registerer = s.reg
		bs, err := local.Open(BlocksDir(cfg.DataDir), bc)
		if err != nil {
			return fmt.Errorf("server: open block storage in %s: %w", BlocksDir(cfg.DataDir), err)
		}
		s.blocks = bs
		nc.Blocks = bs
		return nil
	case BlockStorageDataNodes:
	default:
		return fmt.Errorf("server: block storage %q: want %q or %q", cfg.BlockStorage, BlockStorageLocal, BlockStorageDataNodes)
	}
	if s.pebble != nil {
		return fmt.Errorf("server: block storage %q needs a PostgreSQL store: DataNodes are processes of their own that register in the store the server reads, and the embedded store opens in one process only", BlockStorageDataNodes)
	}
	// The registry the status views read: one reader for the server's
	// life, which liveness needs (a reader judges by the heartbeats it has
	// seen move).
	reg := s.dnodes.reg
	ctx := context.Background()
	cl, err := registry.LoadCluster(ctx, st)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	secret, err := clusterauth.LoadSecret(ctx, st)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	dc := datapath.Config{Registry: reg, Cluster: cl}
	copy(dc.Secret[:], secret)
	dn, err := datapath.New(dc)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	nc.Blocks = nil
	nc.DataNodes = dn
	cmds := &command.Client{Key: s.auth}
	nc.BlockRecovery = blockRecovery{c: cmds}
	mc := cfg.Maintenance.config()
	mc.Store, mc.Registry, mc.Commands = st, reg, cmds
	mc.Seed = uint64(time.Now().UnixNano())
	mc.Logger = s.log.With("component", "maintain")
	mc.Registerer = s.reg
	if s.maintainer, err = maintain.New(mc); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.log.Info("block storage on DataNodes", "blockPool", cl.BlockPoolID)
	return nil
}

// dataNodeLiveness is the registry configuration the server judges the
// DataNodes with.
func (c Config) dataNodeLiveness() registry.Config {
	if c.DataNodeLiveness.Heartbeat == 0 {
		return registry.DefaultConfig()
	}
	return c.DataNodeLiveness
}

// MaintenanceConfig bounds the replication duty (datapath/maintain) of
// the DataNode mode; zero fields take maintain.DefaultConfig's.
type MaintenanceConfig struct {
	// Interval between rounds (`--maintain-interval`).
	Interval time.Duration
	// OrphanGrace: how long a replica no block row names is seen so before
	// it is deleted (`--orphan-grace`).
	OrphanGrace time.Duration
	// BlocksPerRound: the most blocks a round acts on
	// (`--maintain-blocks-per-round`).
	BlocksPerRound int
}

// config is maintain.DefaultConfig with c's non-zero fields.
func (c MaintenanceConfig) config() maintain.Config {
	mc := maintain.DefaultConfig()
	if c.Interval > 0 {
		mc.Interval = c.Interval
	}
	if c.OrphanGrace > 0 {
		mc.OrphanGrace = c.OrphanGrace
	}
	if c.BlocksPerRound > 0 {
		mc.Limits.BlocksPerRound = c.BlocksPerRound
	}
	return mc
}

// blockRecovery is namespace.BlockRecovery over the DataNodes' commands
// (datanode/command), signed with the cluster secret.
type blockRecovery struct{ c *command.Client }

func (b blockRecovery) InitRecovery(ctx context.Context, httpAddr string, block namespace.BlockRef, recoveryID uint64) (namespace.RecoveredReplica, error) {
	ri, err := b.c.InitRecovery(ctx, httpAddr, blocks.ID{Block: block.ID, GenStamp: block.GenStamp}, recoveryID)
	if err != nil {
		return namespace.RecoveredReplica{}, err
	}
	return namespace.RecoveredReplica{GenStamp: ri.GenStamp, Length: ri.Length, State: datapath.State(ri.State)}, nil
}

func (b blockRecovery) FinishRecovery(ctx context.Context, httpAddr string, block namespace.BlockRef, recoveryID uint64, newLength int64) error {
	return b.c.FinishRecovery(ctx, httpAddr, blocks.ID{Block: block.ID, GenStamp: block.GenStamp}, recoveryID, newLength)
}

// closeBlocks closes the local block store, if the server has one.
func (s *Server) closeBlocks() {
	if s.blocks != nil {
		s.blocks.Close()
	}
}
