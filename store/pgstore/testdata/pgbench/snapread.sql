-- The same two reads in one read-only snapshot, no lock: what a snapshot read
-- transaction would send (not built yet; docs/STORE.md).
\set d random(16, 1015)
\set i random(0, 99)
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT value FROM nimbus_kv WHERE key = 'i'::bytea || int8send(:d) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8');
SELECT value FROM nimbus_kv WHERE key = 'i'::bytea || int8send(:d) || convert_to('part-' || lpad(((:i + 1) % 100)::text, 5, '0'), 'UTF8');
COMMIT;
