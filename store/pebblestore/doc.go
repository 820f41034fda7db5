// Package pebblestore is the embedded, durable implementation of store.Store
// on Pebble v2 (github.com/cockroachdb/pebble/v2), the default store of
// `nimbus serve`. docs/STORE.md records why Pebble was chosen (measured
// against bbolt and SQLite on the namespace's access pattern).
//
// # Usage
//
//	st, err := pebblestore.Open(dir, pebblestore.DefaultOptions())
//	defer st.Close()
//	txn, err := st.Begin(ctx)
//	defer txn.Rollback()
//	vals, err := txn.Read(ctx, []store.ReadReq{{Key: k, Mode: store.Exclusive}})
//	txn.Put(k, v)
//	err = txn.Commit(ctx)
//
// # How it maps the seam
//
//   - Locks: Pebble has no row locks; an in-process store/lockmgr table
//     gives Shared/Exclusive locks held to the end of the transaction. Every
//     writer of the namespace goes through this process, so in-process locks
//     are enough. Locking a key without a row excludes others like any key.
//   - Read: take the locks in the order given, then read the latest committed
//     value of each key (a point Get per key; values are copied into one slab).
//   - Scan: one Pebble iterator, which reads from an implicit snapshot: the
//     rows it returns are one consistent state even while writers commit.
//   - Commit: the buffered writes are one Pebble batch committed with
//     pebble.Sync; Commit returns once it is in the synced WAL. The locks are
//     released as soon as the batch is visible, before the fsync, and a
//     transaction that may have read an unsynced batch waits for its sync
//     before it ends (early lock release, txn.go; Options.HoldLocksThroughSync
//     turns it off). Pebble's commit pipeline groups concurrent syncing
//     batches into one WAL fsync, so N concurrent committers pay far fewer
//     than N fsyncs; Stats reports commits and WAL syncs to check it. The
//     log is kept written with zeros a few megabytes past its end
//     (walprefill.go), so that those fsyncs overwrite and do not grow it.
//   - AllocateIDs: a counter row per name, advanced under a mutex. The store
//     durably reserves Options.IDPrefetch ids beyond what it hands out, so
//     most calls touch no disk; a crash loses at most the reserved, unused
//     ids, and a clean Close records the exact position.
//
// # Durability
//
// A Commit or AllocateIDs that returned nil is in a synced WAL and survives
// kill -9 and power loss (to the extent the disk honours fsync); the tests
// check this by SIGKILLing a committing child process.
//
// # Failure
//
// A storage error the store cannot recover from fails it for good
// (fail-stop, failstop.go): a failed write, sync or creation of the
// write-ahead log (after a failed fsync what is durable is unknown), a flush
// or compaction that failed for want of space (Pebble would retry it for
// ever and stall every commit), a Fatalf of Pebble, or the directory
// removed, replaced or moved under it (identity.go: an identity file, the
// directory's inode, checked every Options.IdentityCheckInterval;
// identity_linux.go: any removal in the directory the store did not make,
// seen through inotify and judged after every log sync, before the commits
// it covers are acknowledged). From then on every operation returns an error
// wrapping store.ErrFailed at once, without entering Pebble; Failed and Err
// (store.Failer) tell the owner, which stops the process. Nothing recovers a
// panic of Pebble: the errors that would make it panic are kept from it. The
// next Open replays the log: every commit that returned nil is there. An
// Open whose replayed log cannot be flushed (a full disk) fails with the
// reason; OpenContext also gives up when its context ends.
package pebblestore
