-- The source migration as the project shipped it after issue 13 (before the notes moved to row
-- triggers' WHEN conditions), kept unchanged below this comment: statement triggers that note
-- each statement's bucket changes, a deferred row trigger that folds them at commit. The upgrade
-- tests and bench/run source --compare start from it.
--
-- Per-fence versions, tombstones and the per-bucket fingerprints (docs/design.md#source-of-truth-contract).
-- Apply after fences-postgis.sql or fences-wkb.sql, in ONE transaction (psql --single-transaction,
-- as Migrations does): the LOCK below refuses to run outside one. Needs PostgreSQL 14+ (bit_xor).
-- Re-applying it is harmless, and is how a database with an earlier version is upgraded in place:
-- fence writes wait for geofence_versioning's lock, so no edit is ever made without the triggers.
--
-- seq is a contiguous version per fence: an insert takes 1, or its tombstone's seq + 1 when the id
-- was deleted before; an update takes old.seq + 1; a delete is version old.seq + 1, recorded in
-- fence_tombstones. A jump in a fence's seq in the change stream therefore proves a lost edit.
-- (The change stream carries a delete's old row, so a reader gives the delete seq = old.seq + 1.)
-- A tombstone stays when its id is re-created: a reader that rebuilds from the tables after
-- missing the history still learns that the fence was deleted in between (its objects EXIT).
--
-- fence_bucket_stats holds, in the same transaction as every edit, the live fence count and the
-- XOR over live fences of fence_hash(id, seq) of each bucket of fences. Writers must not contend
-- for it: each statement only notes its change per bucket (statement-level triggers with
-- transition tables, so a bulk load of a million fences notes one change per bucket) in a setting
-- of its transaction, and the transaction folds what it noted into the bucket rows as it commits,
-- in bucket order (a deferred constraint trigger). A transaction that waits for a bucket row is
-- then already committing and waits for nothing else, so the contract adds no lock cycle (no
-- deadlock) to the application's own, and holds a bucket row only while it commits. There is no
-- whole-table row: fence_stats is a view over the buckets.
--
-- The versioning of one fences table is made by geofence_versioning(table, id column[,
-- publication]), below: this file applies it to the shipped fences table if there is one. A table
-- of your own needs a "seq bigint NOT NULL DEFAULT 1" column; its id, geometry and tenant columns
-- may have other names (the job's --id-column, --geometry-column and --tenant-column). Version it
-- in the same transaction:
--   psql -1 -f fence-versioning.sql -c "SELECT geofence_versioning('zones', 'zone_id')"
-- The bucket fingerprints are those of one table: version one fences table per database.

CREATE TABLE IF NOT EXISTS fence_tombstones (
    id          text PRIMARY KEY,
    seq         bigint NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);

-- bucket = the low 12 bits of the first 4 bytes of md5(id), 4096 buckets. The job maps bucket b
-- onto Flink key group b mod max-parallelism, so each subtask can check its own fences against the
-- buckets it owns, at the same LSN, from the stream. version counts the row's updates, one per
-- transaction that edits the bucket: a reader that rebuilt a bucket from a table read knows which
-- streamed fingerprints are older than its read, and a reader that restored knows whether the
-- stream skipped any (a version missing or jumped).
CREATE TABLE IF NOT EXISTS fence_bucket_stats (
    bucket       int PRIMARY KEY CHECK (bucket BETWEEN 0 AND 4095),
    fence_count  bigint NOT NULL,
    checksum     bigint NOT NULL,
    version      bigint NOT NULL DEFAULT 0
);

-- One application of this file at a time (two would replace the same functions at once), and only
-- in a transaction block. It blocks no writer: their folds only update the bucket rows. Nothing
-- before geofence_versioning's lock of the fences table may block one either: a writer holds that
-- table's lock while its triggers use the others, so it would wait for this transaction while this
-- one waits for it.
LOCK TABLE fence_bucket_stats IN SHARE UPDATE EXCLUSIVE MODE;

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

-- A transaction's noted changes live in three transaction-local settings (set_config(..., true):
-- a savepoint rolled back takes its notes with it, and a commit or abort clears them). The flags
-- hold the transaction's id, and pending is read only once this transaction has written it, so
-- that a value set for the session never counts:
--   fence_versioning.pending  the changes not yet folded, "bucket:count:checksum" separated by spaces
--   fence_versioning.queued   this transaction's id once its fold is queued
--   fence_versioning.folded   this transaction's id once a fold has run (see the table's note function)
-- An application must not RESET ALL or set these in a transaction that edits fences.

-- Folds the noted changes into fence_bucket_stats: one update per bucket, version + 1, in bucket
-- order. (One-row updates in a loop rather than one update over arrays: each keeps a cached plan,
-- where PostgreSQL would plan the array query anew at every call.)
CREATE OR REPLACE FUNCTION fences_fold() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    me text := pg_current_xact_id()::text;
    pending text := current_setting('fence_versioning.pending', true);
    r record;
BEGIN
    PERFORM set_config('fence_versioning.folded', me, true);
    IF current_setting('fence_versioning.queued', true) IS DISTINCT FROM me OR coalesce(pending, '') = '' THEN
        RETURN;
    END IF;
    PERFORM set_config('fence_versioning.pending', '', true);
    IF strpos(pending, ' ') = 0 THEN
        -- The common case, one change of one bucket.
        UPDATE fence_bucket_stats SET fence_count = fence_count + split_part(pending, ':', 2)::bigint,
            checksum = checksum # split_part(pending, ':', 3)::bigint, version = version + 1
        WHERE bucket = split_part(pending, ':', 1)::int;
        RETURN;
    END IF;
    FOR r IN
        SELECT split_part(e, ':', 1)::int AS bucket, sum(split_part(e, ':', 2)::bigint) AS n, bit_xor(split_part(e, ':', 3)::bigint) AS x
        FROM string_to_table(pending, ' ') e GROUP BY 1 ORDER BY 1
    LOOP
        UPDATE fence_bucket_stats SET fence_count = fence_count + r.n, checksum = checksum # r.x, version = version + 1
        WHERE bucket = r.bucket;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION fences_fold_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fences_fold();
    RETURN NULL;
END $$;

-- The versioning of a fences table: the seq trigger, the statement triggers that note each
-- statement's bucket changes, the deferred fold, TRUNCATE refused, the index a rebuild reads by,
-- REPLICA IDENTITY FULL (deletes must carry the whole old row), fence_stats and the table in the
-- publication. The triggers and their functions are named after the table (fences_version,
-- fences_note, ...) and written with its id column, so they run as plain SQL with cached plans.
-- Idempotent; the first application counts what the table holds already, so it can be applied to
-- a loaded table too.
CREATE OR REPLACE FUNCTION geofence_versioning(fences regclass, id_column name DEFAULT 'id',
                                               publication name DEFAULT 'geofence_publication')
    RETURNS void LANGUAGE plpgsql AS $versioning$
DECLARE
    tbl    text := fences::text;
    base   name := (SELECT relname FROM pg_class WHERE oid = fences);
    id     text := quote_ident(id_column) || '::text';
    stamp  text := CASE WHEN EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = fences AND attname = 'updated_at'
                                     AND attnum > 0 AND NOT attisdropped)
                        THEN 'NEW.updated_at := now();' ELSE '' END;
    reader text;
BEGIN
    -- Nothing may edit the fences while their triggers are replaced.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
    ALTER TABLE fence_bucket_stats REPLICA IDENTITY FULL;
    -- A rebuild reads one subtask's buckets of fences and tombstones with one indexed query each.
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (fence_bucket(%s))', base || '_bucket', tbl, id);
    CREATE INDEX IF NOT EXISTS fence_tombstones_bucket ON fence_tombstones (fence_bucket(id));

    -- Every bucket has its row from the start, so a subtask sees the fingerprint of every bucket it
    -- owns, empty ones included, and knows when it has seen them all. The first application counts
    -- whatever the table already holds; a later one finds the rows and reads nothing.
    EXECUTE format('INSERT INTO fence_bucket_stats (bucket, fence_count, checksum)'
        ' SELECT b.bucket, coalesce(f.n, 0), coalesce(f.x, 0) FROM generate_series(0, 4095) b(bucket)'
        ' LEFT JOIN (SELECT fence_bucket(%1$s) AS bucket, count(*) AS n, bit_xor(fence_hash(%1$s, seq)) AS x'
        ' FROM %2$s GROUP BY 1) f ON f.bucket = b.bucket'
        ' WHERE NOT EXISTS (SELECT 1 FROM fence_bucket_stats)', id, tbl);

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

    -- The statement triggers: note the statement's changes, one "bucket:count:checksum" per bucket.
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            me text := pg_current_xact_id()::text;
            changes text;
            pending text;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT string_agg(b || ':' || n || ':' || x, ' ') INTO changes
                FROM (SELECT fence_bucket(%2$s) AS b, count(*) AS n, bit_xor(fence_hash(%2$s, seq)) AS x FROM new_rows GROUP BY 1) d;
            ELSIF TG_OP = 'UPDATE' THEN
                -- An id never changes (the seq trigger refuses it), so each bucket keeps its count.
                SELECT string_agg(b || ':0:' || x, ' ') INTO changes
                FROM (SELECT fence_bucket(id) AS b, bit_xor(h) AS x
                      FROM (SELECT %2$s AS id, fence_hash(%2$s, seq) AS h FROM old_rows
                            UNION ALL SELECT %2$s, fence_hash(%2$s, seq) FROM new_rows) c
                      GROUP BY 1) d;
            ELSE
                INSERT INTO fence_tombstones (id, seq)
                SELECT %2$s, seq + 1 FROM old_rows
                ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, deleted_at = now();
                SELECT string_agg(b || ':' || n || ':' || x, ' ') INTO changes
                FROM (SELECT fence_bucket(%2$s) AS b, -count(*) AS n, bit_xor(fence_hash(%2$s, seq)) AS x FROM old_rows GROUP BY 1) d;
            END IF;
            IF changes IS NULL THEN
                RETURN NULL;
            END IF;
            IF current_setting('fence_versioning.queued', true) IS DISTINCT FROM me THEN
                -- This transaction's first changes: the rows of this statement queued the fold.
                pending := changes;
                PERFORM set_config('fence_versioning.queued', me, true);
            ELSE
                pending := current_setting('fence_versioning.pending', true);
                pending := CASE WHEN pending = '' THEN changes ELSE pending || ' ' || changes END;
                IF octet_length(pending) > 200000 THEN
                    -- A transaction of thousands of statements: one token per bucket again (at most
                    -- 4096 tokens of at most 35 bytes), so that each note copies little.
                    SELECT string_agg(b || ':' || n || ':' || x, ' ') INTO pending
                    FROM (SELECT split_part(e, ':', 1) AS b, sum(split_part(e, ':', 2)::bigint) AS n,
                                 bit_xor(split_part(e, ':', 3)::bigint) AS x
                          FROM string_to_table(pending, ' ') e GROUP BY 1) d;
                END IF;
            END IF;
            PERFORM set_config('fence_versioning.pending', pending, true);
            IF current_setting('fence_versioning.folded', true) = me THEN
                -- A fold has already run, so the constraint fires at once (SET CONSTRAINTS ...
                -- IMMEDIATE), and it fired for this statement's rows before this note: fold now.
                PERFORM fences_fold();
            END IF;
            RETURN NULL;
        END $$ $f$, base || '_note', id);

    -- Truncation would bypass the row triggers and leave the fingerprints wrong: refuse it.
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION %1$I() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION %2$L;
        END $$ $f$, base || '_no_truncate',
        format('TRUNCATE %s would bypass its versioning; use DELETE FROM %s', tbl, tbl));

    -- One transaction of DDL: the old triggers work until the new ones take over at its commit.
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_version', tbl);
    EXECUTE format('CREATE TRIGGER %1$I BEFORE INSERT OR UPDATE ON %2$s FOR EACH ROW EXECUTE FUNCTION %1$I()',
        base || '_version', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_inserted', tbl);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', base || '_inserted', tbl, base || '_note');
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_updated', tbl);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', base || '_updated', tbl, base || '_note');
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_deleted', tbl);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', base || '_deleted', tbl, base || '_note');
    -- Earlier versions had one function per statement trigger.
    EXECUTE format('DROP FUNCTION IF EXISTS %I(), %I(), %I()', base || '_inserted', base || '_updated', base || '_deleted');

    -- The fold, deferred to the commit: a constraint trigger, the only kind PostgreSQL defers, and
    -- a row-level one, so only the rows of a transaction's first statement that changes fences
    -- queue it (the WHEN is evaluated as each row changes); the first to fire folds, the others
    -- find nothing. Earlier versions updated the bucket rows from the statement triggers.
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_fold', tbl);
    EXECUTE format($t$CREATE CONSTRAINT TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %s
        DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW
        WHEN (current_setting('fence_versioning.queued', true) IS DISTINCT FROM pg_current_xact_id()::text)
        EXECUTE FUNCTION fences_fold_at_commit()$t$, base || '_fold', tbl);

    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_no_truncate', tbl);
    EXECUTE format('CREATE TRIGGER %1$I BEFORE TRUNCATE ON %2$s FOR EACH STATEMENT EXECUTE FUNCTION %1$I()',
        base || '_no_truncate', tbl);

    -- The whole table's count and checksum, for people and dashboards (the job reads the buckets).
    -- Earlier versions kept them in a table, one row that every edit updated: it makes way for the
    -- view, and the roles that could read it can read the view. Dropping it also takes it out of
    -- the publication. (Here, under the lock: the old triggers update that row.)
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('fence_stats')) = 'r' THEN
        ALTER TABLE fence_stats RENAME TO fence_stats_replaced;
    END IF;
    CREATE OR REPLACE VIEW fence_stats AS
        SELECT sum(fence_count)::bigint AS fence_count, bit_xor(checksum) AS checksum FROM fence_bucket_stats;
    IF to_regclass('fence_stats_replaced') IS NOT NULL THEN
        FOR reader IN
            SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
            FROM pg_class c, aclexplode(c.relacl) a
            WHERE c.oid = to_regclass('fence_stats_replaced') AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner
        LOOP
            EXECUTE 'GRANT SELECT ON fence_stats TO ' || reader;
        END LOOP;
        DROP TABLE fence_stats_replaced;
    END IF;

    -- The publication the job's CDC source reads (pgoutput). The tombstones are in it because the
    -- initial snapshot must know deleted fences' seqs: a fence re-created later continues from them.
    -- Created here, by the tables' owner, so the job needs no ownership and Flink CDC's "filtered"
    -- mode, which narrows the publication to one table at a time during its snapshot, is never used.
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = publication) THEN
        EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s, fence_tombstones, fence_bucket_stats, fence_heartbeat',
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
