-- Seven keys in one statement (readMany in txn.go): a stat at depth 7
-- without cached ancestors.
\set d1 random(16, 1015)
\set d2 random(16, 1015)
\set d3 random(16, 1015)
\set d4 random(16, 1015)
\set d5 random(16, 1015)
\set d6 random(16, 1015)
\set d7 random(16, 1015)
\set i random(0, 99)
SELECT r.ord, t.value FROM unnest(ARRAY[
  'i'::bytea || int8send(:d1) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d2) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d3) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d4) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d5) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d6) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8'),
  'i'::bytea || int8send(:d7) || convert_to('part-' || lpad(:i::text, 5, '0'), 'UTF8')])
  WITH ORDINALITY AS r(key, ord) JOIN nimbus_kv t ON t.key = r.key;
