package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.model.Location;
import dev.geofence.savepoints.SavepointInspection;
import dev.geofence.state.readiness.Lsn;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The savepoint tools on real savepoints: {@code inspect} and {@code verify} on one the job took,
 * of known content; {@code bootstrap} writing one the job restores from, without a CDC snapshot.
 */
class SavepointToolsITCase extends EndToEndFixture {

  @Test
  void inspectReportsWhatTheSavepointHolds() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_inspect", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(29);
      placeFences(db, random, 0, 60);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient job = start(url, "slot_inspect", inbox, 2, "rocksdb");
      String savepoint;
      try {
        String sentinel = awaitStreaming(db, "slot_inspect", inbox);
        List<Location> moved = moveObjects(db, inbox, random, 1, inside);
        awaitClockPast(db, moved);
        deleteFences(db, 50, 60, inside);
        inside.put(sentinel, Set.of("sentinel"));
        awaitStreaming(db, "slot_inspect", inbox);
        awaitTriggers(db, expected.size());
        savepoint = stopWithSavepoint(job);
      } catch (Exception e) {
        job.cancel().get();
        throw e;
      }

      SavepointInspection inspection = SavepointInspection.read(savepoint, 3);
      assertThat(inspection.fences).as("not an empty savepoint").isPositive()
          .isEqualTo(queryLong(db, "SELECT fence_count FROM fence_stats"));
      assertThat(inspection.checksum).isEqualTo(queryLong(db, "SELECT checksum FROM fence_stats"));
      assertThat(inspection.tombstones).isEqualTo(queryLong(db, "SELECT count(*) FROM fence_tombstones"));
      assertThat(inspection.unreadable).isZero();
      assertThat(inspection.vertices).isEqualTo(fences.values().stream().filter(g -> g != null).mapToLong(g -> g.getNumPoints()).sum());
      assertThat(inspection.memberships).isEqualTo(presence(db).size());
      assertThat(inspection.fencesPerSubtask).hasSize(3);
      assertThat(java.util.Arrays.stream(inspection.fencesPerSubtask).sum()).isEqualTo(inspection.fences);
      assertThat(java.util.Arrays.stream(inspection.fencesPerKeyGroup).sum()).isEqualTo(inspection.fences);
      assertThat(Long.compareUnsigned(inspection.restoredLsn, 0)).isPositive();
      assertThat(inspection.restoredLsn).isLessThanOrEqualTo(Lsn.parse(queryString(db, "SELECT pg_current_wal_lsn()::text")));

      JsonNode json = new ObjectMapper().readTree(inspection.json(System.currentTimeMillis()));
      assertThat(json.get("fences").asLong()).isEqualTo(inspection.fences);
      assertThat(json.get("stream_lsn").asText()).isEqualTo(Lsn.format(inspection.restoredLsn));
      assertThat(inspection.table(System.currentTimeMillis())).contains("live", "subtask 2");

      // The command line, as users run it.
      assertThat(command(new String[] {"inspect", savepoint, "--json"})).startsWith("0 {");
      assertThat(lastErr).as("progress").containsPattern("state entries: [0-9,]+ in [0-9.]+ s \\([0-9,]+/s\\), done");
      assertThat(command(new String[] {"inspect", "/nowhere"})).startsWith("2 ").contains("could not be read");
      String[] verify = {"verify", savepoint, "--source-url", url, "--source-user", "postgres"};
      assertThat(command(verify)).startsWith("0 equal as of the savepoint: 0 fences differ, 0 buckets behind")
          .contains("savepoint: " + inspection.fences + " fences, checksum " + inspection.checksum
              + "; source now: " + inspection.fences + " fences, checksum " + inspection.checksum);

      // An edit after the savepoint is no difference as of it: its bucket is not compared.
      placeFences(db, random, 20, 21);
      assertThat(command(verify)).startsWith("0 equal").contains("1 buckets edited since");

      // Changes that bypassed the versioning (the triggers off): verify finds each, by kind.
      assertThat(java.util.stream.Stream.of("fence-3", "fence-4", "oob-1").map(dev.geofence.state.checksum.FenceBuckets::of))
          .doesNotContain(dev.geofence.state.checksum.FenceBuckets.of("fence-20"));
      try (java.sql.Statement s = db.createStatement()) {
        s.execute("ALTER TABLE fences DISABLE TRIGGER USER");
        s.execute("DELETE FROM fences WHERE id = 'fence-3'");
        s.execute("UPDATE fences SET seq = seq + 5 WHERE id = 'fence-4'");
        s.execute("INSERT INTO fences (id, seq, geom) SELECT 'oob-1', 1, geom FROM fences WHERE id = 'fence-5'");
        s.execute("ALTER TABLE fences ENABLE TRIGGER USER");
      }
      assertThat(command(verify)).startsWith("1 DIFFERENT as of the savepoint: 3 fences differ")
          .contains("extra fence-3", "stale fence-4", "missing oob-1");
    }
  }

  /**
   * A first deploy from a bootstrapped savepoint: it holds what the source holds (not empty), the
   * job restores from it streaming from the slot the bootstrap created, catches up on the edits
   * made since, and answers as the oracle and a fresh rebuild do.
   */
  @Test
  void theJobRestoresFromABootstrappedSavepoint() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_bootstrap", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(31);
      placeFences(db, random, 0, 50);
      deleteFences(db, 40, 45, new HashMap<>());
      createFences(db, random, 40, 42);
      String savepoint = temp.resolve("bootstrapped").toString();
      assertThat(command(new String[] {"bootstrap", "--source-url", url, "--source-user", "postgres", "--slot", "slot_boot",
          "--output", savepoint})).startsWith("0 bootstrapped");
      SavepointInspection written = SavepointInspection.read(savepoint, 2);
      assertThat(written.fences).as("not an empty savepoint").isPositive().isEqualTo(queryLong(db, "SELECT fence_count FROM fence_stats"));
      assertThat(written.checksum).isEqualTo(queryLong(db, "SELECT checksum FROM fence_stats"));
      assertThat(written.tombstones).as("deleted and not re-created")
          .isEqualTo(queryLong(db, "SELECT count(*) FROM fence_tombstones t WHERE NOT EXISTS (SELECT 1 FROM fences f WHERE f.id = t.id)"));
      assertThat(written.vertices).isEqualTo(fences.values().stream().filter(g -> g != null).mapToLong(g -> g.getNumPoints()).sum());

      // Edits after the bootstrap's read: the restored job catches up on them from the slot.
      Map<String, Set<String>> inside = new HashMap<>();
      placeFences(db, random, 0, 5);
      deleteFences(db, 5, 8, inside);
      createFences(db, random, 50, 53);
      streamFromSlot = true;
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      JobClient job = start(url, "slot_boot", inbox, 2, "rocksdb", savepoint);
      try {
        awaitStreaming(db, "slot_boot", inbox);
        moveObjects(db, inbox, random, 1, inside);
        threeWayCheck(db, inbox, "bootstrapped", 100_000);
        java.util.Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
      } finally {
        job.cancel().get();
      }
      assertThat(episodes(db)).filteredOn(e -> e.hydratedAt != 0).hasSizeGreaterThanOrEqualTo(2).allSatisfy(e -> {
        assertThat(e.startMode).isIn("savepoint", "checkpoint");
        assertThat(e.gapCheck).isEqualTo("covered");
      });
      assertThat(queryLong(db, "SELECT count(*) FROM geofence_dead_letters")).isZero();
    }
  }

  /**
   * A savepoint exported to an Arrow file and bootstrapped back holds the same, and the job
   * restored from it (at another parallelism, streaming from its slot) catches up and answers as
   * the oracle and a fresh rebuild do, with no trigger lost or repeated: the objects inside fences
   * travel in the file too.
   */
  @Test
  void aSavepointRoundTripsThroughAnArrowFile() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_arrow", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(37);
      placeFences(db, random, 0, 40);
      Map<String, Set<String>> inside = new HashMap<>();
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      JobClient first = start(url, "slot_arrow", inbox, 2, "rocksdb");
      String savepoint;
      List<Location> moved;
      try {
        awaitStreaming(db, "slot_arrow", inbox);
        moved = moveObjects(db, inbox, random, 1, inside);
        awaitTriggers(db, expected.size());
        savepoint = stopWithSavepoint(first);
      } catch (Exception e) {
        first.cancel().get();
        throw e;
      }

      Path file = temp.resolve("fences.arrow");
      assertThat(command(new String[] {"export", savepoint, "--to-arrow", file.toString()})).startsWith("0 exported");
      assertThat(lastErr).as("progress with a total").containsPattern("fences: [0-9,]+ of [0-9,]+ in .*, done");
      String imported = temp.resolve("imported").toString();
      assertThat(command(new String[] {"bootstrap", "--from-arrow", file.toString(), "--output", imported})).startsWith("0 bootstrapped");
      SavepointInspection original = SavepointInspection.read(savepoint, 2);
      SavepointInspection copy = SavepointInspection.read(imported, 2);
      assertThat(copy.fences).as("not an empty savepoint").isPositive().isEqualTo(original.fences);
      assertThat(copy.liveSeqs).isEqualTo(original.liveSeqs);
      assertThat(copy.checksum).isEqualTo(original.checksum);
      assertThat(copy.vertices).isEqualTo(original.vertices);
      assertThat(copy.memberships).isPositive().isEqualTo(original.memberships);
      assertThat(copy.restoredLsn).isEqualTo(original.restoredLsn);
      assertThat(copy.bucketVersions).isEqualTo(original.bucketVersions);

      awaitClockPast(db, moved);
      placeFences(db, random, 0, 5);
      deleteFences(db, 5, 8, inside);
      streamFromSlot = true;
      // A bootstrapped savepoint holds no source's position: the restored job reads a new inbox.
      Path next = Files.createDirectories(temp.resolve("inbox-after-import"));
      JobClient second = start(url, "slot_arrow", next, 3, "rocksdb", imported);
      try {
        moveObjects(db, next, random, 2, inside);
        awaitStreaming(db, "slot_arrow", next);
        threeWayCheck(db, next, "arrow", 100_000);
        java.util.Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
        assertThat(queryLong(db, "SELECT count(*) FROM geofence_triggers")).as("no trigger written twice").isEqualTo(expected.size());
      } finally {
        second.cancel().get();
      }
    }
  }

  /** What the last command printed on its error stream: progress, and errors. */
  private String lastErr = "";

  /** Runs the savepoint command line: its exit code, a space, and what it printed (errors included). */
  private String command(String[] args) {
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    java.io.ByteArrayOutputStream errBytes = new java.io.ByteArrayOutputStream();
    int status = dev.geofence.savepoints.SavepointCommand.run(args,
        new java.io.PrintStream(bytes, true, java.nio.charset.StandardCharsets.UTF_8),
        new java.io.PrintStream(errBytes, true, java.nio.charset.StandardCharsets.UTF_8));
    lastErr = errBytes.toString(java.nio.charset.StandardCharsets.UTF_8);
    String printed = bytes.toString(java.nio.charset.StandardCharsets.UTF_8);
    // A failure's one sentence is on the error stream, after any progress lines.
    String[] errLines = lastErr.strip().split("\\R");
    return status + " " + (status == 2 ? errLines[errLines.length - 1] : printed);
  }

  private static String queryString(Connection db, String sql) throws Exception {
    try (java.sql.Statement s = db.createStatement(); java.sql.ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getString(1);
    }
  }
}
