-- A create-shaped transaction on the table of setup.sql (BenchmarkCreateTxn), keys built
-- server-side: BEGIN with the locking read of the parent and the new name (nimbus_lock, schema.go) in
-- one pipelined batch, then the writes and COMMIT in another: two round
-- trips.
\set d random(16, 1015)
\set n random(1, 2000000000)
\startpipeline
BEGIN;
SELECT ord, value FROM nimbus_lock(ARRAY['i'::bytea || int8send(:d) || convert_to('part-00000', 'UTF8'), 'i'::bytea || int8send(:d) || convert_to('new-' || :n, 'UTF8')], ARRAY[:d, :n]::int8[], true, false);
\endpipeline
\startpipeline
INSERT INTO nimbus_kv (key, value) SELECT k, v FROM unnest(ARRAY['i'::bytea || int8send(:d) || convert_to('new-' || :n, 'UTF8'), 'i'::bytea || int8send(:d) || convert_to('part-00000', 'UTF8')], ARRAY[convert_to(repeat('v', 120), 'UTF8'), convert_to(repeat('w', 120), 'UTF8')]) AS u(k, v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
COMMIT;
\endpipeline
