// Package pgstore is a store.Store on a PostgreSQL database (15 or later),
// so that several Nimbus servers can share one namespace, as HopsFS's
// NameNodes share one MySQL Cluster database.
//
// The whole key space is one table, nimbus_kv (key bytea primary key, value
// bytea); store.Txn's locks are PostgreSQL's row locks (SELECT ... FOR SHARE
// / FOR UPDATE [NOWAIT]) held by a READ COMMITTED transaction, and the
// store's lock-wait limit is the session's lock_timeout. docs/STORE.md says
// how the table is laid out and why, and what each setting means.
//
// Round trips are the cost that matters (a stat is a handful of key reads),
// so a transaction is lazy: reads without locks and scans run as single
// autocommit statements on any pooled connection, and the transaction takes
// a connection and sends BEGIN only with its first locking read, in the same
// pipelined batch. Commit sends the buffered writes and COMMIT in one batch.
// The metric nimbus_pgstore_round_trips_total counts the round trips.
//
// The store keeps no row or scan cache: other servers write the same
// database, and a cache here would serve their rows stale.
//
//	st, err := pgstore.Open(ctx, "postgres://nimbus@db:5432/nimbus", pgstore.DefaultOptions())
package pgstore
