package dev.geofence.connectors.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.connectors.source.Migrations;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The output sinks against a real PostgreSQL: upserts on the keys, presence deletes, pruning. */
class JdbcOutputsTest {

  private static EmbeddedPostgres postgres;
  private static JdbcConnectionOptions connection;
  private static final JdbcExecutionOptions BATCHES = JdbcExecutionOptions.builder().withBatchSize(3).build();

  @BeforeAll
  static void start() throws Exception {
    postgres = EmbeddedPostgres.builder().start();
    try (Connection c = postgres.getPostgresDatabase().getConnection()) {
      Migrations.applyOutputs(c);
    }
    connection = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(JdbcOutputs.withBatchedInserts("jdbc:postgresql://localhost:" + postgres.getPort() + "/postgres"))
        .withUsername("postgres").withDriverName("org.postgresql.Driver").build();
  }

  @AfterAll
  static void stop() throws Exception {
    postgres.close();
  }

  @Test
  void replayedTriggersAndLettersAreWrittenOnce() throws Exception {
    GeofenceTrigger enter = new GeofenceTrigger("o1", "f1", TriggerKind.ENTER, TriggerCause.LOCATION, 1000, 1, 2, 3, "t", 5000);
    GeofenceTrigger replayed = new GeofenceTrigger("o1", "f1", TriggerKind.ENTER, TriggerCause.LOCATION, 1000, 1, 2, 3, "t", 9000);
    GeofenceTrigger exit = new GeofenceTrigger("o1", "f1", TriggerKind.EXIT, TriggerCause.LOCATION, 2000, Double.NaN, Double.NaN, 4, null, 9000);
    write(JdbcOutputs.triggers(connection, BATCHES), GeofenceTrigger.class, enter, replayed, exit, enter);
    assertThat(rows("SELECT kind || ' ' || coalesce(lon::text, 'null') || ' ' || (extract(epoch FROM emitted_at) * 1000)::bigint"
        + " FROM geofence_triggers WHERE object_id = 'o1'"))
        .containsExactlyInAnyOrder("ENTER 1 5000", "EXIT null 9000");

    DeadLetter letter = new DeadLetter("location", "o9", 0, "ERROR", "MALFORMED_JSON", "not JSON", "{", 0, 1);
    DeadLetter again = new DeadLetter("location", "o9", 0, "ERROR", "MALFORMED_JSON", "not JSON", "{", 0, 2);
    write(JdbcOutputs.deadLetters(connection, BATCHES), DeadLetter.class, letter, again);
    assertThat(rows("SELECT reason || ' ' || coalesce(event_time::text, 'null') FROM geofence_dead_letters"))
        .containsExactly("MALFORMED_JSON null");
    // Two long lines alike in the part a letter keeps are two letters.
    String kept = "x".repeat(DeadLetter.PAYLOAD_LIMIT);
    write(JdbcOutputs.deadLetters(connection, BATCHES), DeadLetter.class,
        new DeadLetter("location", null, 0, "ERROR", "MALFORMED_JSON", "not JSON", kept + "1", 0, 3),
        new DeadLetter("location", null, 0, "ERROR", "MALFORMED_JSON", "not JSON", kept + "2", 0, 3));
    assertThat(rows("SELECT count(*)::text FROM geofence_dead_letters WHERE length(payload) = " + DeadLetter.PAYLOAD_LIMIT))
        .containsExactly("2");
  }

  /**
   * Each trigger lands with its kind and cause, and without a position when no location decided it
   * (a DWELL, an EXIT by silence or by a fence delete); replayed, each is still one row. A trigger
   * restored from the state of a release without causes lands with none.
   */
  @Test
  void triggersLandWithTheirCauseAndThoseOfNoLocationWithoutAPosition() throws Exception {
    GeofenceTrigger dwell = new GeofenceTrigger("c1", "f1", TriggerKind.DWELL, TriggerCause.LOITERING, 61_000, Double.NaN, Double.NaN, 3, "t", 62_000);
    GeofenceTrigger dwellReplayed =
        new GeofenceTrigger("c1", "f1", TriggerKind.DWELL, TriggerCause.LOITERING, 61_000, Double.NaN, Double.NaN, 3, "t", 99_000);
    GeofenceTrigger silence = new GeofenceTrigger("c1", "f1", TriggerKind.EXIT, TriggerCause.SILENCE, 400_000, Double.NaN, Double.NaN, 3, "t", 401_000);
    GeofenceTrigger deleted = GeofenceTrigger.exitOnDelete("c2", "f1", 500_000, 4, 501_000);
    // A rebuild learns of the same delete from its tombstone, timed otherwise: the same trigger.
    GeofenceTrigger deletedAgain = GeofenceTrigger.exitOnDelete("c2", "f1", 499_000, 4, 600_000);
    GeofenceTrigger restored = new GeofenceTrigger("c3", "f1", TriggerKind.ENTER, null, 1000, 1.5, 2.5, 3, null, 5000);
    write(JdbcOutputs.triggers(connection, BATCHES), GeofenceTrigger.class, dwell, silence, dwellReplayed, deleted, deletedAgain, restored);
    assertThat(rows("SELECT object_id || ' ' || kind || ' ' || coalesce(cause, 'null') || ' ' || coalesce(lon::text, 'null') || ' '"
        + " || coalesce(lat::text, 'null') || ' ' || (extract(epoch FROM emitted_at) * 1000)::bigint FROM geofence_triggers_text"
        + " WHERE object_id LIKE 'c%'"))
        .containsExactlyInAnyOrder("c1 DWELL loitering null null 62000", "c1 EXIT silence null null 401000",
            "c2 EXIT fence-deleted null null 501000", "c3 ENTER null 1.5 2.5 5000");
  }

  @Test
  void presenceRowsComeOnEnterAndGoOnExitInOrder() throws Exception {
    truncatePresence();
    write(JdbcOutputs.presence(connection, BATCHES), GeofenceTrigger.class,
        new GeofenceTrigger("p1", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, null, 0),
        new GeofenceTrigger("p1", "b", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, null, 0),
        new GeofenceTrigger("p1", "a", TriggerKind.EXIT, TriggerCause.LOCATION, 200, 0, 0, 1, null, 0),
        new GeofenceTrigger("p2", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 300, 0, 0, 2, null, 0),
        new GeofenceTrigger("p2", "a", TriggerKind.EXIT, TriggerCause.LOCATION, 400, 0, 0, 2, null, 0),
        new GeofenceTrigger("p2", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 500, 0, 0, 3, null, 0));
    assertThat(rows("SELECT object_id || ' ' || fence_id || ' ' || (extract(epoch FROM entered_at) * 1000)::bigint || ' ' || fence_seq FROM geofence_presence"))
        .containsExactlyInAnyOrder("p1 b 100 1", "p2 a 500 3");
  }

  /**
   * A DWELL leaves presence as the ENTER wrote it, whether in the ENTER's batch or a later one, and
   * brings back no row an EXIT removed.
   */
  @Test
  void aDwellChangesNoPresenceRow() throws Exception {
    truncatePresence();
    JdbcExecutionOptions oneBatch = JdbcExecutionOptions.builder().withBatchSize(100).build();
    write(JdbcOutputs.presence(connection, oneBatch), GeofenceTrigger.class,
        new GeofenceTrigger("d1", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, "t", 0),
        dwell("d1", 700, 2),
        new GeofenceTrigger("d2", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, "t", 0),
        new GeofenceTrigger("d2", "a", TriggerKind.EXIT, TriggerCause.LOCATION, 200, 0, 0, 1, "t", 0),
        dwell("d2", 700, 2),
        new GeofenceTrigger("d3", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, "t", 0),
        new GeofenceTrigger("d4", "a", TriggerKind.ENTER, TriggerCause.LOCATION, 100, 0, 0, 1, "t", 0),
        new GeofenceTrigger("d4", "a", TriggerKind.EXIT, TriggerCause.SILENCE, 200, Double.NaN, Double.NaN, 1, "t", 0));
    write(JdbcOutputs.presence(connection, oneBatch), GeofenceTrigger.class, dwell("d3", 700, 2), dwell("d4", 700, 2));
    assertThat(rows("SELECT object_id || ' ' || fence_id || ' ' || (extract(epoch FROM entered_at) * 1000)::bigint || ' '"
        + " || fence_seq || ' ' || coalesce(tenant, 'null') FROM geofence_presence"))
        .containsExactlyInAnyOrder("d1 a 100 1 t", "d3 a 100 1 t");
  }

  private static GeofenceTrigger dwell(String object, long at, long fenceSeq) {
    return new GeofenceTrigger(object, "a", TriggerKind.DWELL, TriggerCause.LOITERING, at, Double.NaN, Double.NaN, fenceSeq, null, 0);
  }

  /**
   * Presence against an oracle that applies every trigger in order, one by one: random ENTERs,
   * EXITs and DWELLs (which the oracle ignores) over a few objects and fences (so that batches hold
   * several of one key), written with batch sizes from 1 to more than the stream.
   */
  @Test
  void presenceEqualsTriggersAppliedOneByOne() throws Exception {
    Random random = new Random(18);
    for (int round = 0; round < 12; round++) {
      truncatePresence();
      int n = 1 + random.nextInt(400);
      GeofenceTrigger[] triggers = new GeofenceTrigger[n];
      Map<String, String> oracle = new TreeMap<>();
      for (int i = 0; i < n; i++) {
        String object = "o" + random.nextInt(5);
        String fence = "f" + random.nextInt(4);
        TriggerKind kind = switch (random.nextInt(4)) {
          case 0 -> TriggerKind.EXIT;
          case 1 -> TriggerKind.DWELL;
          default -> TriggerKind.ENTER;
        };
        TriggerCause cause = kind == TriggerKind.DWELL ? TriggerCause.LOITERING : TriggerCause.LOCATION;
        triggers[i] = new GeofenceTrigger(object, fence, kind, cause, 1000L * i, 0, 0, i, random.nextBoolean() ? "t" : null, 0);
        if (kind == TriggerKind.ENTER) {
          oracle.put(object + " " + fence, object + " " + fence + " " + 1000L * i + " " + i + " " + triggers[i].tenant);
        } else if (kind == TriggerKind.EXIT) {
          oracle.remove(object + " " + fence);
        }
      }
      int batchSize = 1 + random.nextInt(n + 10);
      write(JdbcOutputs.presence(connection, JdbcExecutionOptions.builder().withBatchSize(batchSize).build()),
          GeofenceTrigger.class, triggers);
      assertThat(rows("SELECT object_id || ' ' || fence_id || ' ' || (extract(epoch FROM entered_at) * 1000)::bigint || ' '"
          + " || fence_seq || ' ' || coalesce(tenant, 'null') FROM geofence_presence"))
          .as("round %d: %d triggers in batches of %d", round, n, batchSize)
          .containsExactlyInAnyOrderElementsOf(oracle.values());
    }
  }

  @Test
  void postgresUrlsGetBatchedInsertsUnlessTheySayOtherwise() {
    assertThat(JdbcOutputs.withBatchedInserts("jdbc:postgresql://h:5432/db"))
        .isEqualTo("jdbc:postgresql://h:5432/db?reWriteBatchedInserts=true");
    assertThat(JdbcOutputs.withBatchedInserts("jdbc:postgresql://h/db?ssl=true"))
        .isEqualTo("jdbc:postgresql://h/db?ssl=true&reWriteBatchedInserts=true");
    assertThat(JdbcOutputs.withBatchedInserts("jdbc:postgresql://h/db?reWriteBatchedInserts=false"))
        .isEqualTo("jdbc:postgresql://h/db?reWriteBatchedInserts=false");
    assertThat(JdbcOutputs.withBatchedInserts("jdbc:h2:mem:x")).isEqualTo("jdbc:h2:mem:x");
    assertThatThrownBy(() -> JdbcOutputs.batches(0, Duration.ZERO)).hasMessage("the sink batch size must be at least 1, got 0");
    assertThatThrownBy(() -> JdbcOutputs.batches(1, Duration.ofMillis(-1)))
        .hasMessage("the sink batch interval must not be negative, got -1 ms");
  }

  @Test
  void hydrationEpisodesUpsertOnTheirKeyAndOldOnesArePruned() throws Exception {
    try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
      s.execute("INSERT INTO hydration_history (job_name, job_id, subtask, attempt, key_group_start, key_group_end, start_mode,"
          + " installed_at, gap_check) VALUES ('old', 'x', 0, 0, 0, 127, 'fresh', now() - interval '40 days', 'not-needed')");
    }
    HydrationEpisode started = episode(0);
    HydrationEpisode hydrated = episode(0);
    hydrated.hydratedAt = hydrated.installedAt + 1500;
    hydrated.fencesLoaded = 1000;
    hydrated.fencesExpected = 1000L;
    hydrated.checksumMatch = true;
    write(JdbcOutputs.hydrationHistory(connection, BATCHES, GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
        HydrationEpisode.class, started, hydrated, episode(1), hydrated);
    assertThat(rows("SELECT job_name || ' ' || subtask || ' ' || coalesce(fences_loaded::text, '') || ' ' || coalesce(checksum_match::text, 'null')"
        + " || ' ' || (hydrated_at IS NOT NULL) FROM hydration_history"))
        .as("one row per (job, subtask, installed at); the 40-day-old row pruned")
        .containsExactlyInAnyOrder("geofence 0 1000 true true", "geofence 1 0 null false");
    assertThatThrownBy(() -> JdbcOutputs.hydrationHistory(connection, BATCHES, Duration.ZERO))
        .hasMessage("the hydration history retention must be at least 1 ms, got 0 ms");
  }

  /**
   * A hydration_history of an earlier release gains the re-read columns in place when the job
   * starts (it lacks this release's newest column), its rows keep working, and episodes are written
   * with them.
   */
  @Test
  void anEarlierReleasesHydrationHistoryGainsItsNewColumnsInPlace() throws Exception {
    String url = freshDatabase("earlier");
    try (Connection c = java.sql.DriverManager.getConnection(url, "postgres", ""); Statement s = c.createStatement()) {
      Migrations.applyOutputs(c);
      s.execute("ALTER TABLE hydration_history DROP COLUMN buckets_reread, DROP COLUMN reread_reason, DROP COLUMN catchup_backlog,"
          + " DROP COLUMN catchup_path, DROP COLUMN catchup_reason, DROP COLUMN catchup_replay_estimate_ms,"
          + " DROP COLUMN catchup_read_estimate_ms, DROP COLUMN catchup_load_estimate_ms");
      s.execute("INSERT INTO hydration_history (job_name, job_id, subtask, attempt, key_group_start, key_group_end, start_mode,"
          + " installed_at, gap_check) VALUES ('earlier', 'x', 0, 0, 0, 127, 'fresh', now(), 'not-needed')");
      Migrations.ensureOutputs(c);
      HydrationEpisode healed = episode(2);
      healed.bucketsReread = 2;
      healed.rereadReason = "bucket 17 still mismatched 900 ms of event time after its fingerprint; read again from the source";
      healed.catchupBacklog = 1_440L;
      healed.catchupPath = "read";
      healed.catchupReason = "read is the cheapest";
      healed.catchupReplayEstimateMs = 900L;
      healed.catchupReadEstimateMs = 400L;
      healed.catchupLoadEstimateMs = 2_000L;
      writeEpisode(url, healed);
      List<String> rows = new ArrayList<>();
      try (ResultSet r = s.executeQuery("SELECT job_name, buckets_reread, reread_reason, catchup_backlog, catchup_path,"
          + " catchup_reason, catchup_replay_estimate_ms, catchup_read_estimate_ms, catchup_load_estimate_ms FROM hydration_history"
          + " ORDER BY job_name")) {
        while (r.next()) {
          rows.add(r.getString(1) + " " + r.getLong(2) + " " + r.getString(3) + " " + r.getObject(4) + " " + r.getString(5) + " "
              + r.getString(6) + " " + r.getObject(7) + " " + r.getObject(8) + " " + r.getObject(9));
        }
      }
      assertThat(rows).containsExactly("earlier 0 null null null null null null null",
          "geofence 2 " + healed.rereadReason + " 1440 read read is the cheapest 900 400 2000");
    }
  }

  /**
   * The previous release's hydration_history (its path check without {@code load}, no load
   * estimate) takes a catch-up's load once the job starts: the check is widened NOT VALID under
   * its name, the old rows kept, other paths still refused; applying again changes nothing.
   */
  @Test
  void thePreviousReleasesHydrationHistoryTakesTheLoadPath() throws Exception {
    String url = freshDatabase("previous");
    try (Connection c = java.sql.DriverManager.getConnection(url, "postgres", ""); Statement s = c.createStatement()) {
      Migrations.applyOutputs(c);
      s.execute("ALTER TABLE hydration_history DROP COLUMN catchup_load_estimate_ms, DROP CONSTRAINT hydration_history_catchup_path_check,"
          + " ADD CONSTRAINT hydration_history_catchup_path_check CHECK (catchup_path IN ('replay', 'read'))");
      s.execute("INSERT INTO hydration_history (job_name, job_id, subtask, attempt, key_group_start, key_group_end, start_mode,"
          + " installed_at, gap_check, catchup_path) VALUES ('previous', 'x', 0, 0, 0, 127, 'savepoint', now(), 'covered', 'read')");
      Migrations.ensureOutputs(c);
      String check = "SELECT oid::text || ' ' || convalidated FROM pg_constraint WHERE conname = 'hydration_history_catchup_path_check'";
      String widened = queryString(s, check);
      assertThat(widened).endsWith(" false");
      HydrationEpisode loaded = episode(1);
      loaded.catchupPath = "load";
      loaded.catchupReason = "load is the cheapest";
      loaded.catchupLoadEstimateMs = 26_400L;
      writeEpisode(url, loaded);
      assertThat(queryString(s, "SELECT string_agg(job_name || ' ' || catchup_path || ' ' || coalesce(catchup_load_estimate_ms::text, '-'),"
          + " ', ' ORDER BY job_name) FROM hydration_history")).isEqualTo("geofence load 26400, previous read -");
      assertThatThrownBy(() -> s.execute("UPDATE hydration_history SET catchup_path = 'guess'")).hasMessageContaining("catchup_path_check");
      Migrations.applyOutputs(c);
      assertThat(queryString(s, check)).as("applied again: the same constraint").isEqualTo(widened);
    }
  }

  /** Writes the episode to the database at {@code url} through the job's sink, as the postgres user. */
  private static void writeEpisode(String url, HydrationEpisode episode) throws Exception {
    write(JdbcOutputs.hydrationHistory(new JdbcConnectionOptions.JdbcConnectionOptionsBuilder().withUrl(url).withUsername("postgres")
        .withDriverName("org.postgresql.Driver").build(), BATCHES, GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
        HydrationEpisode.class, episode);
  }

  private static String queryString(Statement s, String sql) throws java.sql.SQLException {
    try (ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getString(1);
    }
  }

  /** A new, empty database of the test's server; its JDBC URL. */
  private static String freshDatabase(String name) throws Exception {
    try (Connection admin = postgres.getPostgresDatabase().getConnection(); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + name);
    }
    return "jdbc:postgresql://localhost:" + postgres.getPort() + "/" + name;
  }

  /** geofence_triggers and its view as the outputs file made them before causes and DWELL (e1477b2). */
  private static final String EARLIER_TRIGGERS = """
      CREATE TABLE geofence_triggers (
          trigger_id  uuid PRIMARY KEY,
          object_id   text NOT NULL,
          fence_id    text NOT NULL,
          kind        text NOT NULL CHECK (kind IN ('ENTER', 'EXIT')),
          event_time  timestamptz NOT NULL,
          lon         double precision,
          lat         double precision,
          fence_seq   bigint NOT NULL,
          tenant      text,
          emitted_at  timestamptz NOT NULL
      );
      CREATE OR REPLACE VIEW geofence_triggers_text AS
          SELECT trigger_id::text AS trigger_id, object_id, fence_id, kind, event_time, lon, lat, fence_seq, tenant, emitted_at
          FROM geofence_triggers;
      """;

  /**
   * A geofence_triggers of an earlier release gains cause and DWELL in place when the job starts:
   * its rows keep working with a null cause, a DWELL is written, the checks still refuse what is
   * neither a kind nor a cause, and applying the file again changes nothing.
   */
  @Test
  void anEarlierReleasesTriggersTableGainsCauseAndDwellInPlace() throws Exception {
    String url = freshDatabase("earlier_triggers");
    try (Connection c = java.sql.DriverManager.getConnection(url, "postgres", ""); Statement s = c.createStatement()) {
      String checks = "SELECT string_agg(conname || ' ' || convalidated, ', ' ORDER BY conname) FROM pg_constraint"
          + " WHERE conrelid = 'geofence_triggers'::regclass AND contype = 'c'";
      String checkIds = "SELECT string_agg(oid::text, ', ' ORDER BY conname) FROM pg_constraint"
          + " WHERE conrelid = 'geofence_triggers'::regclass AND contype = 'c'";
      Migrations.applyOutputs(c);
      List<String> created = rows(s, checkIds);
      Migrations.applyOutputs(c);
      assertThat(rows(s, checks)).as("a table of this release, applied twice")
          .containsExactly("geofence_triggers_cause_check true, geofence_triggers_kind_check true");
      assertThat(rows(s, checkIds)).as("its checks, untouched by the second time").isEqualTo(created);
      s.execute("DROP VIEW geofence_triggers_text; DROP TABLE geofence_triggers; " + EARLIER_TRIGGERS);
      GeofenceTrigger old = new GeofenceTrigger("o1", "f1", TriggerKind.ENTER, null, 1000, 1.5, 2.5, 3, null, 5000);
      s.execute("INSERT INTO geofence_triggers VALUES ('" + old.triggerId + "', 'o1', 'f1', 'ENTER', to_timestamp(1), 1.5, 2.5, 3,"
          + " NULL, to_timestamp(5))");

      Migrations.ensureOutputs(c);
      assertThat(rows(s, checks)).as("the kind check replaced, the cause check added, neither scanning the table")
          .containsExactly("geofence_triggers_cause_check false, geofence_triggers_kind_check false");
      List<String> migrated = rows(s, checkIds);
      GeofenceTrigger dwell = new GeofenceTrigger("o1", "f1", TriggerKind.DWELL, TriggerCause.LOITERING, 61_000, Double.NaN, Double.NaN, 3, null, 62_000);
      write(JdbcOutputs.triggers(new JdbcConnectionOptions.JdbcConnectionOptionsBuilder().withUrl(url).withUsername("postgres")
          .withDriverName("org.postgresql.Driver").build(), BATCHES), GeofenceTrigger.class, old, dwell);
      Migrations.applyOutputs(c);
      assertThat(rows(s, checks)).as("applied again").containsExactly("geofence_triggers_cause_check false, geofence_triggers_kind_check false");
      assertThat(rows(s, checkIds)).as("the checks, untouched by applying again").isEqualTo(migrated);

      assertThat(rows(s, "SELECT kind || ' ' || coalesce(cause, 'null') || ' ' || coalesce(lon::text, 'null')"
          + " FROM geofence_triggers_text ORDER BY event_time"))
          .as("the earlier row, kept (its replay rewrites nothing), and the DWELL")
          .containsExactly("ENTER null 1.5", "DWELL loitering null");
      assertThatThrownBy(() -> s.execute("INSERT INTO geofence_triggers (trigger_id, object_id, fence_id, kind, event_time, fence_seq,"
          + " emitted_at) VALUES (gen_random_uuid(), 'o1', 'f1', 'STAY', now(), 3, now())"))
          .hasMessageContaining("geofence_triggers_kind_check");
      assertThatThrownBy(() -> s.execute("INSERT INTO geofence_triggers (trigger_id, object_id, fence_id, kind, event_time, fence_seq,"
          + " emitted_at, cause) VALUES (gen_random_uuid(), 'o1', 'f1', 'EXIT', now(), 3, now(), 'timeout')"))
          .hasMessageContaining("geofence_triggers_cause_check");
    }
  }

  @Test
  void theRetentionReachesPostgreSqlToTheMillisecond() throws Exception {
    for (Duration retention : List.of(Duration.ofMillis(1), Duration.ofMillis(500), Duration.ofMillis(1500),
        Duration.ofSeconds(59).plusMillis(999), Duration.ofDays(30))) {
      try (Connection c = postgres.getPostgresDatabase().getConnection();
          PreparedStatement s = c.prepareStatement("SELECT extract(epoch FROM ?::interval) * 1000")) {
        s.setString(1, JdbcOutputs.interval(retention));
        try (ResultSet r = s.executeQuery()) {
          r.next();
          assertThat(r.getBigDecimal(1).longValueExact()).as("%s", retention).isEqualTo(retention.toMillis());
        }
      }
    }
  }

  private static final long INSTALLED_AT = System.currentTimeMillis() / 1000 * 1000;

  private static HydrationEpisode episode(int subtask) {
    HydrationEpisode e = new HydrationEpisode();
    e.jobName = "geofence";
    e.jobId = "0123";
    e.subtask = subtask;
    e.keyGroupStart = subtask * 64;
    e.keyGroupEnd = subtask * 64 + 63;
    e.startMode = HydrationEpisode.StartMode.SAVEPOINT;
    e.restoredFrom = "file:///savepoints/sp-1";
    e.installedAt = INSTALLED_AT;
    e.restoredLsn = "0/16B3748";
    e.gapCheck = HydrationEpisode.GapCheck.COVERED;
    return e;
  }

  private static void truncatePresence() throws Exception {
    try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
      s.execute("TRUNCATE geofence_presence");
    }
  }

  @SafeVarargs
  private static <T> void write(Sink<T> sink, Class<T> type, T... elements) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    env.fromData(TypeInformation.of(type), elements).sinkTo(sink);
    env.execute();
  }

  private static List<String> rows(String sql) throws Exception {
    try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
      return rows(s, sql);
    }
  }

  private static List<String> rows(Statement s, String sql) throws Exception {
    List<String> rows = new ArrayList<>();
    try (ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        rows.add(r.getString(1));
      }
    }
    return rows;
  }
}
