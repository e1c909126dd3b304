package dev.geofence.docker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.kafka.KafkaBroker;
import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.ResultSet;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.Test;

/**
 * The Flink SQL DDL users load into their SQL client, {@code docker/sql/flink/geofence-tables.sql},
 * executed as it is in a TableEnvironment, reads back what the job wrote: the triggers, presence
 * and hydration history tables through the JDBC connector as the read-only role, and the triggers
 * topic through the Kafka connector, each compared with the rows PostgreSQL and Kafka hold.
 */
class FlinkSqlITCase extends EndToEndFixture {

  static final Path DDL = Path.of("sql/flink/geofence-tables.sql");
  private static final String READER_PASSWORD = "reader-secret-for-the-test";

  @Test
  void theDdlFilesReadWhatTheJobWrote() throws Exception {
    try (KafkaBroker kafka = KafkaBroker.start()) {
      kafka.createTopic("geofence-triggers", 2);
      database("flink_sql", 23);
      triggersTopic = KafkaOutputs.triggers(kafka.bootstrapServers(), "geofence-triggers", "geofence-sql-it", Duration.ofMinutes(5));
      Migrations.applyJobRole(db);
      try (Statement s = db.createStatement()) {
        s.execute("ALTER ROLE geofence_reader PASSWORD '" + READER_PASSWORD + "'");
      }
      // Every kind and cause reaches the outputs: stays DWELL after half a second, and every object
      // falls silent 10 s after its last location, decided once the clock (moved on by the fence
      // heartbeats when the locations stop) is past that by the lateness: short, yet long enough
      // for the files the job reads late in its start not to be LATE, and for the deletes below to
      // be committed before the objects inside the deleted fences fall silent (at 3 s, a CI run on
      // a busy host evaluated the locations and deleted the fences later than that, and the one
      // object inside them left by silence instead: no fence-deleted EXIT).
      timePolicy = new LocationTimePolicy(Duration.ofSeconds(10), Duration.ofSeconds(30));
      stayRules = new StayRules(Duration.ofMillis(500), Duration.ofSeconds(10));
      placeFences(0, 30);
      start(2, "hashmap");
      moveObjects();
      // Evaluated before the delete, as the oracle has them: a location the job reads only once the
      // clock has passed the delete does not reopen the deleted fence (docs/design.md, "Time rules"),
      // and object-4, the one inside fence-0 at the end, would then have no EXIT of it.
      awaitEvaluated();
      deleteFences(0, 3);
      String last = awaitEvaluated();
      Waiting.until("the last location's object to fall silent", PATIENCE,
          () -> queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id = '" + last + "' AND cause = 'silence'") > 0);
      // Objects inside fences again, for presence to show; the job is cancelled once the topic has
      // every trigger, seconds before these fall silent, so that the outputs hold still.
      moveObjects();
      awaitEvaluated();
      String allTriggers = "SELECT trigger_id, object_id, fence_id, kind, " + millis("event_time") + ", lon, fence_seq, cause"
          + " FROM geofence_triggers";
      Waiting.until("the checkpoint after the last trigger to commit them all to the topic", PATIENCE,
          () -> kafka.values("geofence-triggers", true).size() == rows(allTriggers).size());
      cancelJobs();
      Set<String> triggers = rows(allTriggers);
      assertThat(triggers).as("every trigger the job wrote says its cause").noneMatch(row -> row.endsWith(" null"))
          .anyMatch(row -> row.contains(" ENTER ")).anyMatch(row -> row.endsWith(" location"))
          .anyMatch(row -> row.endsWith(" fence-deleted")).anyMatch(row -> row.contains(" DWELL "))
          .anyMatch(row -> row.endsWith(" silence"));

      TableEnvironment sql = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
      // Bounded reads of a few rows: one slot each.
      sql.getConfig().set("parallelism.default", "1");
      for (String statement : statements(Files.readString(DDL))) {
        sql.executeSql(statement);
      }
      // Only the endpoints and the password differ from the compose setup's.
      for (String table : List.of("geofence_triggers", "geofence_presence", "hydration_history")) {
        sql.executeSql("ALTER TABLE " + table + " SET ('url' = '" + url + "', 'password' = '" + READER_PASSWORD + "')");
      }
      sql.executeSql("ALTER TABLE geofence_triggers_topic SET ('properties.bootstrap.servers' = '" + kafka.bootstrapServers()
          + "', 'scan.bounded.mode' = 'latest-offset')");

      assertThat(collect(sql, "SELECT trigger_id, object_id, fence_id, kind, event_time, lon, fence_seq, cause"
          + " FROM geofence_triggers")).as("geofence_triggers through Flink SQL").isEqualTo(triggers).isNotEmpty();
      assertThat(collect(sql, "SELECT trigger_id, object_id, fence_id, kind, event_time, lon, fence_seq, cause"
          + " FROM geofence_triggers_topic")).as("the triggers topic through Flink SQL").isEqualTo(triggers);
      assertThat(collect(sql, "SELECT object_id, fence_id, entered_at, fence_seq FROM geofence_presence"))
          .as("geofence_presence through Flink SQL")
          .isEqualTo(rows("SELECT object_id, fence_id, " + millis("entered_at") + ", fence_seq FROM geofence_presence"))
          .isNotEmpty();
      assertThat(collect(sql, "SELECT job_id, subtask, start_mode, gap_check, hydrated_at, fences_loaded,"
          + " checksum_match, buckets_reread, reread_reason, catchup_backlog FROM hydration_history"))
          .as("hydration_history through Flink SQL")
          .isEqualTo(rows("SELECT job_id, subtask, start_mode, gap_check, " + millis("hydrated_at")
              + ", fences_loaded, checksum_match, buckets_reread, reread_reason, catchup_backlog FROM hydration_history"))
          .hasSize(2);
    }
  }

  /** The file's statements: split at semicolons that end a line, comments left to Flink's parser. */
  static List<String> statements(String file) {
    List<String> statements = new ArrayList<>();
    for (String part : file.split(";\\s*\\n")) {
      if (!part.lines().allMatch(line -> line.isBlank() || line.strip().startsWith("--"))) {
        statements.add(part);
      }
    }
    return statements;
  }

  private static String millis(String column) {
    return "(extract(epoch FROM " + column + ") * 1000)::bigint";
  }

  /** A query's rows as strings (columns joined by spaces), as a set. */
  private static Set<String> collect(TableEnvironment sql, String query) throws Exception {
    Set<String> rows = new TreeSet<>();
    try (CloseableIterator<Row> it = sql.executeSql(query).collect()) {
      while (it.hasNext()) {
        Row row = it.next();
        List<String> fields = new ArrayList<>();
        for (int i = 0; i < row.getArity(); i++) {
          Object field = row.getField(i);
          // Times compared as epoch millis, as PostgreSQL gives them: TIMESTAMP_LTZ arrives as an
          // Instant, the JDBC tables' TIMESTAMP as the wall-clock time of this JVM's zone.
          if (field instanceof Instant) {
            field = ((Instant) field).toEpochMilli();
          } else if (field instanceof LocalDateTime) {
            field = Timestamp.valueOf((LocalDateTime) field).getTime();
          }
          fields.add(String.valueOf(field));
        }
        rows.add(String.join(" ", fields));
      }
    }
    return rows;
  }

  private Set<String> rows(String query) throws Exception {
    Set<String> rows = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(query)) {
      int columns = r.getMetaData().getColumnCount();
      while (r.next()) {
        List<String> fields = new ArrayList<>();
        for (int i = 1; i <= columns; i++) {
          fields.add(String.valueOf(r.getObject(i)));
        }
        rows.add(String.join(" ", fields));
      }
    }
    return rows;
  }
}
