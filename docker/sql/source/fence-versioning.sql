-- Per-fence versions, tombstones and the fence_stats fingerprint (DESIGN.md section 3).
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
-- The versioning of one fences table is made by geofence_versioning(table, id column), below: this
-- file applies it to the shipped fences table if there is one. A table of your own needs a
-- "seq bigint NOT NULL DEFAULT 1" column; its id, geometry and tenant columns may have other names
-- (the job's --id-column, --geometry-column and --tenant-column):
--   SELECT geofence_versioning('zones', 'zone_id');

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

-- The job writes this row every heartbeat interval and its CDC source reads it back from the
-- stream: the commit times advance the fence stream's event-time clock while fences are idle, so
-- locations are never held for longer than a heartbeat.
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

-- A rebuild reads one subtask's buckets of tombstones (and of fences, below) with one indexed query.
CREATE INDEX IF NOT EXISTS fence_tombstones_bucket ON fence_tombstones (fence_bucket(id));

-- Every bucket has its row from the start, so a subtask sees the fingerprint of every bucket it
-- owns, empty ones included, and knows when it has seen them all.
INSERT INTO fence_bucket_stats (bucket, fence_count, checksum)
SELECT b, 0, 0 FROM generate_series(0, 4095) b
ON CONFLICT (bucket) DO NOTHING;

-- The versioning of a fences table: the seq trigger, the statement triggers that keep fence_stats
-- and fence_bucket_stats, TRUNCATE refused, the index a rebuild reads by, REPLICA IDENTITY FULL
-- (deletes must carry the whole old row) and the table in the publication. The triggers and their
-- functions are named after the table (fences_version, fences_inserted, ...) and written with its
-- id column, so they run as plain SQL. Idempotent; counts what the table holds already, so it can
-- be applied to a loaded table too.
CREATE OR REPLACE FUNCTION geofence_versioning(fences regclass, id_column name DEFAULT 'id',
                                               publication name DEFAULT 'geofence_publication')
    RETURNS void LANGUAGE plpgsql AS $versioning$
DECLARE
    tbl   text := fences::text;
    base  name := (SELECT relname FROM pg_class WHERE oid = fences);
    id    text := quote_ident(id_column) || '::text';
    stamp text := CASE WHEN EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = fences AND attname = 'updated_at'
                                    AND attnum > 0 AND NOT attisdropped)
                       THEN 'NEW.updated_at := now();' ELSE '' END;
BEGIN
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (fence_bucket(%s))', base || '_bucket', tbl, id);
    EXECUTE format('INSERT INTO fence_stats (fence_count, checksum)'
        ' SELECT count(*), coalesce(bit_xor(fence_hash(%s, seq)), 0) FROM %s ON CONFLICT (id) DO NOTHING', id, tbl);
    EXECUTE format('UPDATE fence_bucket_stats s SET fence_count = f.n, checksum = f.x'
        ' FROM (SELECT fence_bucket(%1$s) AS bucket, count(*) AS n, bit_xor(fence_hash(%1$s, seq)) AS x FROM %2$s GROUP BY 1) f'
        ' WHERE s.bucket = f.bucket AND s.fence_count = 0 AND s.checksum = 0', id, tbl);

    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                NEW.seq := coalesce((SELECT t.seq FROM fence_tombstones t WHERE t.id = NEW.%2$I::text), 0) + 1;
            ELSE
                IF NEW.%2$I IS DISTINCT FROM OLD.%2$I THEN
                    RAISE EXCEPTION 'fence id %% cannot change to %%: delete it and insert the new id', OLD.%2$I, NEW.%2$I;
                END IF;
                NEW.seq := OLD.seq + 1;
            END IF;
            %3$s
            RETURN NEW;
        END $$ $f$, base || '_version', id_column, stamp);

    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO fence_bucket_stats AS b (bucket, fence_count, checksum)
            SELECT fence_bucket(%2$s), count(*), bit_xor(fence_hash(%2$s, seq)) FROM new_rows GROUP BY 1
            ON CONFLICT (bucket) DO UPDATE SET fence_count = b.fence_count + excluded.fence_count,
                checksum = b.checksum # excluded.checksum, version = b.version + 1;
            UPDATE fence_stats SET
                fence_count = fence_count + (SELECT count(*) FROM new_rows),
                checksum = checksum # coalesce((SELECT bit_xor(fence_hash(%2$s, seq)) FROM new_rows), 0),
                updated_at = now();
            RETURN NULL;
        END $$ $f$, base || '_inserted', id);

    -- An id never changes (the seq trigger refuses it), so each bucket keeps its count.
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE fence_bucket_stats b SET checksum = b.checksum # d.x, version = b.version + 1
            FROM (SELECT fence_bucket(id) AS bucket, bit_xor(h) AS x
                  FROM (SELECT %2$s AS id, fence_hash(%2$s, seq) AS h FROM old_rows
                        UNION ALL SELECT %2$s, fence_hash(%2$s, seq) FROM new_rows) changed
                  GROUP BY 1) d
            WHERE b.bucket = d.bucket;
            UPDATE fence_stats SET
                checksum = checksum
                    # coalesce((SELECT bit_xor(fence_hash(%2$s, seq)) FROM old_rows), 0)
                    # coalesce((SELECT bit_xor(fence_hash(%2$s, seq)) FROM new_rows), 0),
                updated_at = now();
            RETURN NULL;
        END $$ $f$, base || '_updated', id);

    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO fence_tombstones (id, seq)
            SELECT %2$s, seq + 1 FROM old_rows
            ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, deleted_at = now();
            UPDATE fence_bucket_stats b SET fence_count = b.fence_count - d.n, checksum = b.checksum # d.x,
                version = b.version + 1
            FROM (SELECT fence_bucket(%2$s) AS bucket, count(*) AS n, bit_xor(fence_hash(%2$s, seq)) AS x
                  FROM old_rows GROUP BY 1) d
            WHERE b.bucket = d.bucket;
            UPDATE fence_stats SET
                fence_count = fence_count - (SELECT count(*) FROM old_rows),
                checksum = checksum # coalesce((SELECT bit_xor(fence_hash(%2$s, seq)) FROM old_rows), 0),
                updated_at = now();
            RETURN NULL;
        END $$ $f$, base || '_deleted', id);

    -- Truncation would bypass the row triggers and leave fence_stats wrong: refuse it.
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION %2$L;
        END $$ $f$, base || '_no_truncate',
        format('TRUNCATE %s would bypass its versioning; use DELETE FROM %s', tbl, tbl));

    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_version', tbl);
    EXECUTE format('CREATE TRIGGER %1$I BEFORE INSERT OR UPDATE ON %2$s FOR EACH ROW EXECUTE FUNCTION %1$I()',
        base || '_version', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_inserted', tbl);
    EXECUTE format('CREATE TRIGGER %1$I AFTER INSERT ON %2$s REFERENCING NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %1$I()', base || '_inserted', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_updated', tbl);
    EXECUTE format('CREATE TRIGGER %1$I AFTER UPDATE ON %2$s REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %1$I()', base || '_updated', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_deleted', tbl);
    EXECUTE format('CREATE TRIGGER %1$I AFTER DELETE ON %2$s REFERENCING OLD TABLE AS old_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %1$I()', base || '_deleted', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_no_truncate', tbl);
    EXECUTE format('CREATE TRIGGER %1$I BEFORE TRUNCATE ON %2$s FOR EACH STATEMENT EXECUTE FUNCTION %1$I()',
        base || '_no_truncate', tbl);

    -- The publication the job's CDC source reads (pgoutput). The tombstones are in it because the
    -- initial snapshot must know deleted fences' seqs: a fence re-created later continues from them.
    -- Created here, by the tables' owner, so the job needs no ownership and Flink CDC's "filtered"
    -- mode, which narrows the publication to one table at a time during its snapshot, is never used.
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = publication) THEN
        EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s, fence_tombstones, fence_stats, fence_bucket_stats, fence_heartbeat',
            publication, tbl);
    ELSIF NOT EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
                      WHERE p.pubname = publication AND r.prrelid = fences) THEN
        EXECUTE format('ALTER PUBLICATION %I ADD TABLE %s', publication, tbl);
    END IF;
END $versioning$;

-- The shipped table, when fences-postgis.sql or fences-wkb.sql made it.
DO $$
BEGIN
    IF to_regclass('fences') IS NOT NULL THEN
        PERFORM geofence_versioning('fences');
    END IF;
END $$;
