-- bench/run source: one statement per transaction on one random fence of f-1 .. f-:fences.
-- 8 in 10 update it, 1 deletes it, 1 creates or reshapes it (an upsert: re-creates a deleted one).
\set id random(1, :fences)
\set op random(1, 10)
\if :op <= 8
UPDATE fences SET name = 'edited' WHERE id = 'f-' || :id;
\elif :op = 9
DELETE FROM fences WHERE id = 'f-' || :id;
\else
INSERT INTO fences (id, geom) VALUES ('f-' || :id, ST_MakeEnvelope(:id % 300 * 0.1, :id / 300 * 0.1, :id % 300 * 0.1 + 0.01, :id / 300 * 0.1 + 0.01, 4326))
    ON CONFLICT (id) DO UPDATE SET geom = excluded.geom;
\endif
