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
    assertThat(rows("SELECT kind || ' ' || coalesce(lon::text, 'null') || ' ' || (extract(epoch FROM emitted_at) * 1000)::bigint FROM geofence_triggers"))
        .containsExactlyInAnyOrder("ENTER 1 5000", "EXIT null 9000");

    DeadLetter letter = new DeadLetter("location", "o9", 0, "ERROR", "MALFORMED_JSON", "not JSON", "{", 0, 1);
    DeadLetter again = new DeadLetter("location", "o9", 0, "ERROR", "MALFORMED_JSON", "not JSON", "{", 0, 2);
    write(JdbcOutputs.deadLetters(connection, BATCHES), DeadLetter.class, letter, again);
    assertThat(rows("SELECT reason || ' ' || coalesce(event_time::text, 'null') FROM geofence_dead_letters"))
        .containsExactly("MALFORMED_JSON null");
  }

  @Test
  void presenceRowsComeOnEnterAndGoOnExitInOrder() throws Exception {
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
   * Presence against an oracle that applies every trigger in order, one by one: random ENTERs and
   * EXITs over a few objects and fences (so that batches hold several of one key), written with
   * batch sizes from 1 to more than the stream.
   */
  @Test
  void presenceEqualsTriggersAppliedOneByOne() throws Exception {
    Random random = new Random(18);
    for (int round = 0; round < 12; round++) {
      try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement()) {
        s.execute("TRUNCATE geofence_presence");
      }
      int n = 1 + random.nextInt(400);
      GeofenceTrigger[] triggers = new GeofenceTrigger[n];
      Map<String, String> oracle = new TreeMap<>();
      for (int i = 0; i < n; i++) {
        String object = "o" + random.nextInt(5);
        String fence = "f" + random.nextInt(4);
        TriggerKind kind = random.nextInt(3) == 0 ? TriggerKind.EXIT : TriggerKind.ENTER;
        triggers[i] = new GeofenceTrigger(object, fence, kind, TriggerCause.LOCATION, 1000L * i, 0, 0, i, random.nextBoolean() ? "t" : null, 0);
        if (kind == TriggerKind.ENTER) {
          oracle.put(object + " " + fence, object + " " + fence + " " + 1000L * i + " " + i + " " + triggers[i].tenant);
        } else {
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
    try (Connection admin = postgres.getPostgresDatabase().getConnection(); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS earlier WITH (FORCE)");
      s.execute("CREATE DATABASE earlier");
    }
    String url = "jdbc:postgresql://localhost:" + postgres.getPort() + "/earlier";
    try (Connection c = java.sql.DriverManager.getConnection(url, "postgres", ""); Statement s = c.createStatement()) {
      Migrations.applyOutputs(c);
      s.execute("ALTER TABLE hydration_history DROP COLUMN buckets_reread, DROP COLUMN reread_reason, DROP COLUMN catchup_backlog,"
          + " DROP COLUMN catchup_path, DROP COLUMN catchup_reason, DROP COLUMN catchup_replay_estimate_ms,"
          + " DROP COLUMN catchup_read_estimate_ms");
      s.execute("INSERT INTO hydration_history (job_name, job_id, subtask, attempt, key_group_start, key_group_end, start_mode,"
          + " installed_at, gap_check) VALUES ('earlier', 'x', 0, 0, 0, 127, 'fresh', now(), 'not-needed')");
      Migrations.ensureOutputs(c);
      HydrationEpisode healed = episode(2);
      healed.bucketsReread = 2;
      healed.rereadReason = "bucket 17 still mismatched 900 ms of event time after its fingerprint; read again from the source";
      healed.catchupBacklog = 1_440L;
      healed.catchupPath = "read";
      healed.catchupReason = "read is the cheaper";
      healed.catchupReplayEstimateMs = 900L;
      healed.catchupReadEstimateMs = 400L;
      write(JdbcOutputs.hydrationHistory(new JdbcConnectionOptions.JdbcConnectionOptionsBuilder().withUrl(url).withUsername("postgres")
          .withDriverName("org.postgresql.Driver").build(), BATCHES, GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
          HydrationEpisode.class, healed);
      List<String> rows = new ArrayList<>();
      try (ResultSet r = s.executeQuery("SELECT job_name, buckets_reread, reread_reason, catchup_backlog, catchup_path,"
          + " catchup_reason, catchup_replay_estimate_ms, catchup_read_estimate_ms FROM hydration_history ORDER BY job_name")) {
        while (r.next()) {
          rows.add(r.getString(1) + " " + r.getLong(2) + " " + r.getString(3) + " " + r.getObject(4) + " " + r.getString(5) + " "
              + r.getString(6) + " " + r.getObject(7) + " " + r.getObject(8));
        }
      }
      assertThat(rows).containsExactly("earlier 0 null null null null null null",
          "geofence 2 " + healed.rereadReason + " 1440 read read is the cheaper 900 400");
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

  @SafeVarargs
  private static <T> void write(Sink<T> sink, Class<T> type, T... elements) throws Exception {
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
    env.setParallelism(1);
    env.fromData(TypeInformation.of(type), elements).sinkTo(sink);
    env.execute();
  }

  private static List<String> rows(String sql) throws Exception {
    List<String> rows = new ArrayList<>();
    try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement s = c.createStatement(); ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        rows.add(r.getString(1));
      }
    }
    return rows;
  }
}
