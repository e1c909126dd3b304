package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.testing.EndToEndFixture;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.util.stream.Stream;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The job as the least-privileged role of {@code docker/sql/source/geofence-role.sql}: a snapshot,
 * the stream, the heartbeat, the sinks, a savepoint restore with its gap check and catch-up all
 * work with those grants alone; the role cannot write the fences; its password is in no file of
 * the savepoint nor in the log (everything from INFO on, Flink CDC's own included).
 */
class LeastPrivilegeITCase extends EndToEndFixture {

  private static final String SECRET = "not-a-real-secret-4711";

  @Test
  void theJobRunsAndRestoresAsTheLeastPrivilegedRole() throws Exception {
    database("geofence_role", 41);
    Migrations.applyJobRole(db);
    try (Statement s = db.createStatement()) {
      s.execute("ALTER ROLE geofence_job PASSWORD '" + SECRET + "'");
    }
    placeFences(0, 30);
    user = "geofence_job";
    password = SECRET;

    StoppedRun first = runAndStopWithSavepoint(2, "rocksdb");
    String savepoint = first.savepoint();
    placeFences(0, 4);
    deleteFences(4, 6);
    JobClient second = start(2, "rocksdb", savepoint);
    moveObjects();
    assertTriggersAsOracle();
    assertWarmUps(first.job(), 2, "fresh");
    assertThat(assertWarmUps(second, 2, "savepoint")).filteredOn(e -> e.startMode().equals("savepoint"))
        .allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e).isEqualTo("covered"));

    try (Connection job = java.sql.DriverManager.getConnection(url, "geofence_job", SECRET); Statement s = job.createStatement()) {
      assertThatThrownBy(() -> s.execute("DELETE FROM fences")).hasMessageContaining("permission denied");
      assertThatThrownBy(() -> s.execute("UPDATE fence_bucket_stats SET fence_count = 0")).hasMessageContaining("permission denied");
    }
    // Everything logged from INFO on, Flink CDC's and Debezium's configuration included.
    String log = Files.readString(Path.of(System.getProperty("geofence.test.log", "target/test-logs/all.log")), StandardCharsets.ISO_8859_1);
    assertThat(log).as("the log is being written").contains(slot);
    // Flink CDC 3.5 logs its Debezium configuration, password included, at INFO from one class,
    // which this log configuration leaves at INFO as a cluster's usual one does: the job holds it at WARN.
    assertThat(log.lines().filter(line -> line.contains(SECRET))).as("lines with the password").isEmpty();
    assertThat(log).as("the job says it held Flink CDC's logger").contains("Held org.apache.flink.cdc.connectors.postgres.source.fetch.PostgresSourceFetchTaskContext at WARN");
    try (Stream<Path> files = Files.walk(Path.of(java.net.URI.create(savepoint)))) {
      for (Path file : files.filter(Files::isRegularFile).toList()) {
        assertThat(new String(Files.readAllBytes(file), StandardCharsets.ISO_8859_1)).as("%s", file).doesNotContain(SECRET);
      }
    }
  }
}
