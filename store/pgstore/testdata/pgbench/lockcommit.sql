-- A read under a row lock as pgstore sent it before session 19: the row FOR SHARE, a
-- second row read, COMMIT (which waits for the lock records' WAL flush).
\set d random(16, 1015)
\set i random(0, 99)
BEGIN;
SELECT value FROM nimbus_kv WHERE key = 'i'::bytea || int8send(:d) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8') FOR SHARE;
SELECT value FROM nimbus_kv WHERE key = 'i'::bytea || int8send(:d) || convert_to('part-' || lpad(((:i + 1) % 100)::text, 5, '0'), 'UTF8');
COMMIT;
