-- bench/run source: one statement per transaction on three random fences of f-1 .. f-:fences.
-- 8 in 10 update them, 1 deletes them, 1 creates or reshapes them (an upsert). The rows are taken
-- in id order (the index's), as a careful application does, so the application itself cannot
-- deadlock.
\set a random(1, :fences)
\set b random(1, :fences)
\set c random(1, :fences)
\set op random(1, 10)
\if :op <= 8
UPDATE fences SET name = 'edited' WHERE id IN ('f-' || :a, 'f-' || :b, 'f-' || :c);
\elif :op = 9
DELETE FROM fences WHERE id IN ('f-' || :a, 'f-' || :b, 'f-' || :c);
\else
INSERT INTO fences (id, geom)
SELECT DISTINCT 'f-' || i, ST_MakeEnvelope(i % 300 * 0.1, i / 300 * 0.1, i % 300 * 0.1 + 0.01, i / 300 * 0.1 + 0.01, 4326)
FROM unnest(ARRAY[:a, :b, :c]) i ORDER BY 1
ON CONFLICT (id) DO UPDATE SET geom = excluded.geom;
\endif
