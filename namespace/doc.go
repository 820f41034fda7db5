// Package namespace is the HopsFS metadata engine: it implements
// meta.FileSystem on any store.Store.
//
// Every operation is one store transaction built from the HopsFS template
// (paper 004, section 5):
//
//  1. Hints. The inode hint cache maps (parent id, name) to an inode id, so the
//     primary keys of every component of a path are known without reading.
//  2. Lock phase. The keys an operation needs are locked in one global order
//     (the byte order of keys), each at the strongest mode the operation will
//     need (no upgrades), and read in one batch together with the ancestors,
//     which are read without locks (read-committed). Locking in one order makes
//     the engine deadlock-free; locks taken outside that order (the descendants
//     of a directory being deleted) use NoWait and restart the operation.
//  3. Validation. The rows read must form the path the hints promised; if a
//     concurrent rename or delete made a hint stale, the transaction is rolled
//     back, the hints are dropped and the operation starts again.
//  4. Execute on the per-transaction copies of the rows, then write back in one
//     batch; Commit makes the result durable before the operation returns.
//
// Which rows each operation locks is listed beside the operation. The rules:
// the last component is locked shared by readers of file content and
// exclusive by writers; the parent directory is locked exclusive by anything
// that adds or removes entries (it holds the entry count and mtime); a listing
// locks the directory shared; a rename also locks every ancestor of both paths
// shared, so that its check "never into its own subtree" cannot be raced.
//
// Leases on files under construction are kept in the store (the lease table);
// their renewal times are kept in memory, as HDFS's LeaseManager does, and
// restart from the time the engine starts. A lease is held by a client name
// for the user who opened the file: writes, blocks, close and renewal from
// any other user are refused (ErrPermission), the superuser's too, since
// client names are the clients' to choose.
//
// A write whose context carries a meta.Request (the RPC server puts the
// client's name and request id there) is recorded in the store in its own
// transaction, for Config.RequestTTL: the same request sent again after a
// lost reply, to this engine or another on the same store, is answered from
// the record instead of being applied again (once.go). meta.ErrBusy means
// the operation did not happen; meta.ErrOutcomeUnknown that it may have (a
// commit whose answer the store lost, not settled by a record).
//
// Every operation needs a user name: an empty one is refused (ErrPermission).
// Config.MinBlockSize and Config.MaxBlocksPerFile are HDFS's fs-limits on
// block size and blocks per file.
package namespace
