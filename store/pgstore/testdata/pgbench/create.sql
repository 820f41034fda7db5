-- What Nimbus sends for a create (as `nimbus bench micro --op create` does it), checked by
-- scripts/bench-pg.sh against the server's statement log (log_statement=all) on every run. Two
-- round trips: BEGIN, the read-committed read of the parent's ancestors and the locking read of
-- the parent and the new name (nimbus_lock, schema.go: the new name has no row, so it takes an
-- advisory lock on the key's hash) in one pipelined batch; then the writes (the parent's row and
-- the new file's) and COMMIT in another. The header lines are the statements sent per operation,
-- verbatim. Below, the parameters are those of a new file in the directory of a random file of the
-- prepared tree (nimbus_pgbench_paths: its ancestors, its row, the prefix 'i' || id of its
-- children's keys; the values written are that directory's row and a file's row as they were).
-- Run with -M prepared -D paths=N (the rows of that table).
-- nimbus: BEGIN
-- nimbus: SELECT key, value FROM nimbus_kv WHERE key = ANY($1::bytea[])
-- nimbus: SELECT ord, value FROM nimbus_lock($1::bytea[], $2::int8[], $3, $4)
-- nimbus: INSERT INTO nimbus_kv (key, value) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS u(k, v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
-- nimbus: COMMIT
\set n random(1, :paths)
\set f random(1, 2000000000)
\startpipeline
BEGIN;
SELECT key, value FROM nimbus_kv WHERE key = ANY((SELECT anc FROM nimbus_pgbench_paths WHERE n = :n)::bytea[]);
SELECT ord, value FROM nimbus_lock((SELECT ARRAY[dkey, prefix || convert_to('pgbench-' || :f, 'UTF8')] FROM nimbus_pgbench_paths WHERE n = :n), ARRAY[:n, :f]::int8[], true, false);
\endpipeline
\startpipeline
INSERT INTO nimbus_kv (key, value) SELECT k, v FROM unnest((SELECT ARRAY[dkey, prefix || convert_to('pgbench-' || :f, 'UTF8')] FROM nimbus_pgbench_paths WHERE n = :n), (SELECT ARRAY[dval, fval] FROM nimbus_pgbench_paths WHERE n = :n)) AS u(k, v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
COMMIT;
\endpipeline
