-- Flink SQL tables over the job's outputs, for the SQL client (sql-client.sh -i this file) or any
-- TableEnvironment. The JDBC tables read PostgreSQL as the read-only role geofence_reader of
-- docker/sql/source/geofence-role.sql; the topic table reads what --triggers-topic writes.
-- Endpoints and the password are those of docker/compose.yaml (dev only): elsewhere, change them
-- here or after the fact, e.g. ALTER TABLE geofence_triggers SET ('url' = '...', 'password' = '...');
-- JDBC tables are read once, as a bounded scan; the topic is a stream. The JDBC connector has no
-- TIMESTAMP_LTZ: its tables give PostgreSQL's timestamptz as TIMESTAMP(3) in the Flink JVM's time
-- zone (UTC in the official images); the topic's times are TIMESTAMP_LTZ(3).

-- Every ENTER, EXIT and DWELL, keyed by its id (a UUID derived from its content), read through the
-- view that gives the id as text (Flink's JDBC connector reads no uuid column).
CREATE TABLE geofence_triggers (
  trigger_id  STRING,
  object_id   STRING,
  fence_id    STRING,
  kind        STRING,          -- ENTER, EXIT or DWELL
  event_time  TIMESTAMP(3),
  lon         DOUBLE,          -- null for a DWELL and for an EXIT caused by a fence delete or silence
  lat         DOUBLE,
  fence_seq   BIGINT,
  tenant      STRING,
  emitted_at  TIMESTAMP(3),
  cause       STRING,          -- location, fence-deleted, fence-reshaped, silence or loitering (null in older rows)
  PRIMARY KEY (trigger_id) NOT ENFORCED
) WITH (
  'connector' = 'jdbc',
  'url' = 'jdbc:postgresql://postgres:5432/geofence',
  'table-name' = 'geofence_triggers_text',
  'username' = 'geofence_reader',
  'password' = 'geofence-reader-dev-only'
);

-- Who is inside which fence now.
CREATE TABLE geofence_presence (
  object_id   STRING,
  fence_id    STRING,
  entered_at  TIMESTAMP(3),
  fence_seq   BIGINT,
  tenant      STRING,
  PRIMARY KEY (object_id, fence_id) NOT ENFORCED
) WITH (
  'connector' = 'jdbc',
  'url' = 'jdbc:postgresql://postgres:5432/geofence',
  'table-name' = 'geofence_presence',
  'username' = 'geofence_reader',
  'password' = 'geofence-reader-dev-only'
);

-- One row per warm-up of each subtask's fence index (docs/operations.md#hydration-history).
CREATE TABLE hydration_history (
  job_name              STRING,
  job_id                STRING,
  subtask               INT,
  attempt               INT,
  key_group_start       INT,
  key_group_end         INT,
  start_mode            STRING,   -- fresh, checkpoint, savepoint or rebuild
  restored_from         STRING,
  installed_at          TIMESTAMP(3),
  restored_at           TIMESTAMP(3),
  indexed_at            TIMESTAMP(3),
  hydrated_at           TIMESTAMP(3),  -- null while warming up
  restored_lsn          STRING,
  restored_commit_time  TIMESTAMP(3),
  edits_replayed        BIGINT,
  edits_coalesced       BIGINT,
  gap_check             STRING,   -- covered, gap, not-needed or unreachable
  gap_reason            STRING,
  buckets_reread        BIGINT,   -- buckets read again because they stayed mismatched
  reread_reason         STRING,
  fences_loaded         BIGINT,
  fences_expected       BIGINT,
  checksum_match        BOOLEAN,
  peak_heap_bytes       BIGINT,
  catchup_backlog       BIGINT,   -- transactions (per bucket) the catch-up replays
  catchup_path          STRING,   -- replay, read or load
  catchup_reason        STRING,   -- why: forced, or the cheapest by the estimates
  catchup_replay_estimate_ms BIGINT,
  catchup_read_estimate_ms   BIGINT,
  catchup_load_estimate_ms   BIGINT,
  PRIMARY KEY (job_name, subtask, installed_at) NOT ENFORCED
) WITH (
  'connector' = 'jdbc',
  'url' = 'jdbc:postgresql://postgres:5432/geofence',
  'table-name' = 'hydration_history',
  'username' = 'geofence_reader',
  'password' = 'geofence-reader-dev-only'
);

-- The triggers as a stream: the job's --triggers-topic, committed transactions only.
CREATE TABLE geofence_triggers_topic (
  trigger_id  STRING,
  object_id   STRING,
  fence_id    STRING,
  kind        STRING,          -- ENTER, EXIT or DWELL
  event_time  TIMESTAMP_LTZ(3),
  lon         DOUBLE,
  lat         DOUBLE,
  fence_seq   BIGINT,
  tenant      STRING,
  emitted_at  TIMESTAMP_LTZ(3),
  cause       STRING,          -- as in geofence_triggers (null in records of earlier releases)
  `partition` INT METADATA VIRTUAL,
  `offset`    BIGINT METADATA VIRTUAL
) WITH (
  'connector' = 'kafka',
  'topic' = 'geofence-triggers',
  'properties.bootstrap.servers' = 'kafka:9092',
  'properties.group.id' = 'geofence-sql',
  'properties.isolation.level' = 'read_committed',
  'scan.startup.mode' = 'earliest-offset',
  'format' = 'json',
  'json.timestamp-format.standard' = 'ISO-8601',
  'json.fail-on-missing-field' = 'false',
  'json.ignore-parse-errors' = 'false'
);
