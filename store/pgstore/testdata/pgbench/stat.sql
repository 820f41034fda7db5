-- What Nimbus sends for a stat (as `nimbus bench micro --op stat` does it), checked by
-- scripts/bench-pg.sh against the server's statement log (log_statement=all) on every run: one
-- read-committed statement reading the whole path, root to file, in one round trip. The header
-- lines are the statements sent per operation, verbatim; below, $1 is the key array of a random
-- file of the prepared tree, taken from nimbus_pgbench_paths (which bench-pg.sh fills with the
-- arrays the logged stats sent). Run with -M prepared -D paths=N (the rows of that table).
-- nimbus: SELECT key, value FROM nimbus_kv WHERE key = ANY($1::bytea[])
\set n random(1, :paths)
SELECT key, value FROM nimbus_kv WHERE key = ANY((SELECT keys FROM nimbus_pgbench_paths WHERE n = :n)::bytea[]);
