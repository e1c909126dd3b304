-- bench/run source: four single-row statements in one transaction on random fences of f-1 ..
-- f-:fences: two updates, then a delete and the re-creation of one fence (so the table keeps its
-- size). At 100,000 fences two such transactions take the same two fences in opposite orders
-- about 2 times in 10^9, so the application itself practically never deadlocks: a deadlock here
-- is the contract's.
\set a random(1, :fences)
\set b random(1, :fences)
\set c random(1, :fences)
BEGIN;
UPDATE fences SET name = 'edited' WHERE id = 'f-' || :a;
UPDATE fences SET name = 'edited' WHERE id = 'f-' || :b;
DELETE FROM fences WHERE id = 'f-' || :c;
INSERT INTO fences (id, geom) VALUES ('f-' || :c, ST_MakeEnvelope(:c % 300 * 0.1, :c / 300 * 0.1, :c % 300 * 0.1 + 0.01, :c / 300 * 0.1 + 0.01, 4326))
    ON CONFLICT (id) DO UPDATE SET geom = excluded.geom;
END;
