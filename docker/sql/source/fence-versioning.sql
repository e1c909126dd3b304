-- Per-fence versions, tombstones and the per-bucket fingerprints (docs/source-contract.md; docs/design.md#bucket-fingerprints).
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
-- for it: each row edited only notes its change in a setting of its transaction, and the
-- transaction folds what it noted into the bucket rows as it commits, one update per bucket in
-- bucket order (deferred constraint triggers). A transaction that waits for a bucket row is
-- then already committing and waits for nothing else, so the contract adds no lock cycle (no
-- deadlock) to the application's own, and holds a bucket row only while it commits. There is no
-- whole-table row: fence_stats is a view over the buckets.
--
-- The versioning of one fences table is made by geofence_versioning(table, id column[,
-- publication]), below: this file applies it to the shipped fences table if there is one. A table
-- of your own needs a "seq bigint NOT NULL DEFAULT 1" column; its id, geometry, tenant and dwell
-- delay columns may have other names (the job's --id-column, --geometry-column, --tenant-column and
-- --dwell-delay-column). Version it in the same transaction:
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
-- Each fold updates a bucket row in place (a HOT update, no index entry): pages a tenth full keep
-- room for the rows' new versions. The rows are made once, by geofence_versioning, and no fold
-- changes a bucket, so no constraint checks it (PostgreSQL would evaluate one at every fold).
CREATE TABLE IF NOT EXISTS fence_bucket_stats (
    bucket       int PRIMARY KEY,
    fence_count  bigint NOT NULL,
    checksum     bigint NOT NULL,
    version      bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 10);

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

-- The heartbeat's transaction horizon (an xid8 as bigint): every transaction with an id below it
-- had ended when the row was written, so a state that has seen this heartbeat holds their edits,
-- and a restore's catch-up compares only the fences written since (docs/design.md#catch-up). A
-- trigger sets it, so that the job writes the row the same way with and without the column.
ALTER TABLE fence_heartbeat ADD COLUMN IF NOT EXISTS horizon bigint;

CREATE OR REPLACE FUNCTION fence_heartbeat_horizon() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.horizon := pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
    RETURN NEW;
END
$$;

CREATE OR REPLACE TRIGGER fence_heartbeat_horizon BEFORE INSERT OR UPDATE ON fence_heartbeat
    FOR EACH ROW EXECUTE FUNCTION fence_heartbeat_horizon();

-- h(id, seq): the first 8 bytes of md5(id || ':' || seq) as a signed big-endian bigint.
CREATE OR REPLACE FUNCTION fence_hash(id text, seq bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ('x' || substr(md5(id || ':' || seq::text), 1, 16))::bit(64)::bigint $$;

CREATE OR REPLACE FUNCTION fence_bucket(id text) RETURNS int
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT ('x' || substr(md5(id), 1, 8))::bit(32)::int & 4095 $$;

-- A transaction's notes live in two transaction-local settings (set_config(..., true): a savepoint
-- rolled back takes its notes with it, and a commit or abort clears them). Each starts with the
-- transaction's id and a space, and one that does not (a value set for the session, or left by a
-- fold) holds no notes:
--   fence_versioning.pending  the changes not yet folded, "bucket:count:checksum" separated by
--                             spaces, one per row edited ("+" first once some have spilled)
--   fence_versioning.spilled  the changes of large transactions, moved out of pending 4 kB at a
--                             time (so that each note copies little), and summed to one change
--                             per bucket (at most 4096) whenever they pass 512 kB
-- An application must not RESET ALL or set these in a transaction that edits fences.
--
-- The notes are taken by the WHEN conditions of the table's row triggers (see
-- geofence_versioning): PostgreSQL evaluates an AFTER ROW trigger's WHEN as the row is changed,
-- exactly once per row really inserted, updated or deleted (not for a row that ON CONFLICT
-- skips or turns into an update, nor one a BEFORE trigger skips), and calling a function there
-- costs a fraction of firing a trigger. The WHEN is true only for the first note of a transaction
-- (or, with the constraints set immediate, of a statement), whose deferred event then folds
-- every note taken until it fires.

-- Notes one row's change: an insert (old_seq NULL), an update (the id never changes: the seq
-- trigger refuses it) or a delete (new_seq NULL), whose tombstone it writes at once, so that a
-- re-creation later in the transaction continues from it. True when the transaction had no notes.
-- (Few statements: PL/pgSQL prepares each anew in every transaction, most of what a note costs.)
CREATE OR REPLACE FUNCTION fence_versioning_noted(id text, old_seq bigint, new_seq bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    me text := pg_current_xact_id()::text || ' ';
    pending text := coalesce(current_setting('fence_versioning.pending', true), '');
    change text;
BEGIN
    IF new_seq IS NULL THEN
        INSERT INTO fence_tombstones (id, seq) VALUES (id, old_seq + 1)
            ON CONFLICT ON CONSTRAINT fence_tombstones_pkey DO UPDATE SET seq = excluded.seq, deleted_at = now();
        change := fence_bucket(id) || ':-1:' || fence_hash(id, old_seq);
    ELSIF old_seq IS NULL THEN
        change := fence_bucket(id) || ':1:' || fence_hash(id, new_seq);
    ELSE
        change := fence_bucket(id) || ':0:' || (fence_hash(id, old_seq) # fence_hash(id, new_seq));
    END IF;
    IF NOT starts_with(pending, me) THEN
        RETURN set_config('fence_versioning.pending', me || change, true) IS NOT NULL;
    ELSIF octet_length(pending) > 4000 THEN
        RETURN fence_versioning_spill(pending, me, change);
    END IF;
    RETURN set_config('fence_versioning.pending', pending || ' ' || change, true) IS NULL;
END $$;

-- Moves pending's changes to spilled and leaves "+" and change in pending. Returns false.
CREATE OR REPLACE FUNCTION fence_versioning_spill(pending text, me text, change text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    spilled text := coalesce(current_setting('fence_versioning.spilled', true), '');
BEGIN
    spilled := CASE WHEN starts_with(spilled, me) THEN spilled || ' ' ELSE me END || substr(pending, length(me) + 1);
    IF octet_length(spilled) > 512000 THEN
        SELECT me || string_agg(b || ':' || n || ':' || x, ' ') INTO spilled
        FROM (SELECT split_part(e, ':', 1) AS b, sum(split_part(e, ':', 2)::bigint) AS n, bit_xor(split_part(e, ':', 3)::bigint) AS x
              FROM string_to_table(substr(spilled, length(me) + 1), ' ') e WHERE e <> '+' GROUP BY 1) d;
    END IF;
    PERFORM set_config('fence_versioning.spilled', spilled, true);
    RETURN set_config('fence_versioning.pending', me || '+ ' || change, true) IS NULL;
END $$;

-- Folds the transaction's notes into fence_bucket_stats: one update per bucket, version + 1, in
-- bucket order. (A savepoint rolled back restores the notes with the events to fold them, so a
-- fold finds none only where the application reset the setting, which it must not.)
CREATE OR REPLACE FUNCTION fence_versioning_fold() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    me text := pg_current_xact_id()::text || ' ';
    pending text := coalesce(current_setting('fence_versioning.pending', true), '');
    r record;
BEGIN
    IF NOT starts_with(pending, me) THEN
        RETURN NULL;
    END IF;
    pending := substr(pending, length(me) + 1) || set_config('fence_versioning.pending', '', true);
    IF strpos(pending, ' ') = 0 THEN
        -- The common case, one row edited.
        UPDATE fence_bucket_stats SET fence_count = fence_count + split_part(pending, ':', 2)::bigint,
            checksum = checksum # split_part(pending, ':', 3)::bigint, version = version + 1
        WHERE bucket = split_part(pending, ':', 1)::int;
        RETURN NULL;
    ELSIF starts_with(pending, '+ ') THEN
        pending := substr(current_setting('fence_versioning.spilled', true), length(me) + 1) || ' ' || pending
            || set_config('fence_versioning.spilled', '', true);
    END IF;
    -- One-row updates in a loop rather than one update over arrays: each keeps a cached plan
    -- that locks the rows in this order.
    FOR r IN
        SELECT split_part(e, ':', 1)::int AS bucket, sum(split_part(e, ':', 2)::bigint) AS n, bit_xor(split_part(e, ':', 3)::bigint) AS x
        FROM string_to_table(pending, ' ') e WHERE e <> '+' GROUP BY 1 ORDER BY 1
    LOOP
        UPDATE fence_bucket_stats SET fence_count = fence_count + r.n, checksum = checksum # r.x, version = version + 1
        WHERE bucket = r.bucket;
    END LOOP;
    RETURN NULL;
END $$;

-- The versioning of a fences table: the seq trigger, the row triggers that note each change and
-- fold the notes at commit, TRUNCATE refused, the index a rebuild reads by, the replica identity
-- (the primary key), fence_stats and the table in the publication. The
-- triggers and their functions are named after the table (fences_version, fences_inserted, ...)
-- and written with its id column, so they run as plain SQL with cached plans.
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
    -- The primary key as replica identity: no update carries its old row (in the WAL, the
    -- walsender and the job's stream reader, which would decode the old geometry for nothing), and
    -- updates can stay HOT, since no index holds seq. The job reads a delete's version from its
    -- tombstone. Releases before 2026-12 set FULL, which the job reads as well; a table without a
    -- primary key keeps FULL, since a delete must carry something.
    IF EXISTS (SELECT 1 FROM pg_index WHERE indrelid = fences AND indisprimary) THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY DEFAULT', tbl);
    ELSE
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', tbl);
    END IF;
    -- Only a bucket row's new values are read: no old row in the WAL for its updates either.
    ALTER TABLE fence_bucket_stats REPLICA IDENTITY DEFAULT;
    -- Earlier versions checked each bucket row's bucket, and packed the rows: rewritten here, once
    -- (no writer can fold now, and the job's reads of the rows wait for milliseconds).
    ALTER TABLE fence_bucket_stats DROP CONSTRAINT IF EXISTS fence_bucket_stats_bucket_check;
    IF (SELECT reloptions FROM pg_class WHERE oid = 'fence_bucket_stats'::regclass) IS NULL THEN
        ALTER TABLE fence_bucket_stats SET (fillfactor = 10);
        CLUSTER fence_bucket_stats USING fence_bucket_stats_pkey;
    END IF;
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
    -- The notes, and the fold deferred to the commit: constraint triggers, the only kind
    -- PostgreSQL defers, whose WHEN notes the row's change (fence_versioning_noted). Earlier
    -- versions had statement triggers of these names that noted each statement's changes (with
    -- one function, or one per trigger) and a row trigger of its own that folded them.
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_fold', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_inserted', tbl);
    EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW'
        ' WHEN (fence_versioning_noted(NEW.%s, NULL, NEW.seq)) EXECUTE FUNCTION fence_versioning_fold()',
        base || '_inserted', tbl, id);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_updated', tbl);
    EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER UPDATE ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW'
        ' WHEN (fence_versioning_noted(NEW.%s, OLD.seq, NEW.seq)) EXECUTE FUNCTION fence_versioning_fold()',
        base || '_updated', tbl, id);
    EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', base || '_deleted', tbl);
    EXECUTE format('CREATE CONSTRAINT TRIGGER %I AFTER DELETE ON %s DEFERRABLE INITIALLY DEFERRED FOR EACH ROW'
        ' WHEN (fence_versioning_noted(OLD.%s, OLD.seq, NULL)) EXECUTE FUNCTION fence_versioning_fold()',
        base || '_deleted', tbl, id);
    EXECUTE format('DROP FUNCTION IF EXISTS %I(), %I(), %I(), %I()',
        base || '_note', base || '_inserted', base || '_updated', base || '_deleted');
    -- The earlier versions' fold, once no table's trigger uses it.
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgfoid = to_regproc('fences_fold_at_commit')) THEN
        DROP FUNCTION IF EXISTS fences_fold_at_commit(), fences_fold();
    END IF;

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
