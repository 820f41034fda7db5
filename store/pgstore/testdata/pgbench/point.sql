-- A read-committed read of one key: what pgstore sends for a stat of a file
-- whose ancestors the namespace has cached (readOne in txn.go).
\set d random(16, 1015)
\set i random(0, 99)
SELECT value FROM nimbus_kv WHERE key = 'i'::bytea || int8send(:d) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8');
