-- bench/run source: one statement per transaction, on three fences: as single-row.sql, with three
-- ids per statement. The rows are taken in id order (the index's), as a careful application
-- does, so that the application itself cannot deadlock.
\set op random(1, 10)
\if :op <= 8
\set a random(1, :fences)
\set b random(1, :fences)
\set c random(1, :fences)
UPDATE fences SET name = 'edited' WHERE id IN ('f-' || :a, 'f-' || :b, 'f-' || :c);
\else
\set a random(1, :churn)
\set b random(1, :churn)
\set c random(1, :churn)
\if :op = 9
DELETE FROM fences WHERE id IN ('c-' || :a, 'c-' || :b, 'c-' || :c);
\else
INSERT INTO fences (id, geom)
SELECT DISTINCT 'c-' || i, ST_MakeEnvelope(i % 100 * 0.1, i / 100 * 0.1, i % 100 * 0.1 + 0.01, i / 100 * 0.1 + 0.01, 4326)
FROM unnest(ARRAY[:a, :b, :c]) i ORDER BY 1
ON CONFLICT (id) DO UPDATE SET geom = excluded.geom;
\endif
\endif
