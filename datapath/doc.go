// Package datapath connects the namespace engine's DataNode mode to the
// cluster's DataNodes: DataNodes implements namespace.DataNodes over the
// DataNode registry (datanode/registry: who is live, which replicas are
// reported), placement (targets for a new block, replicas ordered for a
// reader) and block tokens (dataxfer/blocktoken) issued under the key the
// DataNodes verify with, derived from the cluster secret.
//
// A NameNode makes one DataNodes and gives it to namespace.Config.DataNodes:
//
//	reg, _ := registry.New(st, registry.DefaultConfig())
//	cluster, _ := registry.LoadCluster(ctx, st)
//	dn, _ := datapath.New(datapath.Config{Registry: reg, Cluster: cluster, Secret: secret})
//	cfg.DataNodes = dn
//
// The registry judges a DataNode live only once it has seen its heartbeat
// count move, so a DataNodes made at a NameNode's start chooses no target
// until a heartbeat period has passed: AddBlock answers "no DataNode
// available" (retryable) meanwhile.
//
// A client of the DataNode mode converts what the engine answers with
// Targets (a pipeline or a block's replicas as dataxfer targets) and
// BlockToken (the token dataxfer sends). State converts a replica state of
// the store, as the DataNode commands answer it, for an adapter of
// namespace.BlockRecovery over those commands.
package datapath
