package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.Migrations;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The job as the least-privileged role of {@code docker/sql/source/geofence-role.sql}: a snapshot,
 * the stream, the heartbeat, the sinks, a savepoint restore with its gap check and catch-up all
 * work with those grants alone; the role cannot write the fences; its password is in no file of
 * the savepoint, and in the log (everything from INFO on) only where Flink CDC itself puts it.
 */
class LeastPrivilegeITCase extends EndToEndFixture {

  private static final String SECRET = "not-a-real-secret-4711";

  @Test
  void theJobRunsAndRestoresAsTheLeastPrivilegedRole() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_role", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      Migrations.applyJobRole(db);
      try (Statement s = db.createStatement()) {
        s.execute("ALTER ROLE geofence_job PASSWORD '" + SECRET + "'");
      }
      SplittableRandom random = new SplittableRandom(41);
      placeFences(db, random, 0, 30);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      user = "geofence_job";
      password = SECRET;

      JobClient first = start(url, "slot_role", inbox, 2, "rocksdb");
      String savepoint;
      List<Location> moved;
      try {
        awaitStreaming(db, "slot_role", inbox);
        moved = moveObjects(db, inbox, random, 1, inside);
        awaitTriggers(db, expected.size());
        savepoint = stopWithSavepoint(first);
      } catch (Exception e) {
        first.cancel().get();
        throw e;
      }
      awaitClockPast(db, moved);
      placeFences(db, random, 0, 4);
      deleteFences(db, 4, 6, inside);
      JobClient second = start(url, "slot_role", inbox, 2, "rocksdb", savepoint);
      try {
        awaitStreaming(db, "slot_role", inbox);
        moveObjects(db, inbox, random, 2, inside);
        Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
      } finally {
        second.cancel().get();
      }
      assertThat(queryLong(db, "SELECT count(*) FROM hydration_history WHERE hydrated_at IS NOT NULL")).isGreaterThanOrEqualTo(4);

      try (Connection job = java.sql.DriverManager.getConnection(url, "geofence_job", SECRET); Statement s = job.createStatement()) {
        assertThatThrownBy(() -> s.execute("DELETE FROM fences")).hasMessageContaining("permission denied");
        assertThatThrownBy(() -> s.execute("UPDATE fence_bucket_stats SET fence_count = 0")).hasMessageContaining("permission denied");
      }
      // Everything logged from INFO on, Flink CDC's and Debezium's configuration included.
      String log = Files.readString(Path.of("target/test-logs/all.log"), StandardCharsets.ISO_8859_1);
      assertThat(log).as("the log is being written").contains("slot_role");
      // Flink CDC 3.5 logs its Debezium configuration, password included, at INFO from this one
      // class (README says to keep it at WARN); nothing else may.
      assertThat(log.lines().filter(line -> line.contains(SECRET)))
          .as("lines with the password").allSatisfy(line -> assertThat(line).contains("PostgresSourceFetchTaskContext"));
      try (Stream<Path> files = Files.walk(Path.of(java.net.URI.create(savepoint)))) {
        for (Path file : files.filter(Files::isRegularFile).toList()) {
          assertThat(new String(Files.readAllBytes(file), StandardCharsets.ISO_8859_1)).as("%s", file).doesNotContain(SECRET);
        }
      }
    }
  }
}
