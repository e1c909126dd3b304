package dev.geofence.job;

import dev.geofence.job.operator.SavepointFiles;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.TcpProxy;
import dev.geofence.job.testing.Waiting;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.Lsn;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.SstFileReader;

/**
 * Warm starts with real savepoints (stop-with-savepoint, then a restore through the job's
 * configuration), a real replication slot and a real PostgreSQL: every way the restored index can
 * be behind the source, and what the job must then do. Each case ends with the triggers equal to
 * an uninterrupted run's (the oracle's: none lost, none written twice) and a three-way comparison
 * over {@value #POINTS} query points: the job's index, a fresh rebuild from the database, and JTS.
 */
class WarmStartITCase extends EndToEndFixture {

  static final int POINTS = 100_000;

  /**
   * Edits made while the job is down (reshapes, deletes, inserts, delete-then-re-create) are
   * caught up from the slot after a restore at another parallelism, twice: 2 -> 3 -> 1.
   */
  @Test
  void restoreCatchesUpOnEditsMadeWhileDownAndRescales() throws Exception {
    database("geofence_savepoint", 11);
    placeFences(0, 40);
    StoppedRun first = runAndStopWithSavepoint(2, "rocksdb");
    placeFences(0, 6);
    deleteFences(6, 14);
    createFences(6, 9);
    createFences(40, 46);

    // Locations arrive while the restored job warms up: held, none lost, none evaluated early.
    JobClient second = start(3, "rocksdb", first.savepoint());
    moveObjects();
    assertTriggersAsOracle();
    String again = stopWithSavepoint(second);
    // The savepoint stays the user's, whole, after a run restored from it at another parallelism
    // (under the changelog, Flink deleted a canonical savepoint's files once a subtask materialized).
    SavepointFiles.check(first.savepoint());

    placeFences(20, 24);
    deleteFences(24, 27);
    JobClient third = start(1, "rocksdb", again);
    moveObjects();
    threeWayCheck("rescaled", POINTS);
    assertTriggersAsOracle();
    assertPresenceAsOracle();

    // Every subtask of each run warmed up; the restores (where no failover restarted them from a
    // checkpoint) caught up, the slot could not have moved on: its old reader had gone, and they
    // replayed the edits made while down.
    assertThat(assertWarmUps(first.job(), 2, "fresh")).filteredOn(e -> e.startMode().equals("fresh"))
        .allSatisfy(e -> assertThat(e.gapCheck()).isEqualTo("not-needed"));
    for (JobClient restored : List.of(second, third)) {
      List<Episode> rows = assertWarmUps(restored, restored == second ? 3 : 1, "savepoint").stream()
          .filter(e -> e.startMode().equals("savepoint")).toList();
      assertThat(rows).allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e).isEqualTo("covered"));
      // Files resume from the savepoint, so the downtime's locations come: AUTO replays.
      assertThat(rows).allSatisfy(e -> assertThat(e.catchupPath()).as("catch-up of %s", e).isEqualTo("replay"));
      assertThat(rows.stream().mapToLong(Episode::editsReplayed).sum()).as("edits replayed: %s", rows).isPositive();
    }
  }

  /**
   * A restore that catches up by reading what changed, or by loading its buckets anew (issue 37),
   * at another parallelism (2 -> 3):
   * creates, reshapes, deletes and re-creations made while the job was down, and edits going on
   * while the subtasks read, merged with the read by seq. Every subtask read, so the job's slot
   * was moved to where the reads were: the thousands of edits made while down are not streamed. A location of the downtime (which only a
   * replay could evaluate against the fences of its time) is a BEFORE_READ dead letter, never a
   * trigger. Ends with the triggers as the oracle's and the three-way check.
   */
  @ParameterizedTest
  @EnumSource(value = CatchUp.class, names = {"READ", "LOAD"})
  void restoreCatchesUpByReadingWhatChangedAtAnotherParallelism(CatchUp path) throws Exception {
    database("geofence_changed_" + path.label(), 29);
    placeFences(0, 40);
    StoppedRun first = runAndStopWithSavepoint(2, "rocksdb");
    placeFences(0, 6);
    deleteFences(6, 14);
    createFences(6, 9);
    createFences(40, 46);
    // Two thousand edits more, each its own transaction, that the reads hold: the stream, started
    // where the reads were, never brings them again.
    awaitClockPastLocations();
    try (PreparedStatement touch = db.prepareStatement("UPDATE fences SET geom = geom WHERE id = ?")) {
      for (int i = 0; i < 2000; i++) {
        touch.setString(1, "fence-" + (20 + random.nextInt(20)));
        touch.execute();
      }
    }
    // Not given to the oracle: no subtask that read may evaluate it.
    writeLines(List.of(LocationJson.format(new Location("downtime", nextLocationTime(), 5, 5, null))));

    catchUp = path;
    JobClient second = launch(3, "rocksdb", first.savepoint());
    int edits = 0;
    for (; queryLong("SELECT count(*) FROM hydration_history WHERE job_id = '" + second.getJobID() + "' AND hydrated_at IS NOT NULL")
        < 3; edits++) {
      placeFences(46 + edits % 4, 47 + edits % 4);
    }
    moveObjects();
    threeWayCheck(path.label(), POINTS);
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    List<Episode> rows = assertWarmUps(second, 3, "savepoint").stream().filter(e -> e.startMode().equals("savepoint")).toList();
    assertThat(rows).as("edits made while it warmed up: %d", edits).allSatisfy(e -> {
      assertThat(e.gapCheck()).isEqualTo("covered");
      assertThat(e.catchupPath()).isEqualTo(path.label());
    });
    assertThat(queryLong("SELECT count(*) FROM geofence_dead_letters WHERE key = 'downtime' AND reason = 'BEFORE_READ'"))
        .as("the downtime's location, refused by the subtasks that read").isPositive();
    assertThat(queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id = 'downtime'")).isZero();
    assertThat(metricSum(second, "before_read_locations")).isPositive();
    assertThat(metricSum(second, "catchup_" + path.label())).as("every subtask took the path").isEqualTo(3);
    if (path == CatchUp.READ) {
      // Fences 14 to 19 were last written long before the savepoint's heartbeats: a key pass
      // narrowed by their transaction horizon never scans them.
      long live = queryLong("SELECT count(*) FROM fences");
      assertThat(metricSum(second, "catchup_keys_compared")).as("keys compared, of %d live fences", live)
          .isPositive().isLessThanOrEqualTo(live - 6);
    }
    // Without the slot moved, every edit made while down would come again as a duplicate.
    assertThat(metricSum(second, "edits_duplicate")).as("edits the stream brought that the reads held").isLessThan(500);
  }

  /**
   * A native savepoint (RocksDB's own files, the fast one to restore) catches up like a canonical
   * one, and its files are as the job writes RocksDB's by default: uncompressed
   * ({@link StateSettings}; every file RocksDB wrote says its compression in its properties).
   */
  @Test
  void nativeSavepointRestoresAndItsRocksDbFilesAreUncompressed() throws Exception {
    database("geofence_native_savepoint", 17);
    placeFences(0, 30);
    JobClient first = start(2, "rocksdb");
    moveObjects();
    assertTriggersAsOracle();
    String savepoint = first.stopWithSavepoint(false, temp.resolve("native").toUri().toString(), SavepointFormatType.NATIVE).get();
    awaitSlotReleased();
    assertThat(compressionOfRocksDbFiles(Path.of(URI.create(savepoint)))).as("the savepoint's RocksDB files, by compression")
        .containsOnlyKeys("NoCompression");

    placeFences(0, 5);
    deleteFences(25, 28);
    JobClient second = start(2, "rocksdb", savepoint);
    moveObjects();
    threeWayCheck("native", POINTS);
    assertTriggersAsOracle();
    List<Episode> warmUps = assertWarmUps(second, 2, "savepoint");
    assertThat(warmUps).filteredOn(e -> e.startMode().equals("savepoint"))
        .allSatisfy(e -> assertThat(e.gapCheck()).isEqualTo("covered"));
    // The 8 transactions made while the job was down, each of one bucket, as the bucket versions
    // told the gap check (each subtask's latest warm-up from the savepoint, should one fail over).
    Map<Integer, Long> backlogs = new TreeMap<>();
    warmUps.stream().filter(e -> e.startMode().equals("savepoint") && e.catchupBacklog() != null)
        .forEach(e -> backlogs.put(e.subtask(), e.catchupBacklog()));
    assertThat(backlogs).as("catch-up backlog per subtask: %s", warmUps).hasSize(2);
    assertThat(backlogs.values().stream().mapToLong(Long::longValue).sum()).as("catch-up backlog: %s", warmUps).isEqualTo(8);
  }

  /** How many of the RocksDB table files under {@code directory} have each compression. */
  private static Map<String, Long> compressionOfRocksDbFiles(Path directory) throws Exception {
    RocksDB.loadLibrary();
    Map<String, Long> compressions = new TreeMap<>();
    List<Path> files;
    try (Stream<Path> walk = Files.walk(directory)) {
      files = walk.filter(Files::isRegularFile).toList();
    }
    for (Path file : files) {
      // A native savepoint names its files by UUID: a table file is one RocksDB can open as such.
      try (Options options = new Options(); SstFileReader reader = new SstFileReader(options)) {
        reader.open(file.toString());
        compressions.merge(reader.getTableProperties().getCompressionName(), 1L, Long::sum);
      } catch (RocksDBException notATable) {
        // MANIFEST, OPTIONS, CURRENT, the savepoint's metadata
      }
    }
    assertThat(compressions).as("table files in %s", directory).isNotEmpty();
    return compressions;
  }

  /**
   * The trap the gap check exists for: a savepoint older than the slot's confirmed position. The
   * slot would silently stream from its own position and skip the edits in between; a subtask
   * whose buckets had such an edit finds the gap and rebuilds from the source, one whose buckets had
   * none proves so by the bucket versions and keeps its restored fences; the stream's redelivery of
   * edits the rebuild already read is idempotent and counted.
   */
  @Test
  void olderSavepointAfterTheSlotMovedOnIsRebuiltFromTheSource() throws Exception {
    database("geofence_old_savepoint", 13);
    placeFences(0, 20);
    JobClient first = start(2, "hashmap");
    moveObjects();
    assertTriggersAsOracle();
    String older = first.triggerSavepoint(temp.resolve("savepoints").toUri().toString()).get();

    // Edits the older savepoint has not seen, then checkpoints until the slot confirms past them.
    deleteFences(0, 5);
    placeFences(5, 10);
    long afterEdits = lsn("SELECT pg_current_wal_lsn()");
    Waiting.until("the slot to confirm past the edits the older savepoint has not seen", PATIENCE,
        () -> lsn("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'") > afterEdits);
    first.cancel().get();
    awaitSlotReleased();
    // Edits both the rebuild and the stream will deliver: the stream's copies are duplicates.
    placeFences(10, 14);

    JobClient second = start(2, "hashmap", older);
    moveObjects();
    threeWayCheck("older", POINTS);
    assertTriggersAsOracle();
    List<Episode> warmUps = assertWarmUps(second, 2, "savepoint");
    // Flink's counters restart with a task: after a failover (a warm-up from a checkpoint) the
    // redelivery was counted by an attempt that is gone.
    if (warmUps.stream().allMatch(e -> e.startMode().equals("savepoint"))) {
      assertThat(metricSum(second, "edits_duplicate")).as("redelivered edits counted as duplicates; warm-ups %s", warmUps)
          .isGreaterThanOrEqualTo(4);
    }

    Set<Integer> skipped = IntStream.range(0, 10).mapToObj(i -> subtaskOf("fence-" + i)).collect(Collectors.toSet());
    for (Episode e : warmUps) {
      if (!e.startMode().equals("savepoint")) {
        continue; // restored from a checkpoint after a failover: the check was of that
      }
      if (skipped.contains(e.subtask())) {
        assertThat(e.gapCheck()).as("%s had edits in the skipped stretch", e).isEqualTo("gap");
        assertThat(e.gapReason()).contains("skipped");
      } else {
        assertThat(e.gapCheck()).as("%s had none", e).isEqualTo("covered");
      }
    }
  }

  @Test
  void droppedSlotIsRebuiltFromTheSource() throws Exception {
    restoreAfterLosingTheSlot("geofence_dropped_slot", () -> {
      try (Statement s = db.createStatement()) {
        s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
      }
    });
  }

  /** The slot's WAL removed under a small {@code max_slot_wal_keep_size}: it can never stream again. */
  @Test
  void slotWhoseWalWasLostIsRebuiltFromTheSource() throws Exception {
    restoreAfterLosingTheSlot("geofence_lost_wal", () -> {
      try (Statement s = db.createStatement()) {
        s.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
        s.execute("SELECT pg_reload_conf()");
        s.execute("CREATE TABLE IF NOT EXISTS churn (x int)");
        try {
          // Each round writes and switches WAL segments, so checkpoints may remove the slot's.
          Waiting.until("the slot's WAL to be removed", PATIENCE, () -> {
            s.execute("INSERT INTO churn SELECT generate_series(1, 20000)");
            s.execute("SELECT pg_switch_wal()");
            s.execute("CHECKPOINT");
            return "lost".equals(walStatus());
          });
        } finally {
          s.execute("ALTER SYSTEM RESET max_slot_wal_keep_size");
          s.execute("SELECT pg_reload_conf()");
        }
      }
    });
  }

  interface SlotBreaker {
    void breakSlot() throws Exception;
  }

  /**
   * The slot is broken while the job is down, and edits are made that it will never carry. Which
   * reason the gap check gives depends on whether the restarting CDC source has already created a
   * new slot (then it is confirmed past the restored position) or not; and a CDC source that
   * cannot stream from its restored position fails the job over, so a subtask may warm up more
   * than once before it is ready.
   */
  private void restoreAfterLosingTheSlot(String database, SlotBreaker breaker) throws Exception {
    database(database, database.hashCode());
    placeFences(0, 30);
    String savepoint = runAndStopWithSavepoint(2, "hashmap").savepoint();
    placeFences(0, 5);
    deleteFences(5, 10);
    breaker.breakSlot();
    // Edits the broken slot never carried: only the rebuild can know them.
    placeFences(10, 15);
    deleteFences(15, 18);

    JobClient second = start(2, "hashmap", savepoint);
    moveObjects();
    threeWayCheck(slot, POINTS);
    assertTriggersAsOracle();
    assertThat(assertWarmUps(second, 2, "savepoint")).as("the restored job's warm-ups from the savepoint")
        .filteredOn(e -> e.startMode().equals("savepoint")).allSatisfy(e -> {
      assertThat(e.gapCheck()).isEqualTo("gap");
      assertThat(e.gapReason()).containsAnyOf("does not exist", "wal_status = lost", "skipped");
    });
  }

  /**
   * The fence database unreachable when a savepoint is restored (the network to it cut by a
   * proxy): the job keeps retrying (the CDC source fails the job over, the gap check retries), and
   * holds the locations that arrive meanwhile: not one trigger is written from the moment the
   * database goes until it is back, which is only after the job has failed on it twice. Then the
   * index catches up and they are evaluated, none lost, against the edits made while it was down.
   */
  @Test
  void databaseUnreachableAtRestoreHoldsLocationsUntilItIsBack() throws Exception {
    database("geofence_unreachable", 23);
    try (TcpProxy proxy = new TcpProxy("localhost", postgres.getPort())) {
      sourceUrl = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/geofence_unreachable";
      placeFences(0, 30);
      String savepoint = runAndStopWithSavepoint(2, "hashmap").savepoint();
      placeFences(0, 5);
      deleteFences(5, 8);

      proxy.down();
      long down = System.currentTimeMillis();
      JobClient second = start(2, "hashmap", savepoint);
      moveObjects();
      // The restored job fails over while its CDC source cannot connect: it has met the outage,
      // and kept at it, once it has failed on it twice.
      Waiting.until("the restored job to fail twice on the unreachable database", PATIENCE,
          () -> failuresMentioning(second, "refused") >= 2);
      proxy.up();
      long up = System.currentTimeMillis();
      threeWayCheck("unreachable", POINTS);
      assertTriggersAsOracle();
      assertThat(queryLong("SELECT count(*) FROM geofence_triggers WHERE emitted_at >= to_timestamp(" + down / 1000.0
          + ") AND emitted_at < to_timestamp(" + up / 1000.0 + ")")).as("triggers written while the database was unreachable").isZero();
      // The last attempt of each subtask ended hydrated once the database was back.
      assertWarmUps(second, 2, "savepoint");
    }
  }

  /**
   * A seq gap in the live stream (an edit's seq jumps: here, written with the versioning trigger
   * off) means the stream lost an edit: the subtask stops evaluating, rebuilds its buckets from the
   * source while the job runs, and goes on correct; the rebuild is an episode of its own.
   */
  @Test
  void seqGapInTheStreamIsRebuiltFromTheSource() throws Exception {
    database("geofence_seq_gap", 17);
    placeFences(0, 30);
    JobClient job = start(2, "rocksdb");
    moveObjects();
    awaitEvaluated();
    awaitClockPastLocations();
    try (Statement s = db.createStatement()) {
      s.execute("BEGIN");
      s.execute("ALTER TABLE fences DISABLE TRIGGER fences_version");
      s.execute("UPDATE fences SET seq = seq + 3, geom = geom WHERE id = 'fence-3'");
      // PostgreSQL alters no table with deferred trigger events pending: the fold runs now.
      s.execute("SET CONSTRAINTS fences_updated IMMEDIATE");
      s.execute("ALTER TABLE fences ENABLE TRIGGER fences_version");
      s.execute("COMMIT");
    }
    placeFences(3, 6);
    moveObjects();
    threeWayCheck("seq-gap", POINTS);
    assertTriggersAsOracle();
    assertThat(metricSum(job, "seq_gaps")).isEqualTo(1);
    assertWarmUps(job, 2, "fresh");
    assertThat(episodes(job)).as("the rebuild of fence-3's subtask, an episode of its own")
        .filteredOn(e -> e.startMode().equals("rebuild")).singleElement().satisfies(e -> {
          assertThat(e.subtask()).isEqualTo(subtaskOf("fence-3"));
          assertThat(e.gapReason()).contains("seq gap on fence fence-3");
          assertHydrated(e);
        });
  }

  /**
   * The TaskManager dies while a restored job is still catching up on thousands of edits made while
   * it was down: the job recovers from its last checkpoint or the savepoint, none lost, none twice.
   */
  @Test
  void taskFailureDuringCatchUpRecovers(@InjectMiniCluster MiniCluster cluster) throws Exception {
    database("geofence_failover", 19);
    placeFences(0, 40);
    String savepoint = runAndStopWithSavepoint(2, "rocksdb").savepoint();
    // Thousands of edits, each its own transaction: a catch-up that takes a while.
    awaitClockPastLocations();
    try (PreparedStatement touch = db.prepareStatement("UPDATE fences SET geom = geom WHERE id = ?")) {
      for (int i = 0; i < 3000; i++) {
        touch.setString(1, "fence-" + random.nextInt(40));
        touch.execute();
      }
    }
    placeFences(0, 10);

    JobClient second = start(2, "rocksdb", savepoint);
    moveObjects();
    Waiting.until("the restored job to begin its warm-up", PATIENCE,
        () -> queryLong("SELECT count(*) FROM hydration_history WHERE job_id = '" + second.getJobID() + "' AND hydrated_at IS NULL") > 0);
    cluster.terminateTaskManager(0).get();
    cluster.startTaskManager();
    moveObjects();
    threeWayCheck("failover", POINTS);
    assertTriggersAsOracle();
    assertThat(episodes(second)).as("a warm-up cut short by the failure").anySatisfy(e -> assertThat(e.hydratedAt()).isZero());
    assertWarmUps(second, 2, "savepoint");
  }

  /** How many of the job's failures in Flink's exception history mention {@code text}. */
  static long failuresMentioning(JobClient job, String text) throws Exception {
    Configuration client = FLINK.getClientConfiguration();
    URI exceptions = URI.create("http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT)
        + "/jobs/" + job.getJobID() + "/exceptions?maxExceptions=20");
    String body = HttpClient.newHttpClient().send(HttpRequest.newBuilder(exceptions).build(), HttpResponse.BodyHandlers.ofString()).body();
    long failures = 0;
    for (JsonNode entry : new ObjectMapper().readTree(body).path("exceptionHistory").path("entries")) {
      failures += entry.path("stacktrace").asText().contains(text) ? 1 : 0;
    }
    return failures;
  }

  private String walStatus() throws Exception {
    try (Statement s = db.createStatement();
        ResultSet r = s.executeQuery("SELECT wal_status FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
      return r.next() ? r.getString(1) : null;
    }
  }

  private long lsn(String sql) throws Exception {
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      r.next();
      return Lsn.parse(r.getString(1));
    }
  }
}
