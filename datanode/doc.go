// Package datanode is the DataNode process (`nimbus datanode`): it keeps
// block replicas in a storage directory, serves them on its data port
// through a data transfer server (DataServer; package dataxfer speaks
// HDFS's DataTransferProtocol), and publishes itself and its replicas in
// the metadata store that every NameNode reads (package registry), as λFS
// does: heartbeats every 3 s, a full block report at start and every 6 h,
// and an incremental report after every replica change.
//
// Use: New(ctx, cfg, st) opens the directory, the replicas and the ports
// and registers; Run(ctx) serves until ctx ends; Close stops it.
//
// The storage directory is laid out as an HDFS DataNode volume (storage.go:
// in_use.lock, current/VERSION, current/<block pool>/current/ holding
// blocks/local's finalized/ and rbw/). Its VERSION file records the
// cluster id, which must be the store's: a directory of another cluster is
// refused (ErrOtherCluster), so replicas of one cluster are never
// reported as another's.
//
// Every change of a replica goes through the store the DataNode hands its
// data server (DataServerEnv.Store), which queues it for the next
// incremental report; reports are sent by one goroutine, one at a time,
// as the registry requires.
//
// The data server is dataxfer.Server unless Config.NewDataServer makes
// another; it checks block tokens under a key derived from the cluster
// secret (read from the store, as NameNodes read it to issue them). The
// HTTP port serves /metrics, /healthz and the NameNodes' commands
// (commands.go; package datanode/command is their client): block recovery
// in two steps, delete, replicate, each a member request signed with the
// cluster secret. See docs/BLOCKS.md, "DataNodes".
package datanode
