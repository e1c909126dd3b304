-- Output tables of the geofence job (docs/outputs.md; docs/design.md#outputs). Idempotent; the job writes upserts on
-- the keys below, so a replay after a restore rewrites rows rather than adding them.

CREATE TABLE IF NOT EXISTS geofence_triggers (
    trigger_id  uuid PRIMARY KEY,          -- derived from (object, fence, kind, event time, fence seq)
    object_id   text NOT NULL,
    fence_id    text NOT NULL,
    kind        text NOT NULL CONSTRAINT geofence_triggers_kind_check CHECK (kind IN ('ENTER', 'EXIT', 'DWELL')),
    event_time  timestamptz NOT NULL,
    lon         double precision,          -- null for a DWELL and for an EXIT caused by a fence delete or silence
    lat         double precision,
    fence_seq   bigint NOT NULL,
    tenant      text,
    emitted_at  timestamptz NOT NULL,
    -- what decided the trigger; null in rows written before the release that added it (and for a
    -- trigger that release restored from an earlier one's state)
    cause       text CONSTRAINT geofence_triggers_cause_check
                CHECK (cause IN ('location', 'fence-deleted', 'fence-reshaped', 'silence', 'loitering'))
);
CREATE INDEX IF NOT EXISTS geofence_triggers_object_time ON geofence_triggers (object_id, event_time);
CREATE INDEX IF NOT EXISTS geofence_triggers_fence_time ON geofence_triggers (fence_id, event_time);
-- A table made by an earlier release gains cause and DWELL in place, its rows unchanged. The checks
-- are added NOT VALID, and only when missing (the kind check: when it lacks DWELL; the checks keep
-- the name PostgreSQL gave the earlier release's): a check added otherwise scans the whole table,
-- which only grows, under an exclusive lock. There is nothing to prove: the old rows have a null
-- cause and passed the old kind check, which the new one widens; new rows are checked all the same.
-- On every later start the block only reads the catalog.
ALTER TABLE geofence_triggers ADD COLUMN IF NOT EXISTS cause text;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'geofence_triggers'::regclass
                   AND conname = 'geofence_triggers_cause_check') THEN
        ALTER TABLE geofence_triggers ADD CONSTRAINT geofence_triggers_cause_check
            CHECK (cause IN ('location', 'fence-deleted', 'fence-reshaped', 'silence', 'loitering')) NOT VALID;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'geofence_triggers'::regclass
                   AND conname = 'geofence_triggers_kind_check' AND pg_get_constraintdef(oid) LIKE '%''DWELL''%') THEN
        ALTER TABLE geofence_triggers DROP CONSTRAINT IF EXISTS geofence_triggers_kind_check,
            ADD CONSTRAINT geofence_triggers_kind_check CHECK (kind IN ('ENTER', 'EXIT', 'DWELL')) NOT VALID;
    END IF;
END $$;
-- The triggers with their id as text: Flink's JDBC connector reads no uuid column, so the Flink SQL
-- table geofence_triggers (docker/sql/flink) reads this view. New columns go last: CREATE OR
-- REPLACE VIEW can only append.
CREATE OR REPLACE VIEW geofence_triggers_text AS
    SELECT trigger_id::text AS trigger_id, object_id, fence_id, kind, event_time, lon, lat, fence_seq, tenant, emitted_at,
        cause
    FROM geofence_triggers;

-- Who is inside which fence now: a row appears on ENTER and goes on EXIT (a DWELL leaves it as it is).
CREATE TABLE IF NOT EXISTS geofence_presence (
    object_id   text NOT NULL,
    fence_id    text NOT NULL,
    entered_at  timestamptz NOT NULL,
    fence_seq   bigint NOT NULL,
    tenant      text,
    PRIMARY KEY (object_id, fence_id)
);
CREATE INDEX IF NOT EXISTS geofence_presence_fence ON geofence_presence (fence_id);

-- Input the job could not use as it was, with the reason. severity WARNING: used after repair.
CREATE TABLE IF NOT EXISTS geofence_dead_letters (
    letter_id   uuid PRIMARY KEY,          -- derived from the letter's content
    source      text NOT NULL CHECK (source IN ('fence', 'location')),
    key         text,
    seq         bigint NOT NULL DEFAULT 0,
    severity    text NOT NULL CHECK (severity IN ('ERROR', 'WARNING')),
    reason      text NOT NULL,
    detail      text NOT NULL,
    payload     text,
    event_time  timestamptz,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS geofence_dead_letters_key ON geofence_dead_letters (source, key);

-- One row per hydration episode (a start, restore or rebuild) per subtask; it outlives the job,
-- the cluster and the savepoints. The job upserts on (job_name, subtask, installed_at), so a replay
-- never duplicates a row, and prunes rows past the retention period as it writes.
CREATE TABLE IF NOT EXISTS hydration_history (
    job_name          text NOT NULL,
    job_id            text NOT NULL,
    subtask           int NOT NULL,
    attempt           int NOT NULL,
    key_group_start   int NOT NULL,
    key_group_end     int NOT NULL,
    start_mode        text NOT NULL CHECK (start_mode IN ('fresh', 'checkpoint', 'savepoint', 'rebuild')),
    restored_from     text,
    installed_at      timestamptz NOT NULL,
    restored_at       timestamptz,
    indexed_at        timestamptz,
    hydrated_at       timestamptz,
    restored_lsn      text,
    restored_commit_time timestamptz,
    edits_replayed    bigint NOT NULL DEFAULT 0,
    edits_coalesced   bigint NOT NULL DEFAULT 0,
    gap_check         text NOT NULL CHECK (gap_check IN ('covered', 'gap', 'not-needed', 'unreachable')),
    gap_reason        text,
    buckets_reread    bigint NOT NULL DEFAULT 0,  -- buckets read again because they stayed mismatched
    reread_reason     text,                       -- which, and why (the last re-read of the episode)
    fences_loaded     bigint NOT NULL DEFAULT 0,
    fences_expected   bigint,
    checksum_match    boolean,
    peak_heap_bytes   bigint,
    catchup_backlog   bigint,                     -- transactions (per bucket) the catch-up replays, from the gap check
    catchup_path      text CONSTRAINT hydration_history_catchup_path_check
                      CHECK (catchup_path IN ('replay', 'read', 'load')),  -- how the covered restore caught up
    catchup_reason    text,                       -- why that path: forced, or the cheapest by the estimates
    catchup_replay_estimate_ms bigint,            -- what the job estimated each path at
    catchup_read_estimate_ms   bigint,
    catchup_load_estimate_ms   bigint,
    PRIMARY KEY (job_name, subtask, installed_at)
);
CREATE INDEX IF NOT EXISTS hydration_history_installed ON hydration_history (installed_at);
-- Columns added since the table's first release, added in place to a table made by an earlier one
-- (its rows keep working: the defaults say no re-read happened, no backlog was counted, no path chosen).
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS buckets_reread bigint NOT NULL DEFAULT 0;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS reread_reason text;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_backlog bigint;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_path text CHECK (catchup_path IN ('replay', 'read', 'load'));
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_reason text;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_replay_estimate_ms bigint;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_read_estimate_ms bigint;
ALTER TABLE hydration_history ADD COLUMN IF NOT EXISTS catchup_load_estimate_ms bigint;
-- The path check of an earlier release lacks 'load': widened NOT VALID (the old rows passed the
-- narrower one), under the name PostgreSQL gave it; on every later start the block only reads the catalog.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'hydration_history'::regclass
                   AND conname = 'hydration_history_catchup_path_check' AND pg_get_constraintdef(oid) LIKE '%''load''%') THEN
        ALTER TABLE hydration_history DROP CONSTRAINT IF EXISTS hydration_history_catchup_path_check,
            ADD CONSTRAINT hydration_history_catchup_path_check CHECK (catchup_path IN ('replay', 'read', 'load')) NOT VALID;
    END IF;
END $$;

-- Which instance of the job writes the outputs (docs/design.md#blue-green-deploys): one row per job
-- name, kept by jobs run with geofence.handover.enabled. The writer writes triggers and presence of
-- event times before its lease (writes_until), extending it as it goes while no handover is asked
-- for; asking freezes the lease as handover_at (T): the writer keeps the triggers before T, the
-- next writer takes those from T on, and becomes the writer once every subtask of the old one has
-- committed its share (writer_done). writer_since is the T its writer took over at. A standby
-- (geofence.handover.standby) registers itself and asks once every one of its subtasks is ready.
CREATE TABLE IF NOT EXISTS geofence_handover (
    job_name           text PRIMARY KEY,
    writer             text NOT NULL,           -- the Flink job id of the instance writing the outputs
    writer_parallelism int NOT NULL,
    writer_since       timestamptz,             -- null when it took the outputs over without a handover
    writer_seen_at     timestamptz NOT NULL DEFAULT now(), -- the writer's last sign of life (every second)
    writes_until       timestamptz,             -- the writer's lease (event time); null before it has a clock
    standby            text,                    -- the instance started to take over, until it asks
    standby_parallelism int,
    standby_ready      int[] NOT NULL DEFAULT '{}', -- the standby's subtasks whose index is ready
    next_writer        text,                    -- the instance taking over, once asked
    handover_at        timestamptz,             -- T, the lease frozen by the ask
    writer_done        int[] NOT NULL DEFAULT '{}', -- the writer's subtasks that committed all before T
    updated_at         timestamptz NOT NULL DEFAULT now()
);
