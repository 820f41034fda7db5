-- The table of store/pgstore (schema.go, version 1) with the benchmarks'
-- 100,000 inode-shaped rows: 1,000 directories (ids 16..1015) of 100
-- entries "part-00000".."part-00099", values of 120 bytes. Run it on an
-- empty database created by pgstore.Open (for nimbus_lock) or by hand:
--   psql URL -f setup.sql
CREATE TABLE IF NOT EXISTS nimbus_kv (key bytea PRIMARY KEY, value bytea NOT NULL) WITH (fillfactor = 90);
INSERT INTO nimbus_kv
SELECT 'i'::bytea || int8send(d) || convert_to('part-' || lpad(i::text, 5, '0'), 'UTF8'), convert_to(repeat('v', 120), 'UTF8')
FROM generate_series(16, 1015) d, generate_series(0, 99) i
ON CONFLICT DO NOTHING;
VACUUM ANALYZE nimbus_kv;
