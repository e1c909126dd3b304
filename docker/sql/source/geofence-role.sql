-- The job's database role, with only what it needs (docs/source-contract.md#privileges). Apply as the owner
-- of the tables, after fence-versioning.sql and sink/geofence-outputs.sql, then give it a password
-- of your own:  ALTER ROLE geofence_job PASSWORD '...';  and run the job with --source-user
-- geofence_job. Tables with other names: copy this file and rename them throughout.
--
-- REPLICATION: the CDC source's slot and stream, the gap check's drop of a slot whose WAL is
-- lost, and the slot created anew before a catch-up's reads. SELECT on the source tables: the CDC snapshot and rebuilds. INSERT and UPDATE on
-- fence_heartbeat: the job's heartbeat. The output tables: the job's upserts and deletes. Nothing
-- else: no write to fences or their statistics. (PostgreSQL before 15 lets every role create
-- tables in the public schema; REVOKE CREATE ON SCHEMA public FROM PUBLIC if that should end.)
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'geofence_job') THEN
        CREATE ROLE geofence_job LOGIN REPLICATION;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO geofence_job', current_database());
END $$;

GRANT USAGE ON SCHEMA public TO geofence_job;
GRANT SELECT ON fences, fence_tombstones, fence_stats, fence_bucket_stats, fence_heartbeat TO geofence_job;
GRANT INSERT, UPDATE ON fence_heartbeat TO geofence_job;
GRANT SELECT, INSERT, UPDATE, DELETE ON geofence_triggers, geofence_presence, geofence_dead_letters, hydration_history
    TO geofence_job;
GRANT SELECT, INSERT, UPDATE ON geofence_handover TO geofence_job;

-- The readers of the outputs (the Flink SQL tables of docker/sql/flink): SELECT on them, nothing
-- else. Give it a password of your own: ALTER ROLE geofence_reader PASSWORD '...';
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'geofence_reader') THEN
        CREATE ROLE geofence_reader LOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO geofence_reader', current_database());
END $$;

GRANT USAGE ON SCHEMA public TO geofence_reader;
GRANT SELECT ON geofence_triggers, geofence_triggers_text, geofence_presence, geofence_dead_letters, hydration_history,
    geofence_handover TO geofence_reader;
