-- bench/run source: one statement per transaction, on one fence. 8 in 10 update one of the
-- table's fences (f-1 .. f-:fences, never deleted); 1 in 10 deletes and 1 in 10 creates (or
-- reshapes, an upsert) one of the churn ids (c-1 .. c-:churn). Deletes and creates balance when
-- half the churn ids are live, which is how the benchmark loads them, so the table keeps its size
-- however fast a run goes.
\set op random(1, 10)
\if :op <= 8
\set id random(1, :fences)
UPDATE fences SET name = 'edited' WHERE id = 'f-' || :id;
\elif :op = 9
\set id random(1, :churn)
DELETE FROM fences WHERE id = 'c-' || :id;
\else
\set id random(1, :churn)
INSERT INTO fences (id, geom) VALUES ('c-' || :id, ST_MakeEnvelope(:id % 100 * 0.1, :id / 100 * 0.1, :id % 100 * 0.1 + 0.01, :id / 100 * 0.1 + 0.01, 4326))
    ON CONFLICT (id) DO UPDATE SET geom = excluded.geom;
\endif
