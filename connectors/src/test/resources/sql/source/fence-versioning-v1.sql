-- The source migration as the project shipped it before issue 13, kept unchanged below this
-- comment: one fence_stats row that every statement updated, the bucket rows updated by each
-- statement. The upgrade tests and bench/run source --compare start from it.
--
-- Per-fence versions, tombstones and the fence_stats fingerprint (docs/design.md#source-of-truth-contract).
-- Apply after fences-postgis.sql or fences-wkb.sql. Needs PostgreSQL 14+ (bit_xor).
--
-- seq is a contiguous version per fence: an insert takes 1, or its tombstone's seq + 1 when the id
-- was deleted before; an update takes old.seq + 1; a delete is version old.seq + 1, recorded in
-- fence_tombstones. A jump in a fence's seq in the change stream therefore proves a lost edit.
-- (The change stream carries a delete's old row, so a reader gives the delete seq = old.seq + 1.)
-- A tombstone stays when its id is re-created: a reader that rebuilds from the tables after
-- missing the history still learns that the fence was deleted in between (its objects EXIT).
--
-- fence_stats holds, in the same transaction as every edit, the live fence count and the XOR over
-- live fences of fence_hash(id, seq); fence_bucket_stats the same per bucket. Statement-level
-- triggers with transition tables keep them at one update per statement (and per bucket touched),
-- so a bulk load of a million fences updates each row once.
--
-- Tables with other names: copy this file and rename fences, id and seq throughout.

CREATE TABLE IF NOT EXISTS fence_tombstones (
    id          text PRIMARY KEY,
    seq         bigint NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);

-- An int key, not a boolean: Flink CDC's snapshot splits tables by their key's min and max.
CREATE TABLE IF NOT EXISTS fence_stats (
    id           int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    fence_count  bigint NOT NULL,
    checksum     bigint NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE fence_stats REPLICA IDENTITY FULL;

-- The same fingerprint per bucket of fences: bucket = the low 12 bits of the first 4 bytes of
-- md5(id), 4096 buckets. The job maps bucket b onto Flink key group b mod max-parallelism, so each
-- subtask can check its own fences against the buckets it owns, at the same LSN, from the stream.
-- version counts the row's updates, one per statement that edits the bucket: a reader that
-- rebuilt a bucket from a table read knows which streamed fingerprints are older than its read,
-- and a reader that restored knows whether the stream skipped any (a version missing or jumped).
CREATE TABLE IF NOT EXISTS fence_bucket_stats (
    bucket       int PRIMARY KEY CHECK (bucket BETWEEN 0 AND 4095),
    fence_count  bigint NOT NULL,
    checksum     bigint NOT NULL,
    version      bigint NOT NULL DEFAULT 0
);
ALTER TABLE fence_bucket_stats REPLICA IDENTITY FULL;

-- The job's CDC source writes this row every heartbeat interval (Debezium's heartbeat.action.query)
-- and reads it back from the stream: the commit times advance the fence stream's event-time clock
-- while fences are idle, so locations are never held for longer than a heartbeat.
CREATE TABLE IF NOT EXISTS fence_heartbeat (
    id       int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    beat_at  timestamptz NOT NULL DEFAULT now()
);

-- h(id, seq): the first 8 bytes of md5(id || ':' || seq) as a signed big-endian bigint.
CREATE OR REPLACE FUNCTION fence_hash(id text, seq bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ('x' || substr(md5(id || ':' || seq::text), 1, 16))::bit(64)::bigint $$;

CREATE OR REPLACE FUNCTION fence_bucket(id text) RETURNS int
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ('x' || substr(md5(id), 1, 8))::bit(32)::int & 4095 $$;

-- A rebuild reads one subtask's buckets of fences and tombstones with one indexed query each.
CREATE INDEX IF NOT EXISTS fences_bucket ON fences (fence_bucket(id));
CREATE INDEX IF NOT EXISTS fence_tombstones_bucket ON fence_tombstones (fence_bucket(id));

-- Counts whatever is already in the table, so the file can be applied to a loaded table too.
INSERT INTO fence_stats (fence_count, checksum)
SELECT count(*), coalesce(bit_xor(fence_hash(id, seq)), 0) FROM fences
ON CONFLICT (id) DO NOTHING;
-- Every bucket has its row from the start, so a subtask sees the fingerprint of every bucket it
-- owns, empty ones included, and knows when it has seen them all.
INSERT INTO fence_bucket_stats (bucket, fence_count, checksum)
SELECT b, 0, 0 FROM generate_series(0, 4095) b
ON CONFLICT (bucket) DO NOTHING;
UPDATE fence_bucket_stats s SET fence_count = f.n, checksum = f.x
FROM (SELECT fence_bucket(id) AS bucket, count(*) AS n, bit_xor(fence_hash(id, seq)) AS x FROM fences GROUP BY 1) f
WHERE s.bucket = f.bucket AND s.fence_count = 0 AND s.checksum = 0;


CREATE OR REPLACE FUNCTION fences_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.seq := coalesce((SELECT t.seq FROM fence_tombstones t WHERE t.id = NEW.id), 0) + 1;
    ELSE
        IF NEW.id IS DISTINCT FROM OLD.id THEN
            RAISE EXCEPTION 'fence id % cannot change to %: delete it and insert the new id', OLD.id, NEW.id;
        END IF;
        NEW.seq := OLD.seq + 1;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION fences_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fence_bucket_stats AS b (bucket, fence_count, checksum)
    SELECT fence_bucket(id), count(*), bit_xor(fence_hash(id, seq)) FROM new_rows GROUP BY 1
    ON CONFLICT (bucket) DO UPDATE SET fence_count = b.fence_count + excluded.fence_count,
        checksum = b.checksum # excluded.checksum, version = b.version + 1;
    UPDATE fence_stats SET
        fence_count = fence_count + (SELECT count(*) FROM new_rows),
        checksum = checksum # coalesce((SELECT bit_xor(fence_hash(id, seq)) FROM new_rows), 0),
        updated_at = now();
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fences_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- An id never changes (fences_version refuses it), so each bucket keeps its count.
    UPDATE fence_bucket_stats b SET checksum = b.checksum # d.x, version = b.version + 1
    FROM (SELECT fence_bucket(id) AS bucket, bit_xor(h) AS x
          FROM (SELECT id, fence_hash(id, seq) AS h FROM old_rows
                UNION ALL SELECT id, fence_hash(id, seq) FROM new_rows) changed
          GROUP BY 1) d
    WHERE b.bucket = d.bucket;
    UPDATE fence_stats SET
        checksum = checksum
            # coalesce((SELECT bit_xor(fence_hash(id, seq)) FROM old_rows), 0)
            # coalesce((SELECT bit_xor(fence_hash(id, seq)) FROM new_rows), 0),
        updated_at = now();
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION fences_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fence_tombstones (id, seq)
    SELECT id, seq + 1 FROM old_rows
    ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, deleted_at = now();
    UPDATE fence_bucket_stats b SET fence_count = b.fence_count - d.n, checksum = b.checksum # d.x,
        version = b.version + 1
    FROM (SELECT fence_bucket(id) AS bucket, count(*) AS n, bit_xor(fence_hash(id, seq)) AS x FROM old_rows GROUP BY 1) d
    WHERE b.bucket = d.bucket;
    UPDATE fence_stats SET
        fence_count = fence_count - (SELECT count(*) FROM old_rows),
        checksum = checksum # coalesce((SELECT bit_xor(fence_hash(id, seq)) FROM old_rows), 0),
        updated_at = now();
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS fences_version ON fences;
CREATE TRIGGER fences_version BEFORE INSERT OR UPDATE ON fences
    FOR EACH ROW EXECUTE FUNCTION fences_version();

DROP TRIGGER IF EXISTS fences_inserted ON fences;
CREATE TRIGGER fences_inserted AFTER INSERT ON fences
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION fences_inserted();

DROP TRIGGER IF EXISTS fences_updated ON fences;
CREATE TRIGGER fences_updated AFTER UPDATE ON fences
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION fences_updated();

DROP TRIGGER IF EXISTS fences_deleted ON fences;
CREATE TRIGGER fences_deleted AFTER DELETE ON fences
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION fences_deleted();

-- Truncation would bypass the row triggers and leave fence_stats wrong: refuse it.
CREATE OR REPLACE FUNCTION fences_no_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'TRUNCATE fences would bypass its versioning; use DELETE FROM fences';
END $$;
DROP TRIGGER IF EXISTS fences_no_truncate ON fences;
CREATE TRIGGER fences_no_truncate BEFORE TRUNCATE ON fences
    FOR EACH STATEMENT EXECUTE FUNCTION fences_no_truncate();

-- The publication the job's CDC source reads (pgoutput). The tombstones are in it because the
-- initial snapshot must know deleted fences' seqs: a fence re-created later continues from them. Created here, by the tables' owner, so
-- the job needs no ownership and Flink CDC's "filtered" mode, which narrows the publication to
-- one table at a time during its snapshot, is never used.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'geofence_publication') THEN
        CREATE PUBLICATION geofence_publication FOR TABLE fences, fence_tombstones, fence_stats, fence_bucket_stats, fence_heartbeat;
    END IF;
END $$;
