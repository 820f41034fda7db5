// Package blocks is the seam between the namespace engine and the DataNodes
// that hold file data: large files are cut into blocks, each kept as a
// replica named by (block id, generation stamp), with a CRC32C checksum per
// 512-byte chunk verified on every read, as in HDFS.
//
// The engine keeps a file's block rows (id, generation stamp, length) in the
// metadata store, changed in the same transaction as the inode, and calls a
// Store for the bytes. Nothing in the interface assumes the replica is on
// this machine: there are no paths, every call takes a context and data move
// as streams, so that DataNode processes with replication pipelines can
// implement the same Store over the network later.
//
// # A replica's life (HDFS names in parentheses)
//
//	Create ──► being written (rbw) ──Finalize──► finalized
//	              │   ▲    │                       │  │
//	        Close │   │    │ Recover(new gs)       │  │ OpenAppend(new gs),
//	  (stays rbw) ▼   │    └──────────────────────►│  │ Truncate(new gs)
//	        OpenAppend│(new gs)                    ▼  │
//	              └───┴────────────────────────── rbw ◄┘
//
// Each change of a replica's content other than a plain write (append,
// truncate, recovery) takes a new, larger generation stamp supplied by the
// engine, so that a replica with a stale stamp (for example on a DataNode
// that missed an append) can be told apart from the current one.
//
// Implementations: blocks/local (one in-process DataNode on local disk).
// blocks/blocktest is the conformance suite every implementation passes.
//
// File checksums: BlockChecksum and FileChecksum compute HDFS's
// MD5-of-MD5-of-CRC32C (GETFILECHECKSUM) from per-block digests, so that
// distcp can compare a Nimbus file with an HDFS one.
package blocks
