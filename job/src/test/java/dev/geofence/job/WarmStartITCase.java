package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import dev.geofence.state.readiness.Lsn;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.test.junit5.InjectMiniCluster;
import org.junit.jupiter.api.Test;

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
    String url = createDatabase(embeddedServerUrl(), "", "geofence_savepoint", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(11);
      placeFences(db, random, 0, 40);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      List<Location> all = new ArrayList<>();
      Map<String, Set<String>> inside = new HashMap<>();
      List<String> sentinels = new ArrayList<>();

      JobClient first = start(url, "slot_savepoint", inbox, 2, "rocksdb");
      sentinels.add(awaitStreaming(db, "slot_savepoint", inbox));
      all.addAll(moveObjects(db, inbox, random, 1, inside));
      awaitTriggers(db, expected.size());
      String savepoint = stopWithSavepoint(first);

      awaitClockPast(db, all);
      placeFences(db, random, 0, 6);
      deleteFences(db, 6, 14, inside);
      createFences(db, random, 6, 9);
      createFences(db, random, 40, 46);

      // Locations arrive while the restored job warms up: held, none lost, none evaluated early.
      JobClient second = start(url, "slot_savepoint", inbox, 3, "rocksdb", savepoint);
      all.addAll(moveObjects(db, inbox, random, 2, inside));
      sentinels.add(awaitStreaming(db, "slot_savepoint", inbox));
      awaitTriggers(db, expected.size());
      String again = stopWithSavepoint(second);

      awaitClockPast(db, all);
      placeFences(db, random, 20, 24);
      deleteFences(db, 24, 27, inside);
      JobClient third = start(url, "slot_savepoint", inbox, 1, "rocksdb", again);
      try {
        sentinels.add(awaitStreaming(db, "slot_savepoint", inbox));
        moveObjects(db, inbox, random, 3, inside);
        threeWayCheck(db, inbox, "rescaled", POINTS);
        assertTriggersAsUninterrupted(db);
        sentinels.forEach(s -> inside.put(s, Set.of("sentinel")));
        assertThat(presence(db)).isEqualTo(flatten(inside));
      } finally {
        third.cancel().get();
      }
      // Each subtask of each run hydrated; the restores caught up (the slot could not have moved:
      // its old reader had gone) and are labelled with the savepoint.
      List<Episode> episodes = episodes(db);
      assertThat(episodes).noneMatch(e -> e.startMode.equals("rebuild") || "gap".equals(e.gapCheck));
      assertThat(episodes).filteredOn(e -> e.hydratedAt != 0).allSatisfy(EndToEndFixture::assertHydrated);
      Map<String, Set<Integer>> hydratedSubtasks = episodes.stream().filter(e -> e.hydratedAt != 0).collect(
          java.util.stream.Collectors.groupingBy(e -> e.jobId, java.util.LinkedHashMap::new,
              java.util.stream.Collectors.mapping(e -> e.subtask, java.util.stream.Collectors.toSet())));
      assertThat(hydratedSubtasks.values()).containsExactly(Set.of(0, 1), Set.of(0, 1, 2), Set.of(0));
      assertThat(episodes).filteredOn(e -> e.attempt == 0 && e.restoredAt != 0).isNotEmpty()
          .allSatisfy(e -> assertThat(e.startMode).isEqualTo("savepoint"));
      assertOneRowPerSubtaskAndAttempt(episodes);
      // Both restores replayed the edits made while the job was down before they were ready.
      Map<String, Long> replayed = episodes.stream().filter(e -> e.startMode.equals("savepoint"))
          .collect(java.util.stream.Collectors.groupingBy(e -> e.jobId, java.util.stream.Collectors.summingLong(e -> e.editsReplayed)));
      assertThat(replayed).as("edits replayed per restore: %s", episodes).hasSize(2).allSatisfy((job, edits) -> assertThat(edits).isPositive());
    }
  }

  /**
   * The trap the gap check exists for: a savepoint older than the slot's confirmed position. The
   * slot would silently stream from its own position and skip the edits in between; the job finds
   * the gap, rebuilds from the source, and the stream's redelivery of edits the rebuild already
   * read is idempotent and counted.
   */
  @Test
  void olderSavepointAfterTheSlotMovedOnIsRebuiltFromTheSource() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_old_savepoint", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(13);
      placeFences(db, random, 0, 20);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient first = start(url, "slot_old", inbox, 2, "hashmap");
      awaitStreaming(db, "slot_old", inbox);
      awaitClockPast(db, moveObjects(db, inbox, random, 1, inside));
      awaitTriggers(db, expected.size());
      String older = first.triggerSavepoint(temp.resolve("savepoints").toUri().toString()).get();

      // Edits the older savepoint has not seen, then checkpoints until the slot confirms past them.
      deleteFences(db, 0, 5, inside);
      placeFences(db, random, 5, 10);
      long afterEdits = lsn(db, "SELECT pg_current_wal_lsn()");
      long deadline = System.currentTimeMillis() + 60_000;
      while (lsn(db, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'slot_old'") <= afterEdits) {
        assertThat(System.currentTimeMillis()).as("the slot never confirmed past the savepoint").isLessThan(deadline);
        Thread.sleep(200);
      }
      first.cancel().get();
      // Edits both the rebuild and the stream will deliver: the stream's copies are duplicates.
      placeFences(db, random, 10, 14);

      JobClient second = start(url, "slot_old", inbox, 2, "hashmap", older);
      try {
        awaitStreaming(db, "slot_old", inbox);
        moveObjects(db, inbox, random, 2, inside);
        threeWayCheck(db, inbox, "older", POINTS);
        assertTriggersAsUninterrupted(db);
        assertThat(metricSum(second, "edits_duplicate")).as("redelivered edits counted as duplicates").isGreaterThanOrEqualTo(4);
      } finally {
        second.cancel().get();
      }
      // A subtask whose buckets had edits in the skipped stretch rebuilt; one whose buckets had
      // none proved so by the versions and kept its restored fences.
      List<Episode> restored = episodes(db).stream().filter(e -> e.jobId.equals(second.getJobID().toString())).toList();
      assertThat(restored).filteredOn(e -> e.hydratedAt != 0).hasSizeGreaterThanOrEqualTo(2).allSatisfy(EndToEndFixture::assertHydrated);
      assertThat(restored).anySatisfy(e -> {
        assertThat(e.gapCheck).isEqualTo("gap");
        assertThat(e.gapReason).contains("skipped");
      });
    }
  }

  @Test
  void droppedSlotIsRebuiltFromTheSource() throws Exception {
    restoreAfterLosingTheSlot("geofence_dropped_slot", "slot_dropped", db -> {
      try (Statement s = db.createStatement()) {
        s.execute("SELECT pg_drop_replication_slot('slot_dropped')");
      }
    });
  }

  /** The slot's WAL removed under a small {@code max_slot_wal_keep_size}: it can never stream again. */
  @Test
  void slotWhoseWalWasLostIsRebuiltFromTheSource() throws Exception {
    restoreAfterLosingTheSlot("geofence_lost_wal", "slot_lost", db -> {
      try (Statement s = db.createStatement()) {
        s.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
        s.execute("SELECT pg_reload_conf()");
        s.execute("CREATE TABLE IF NOT EXISTS churn (x int)");
        try {
          long deadline = System.currentTimeMillis() + 60_000;
          while (!"lost".equals(walStatus(db, "slot_lost"))) {
            assertThat(System.currentTimeMillis()).as("the slot's WAL was never removed").isLessThan(deadline);
            s.execute("INSERT INTO churn SELECT generate_series(1, 20000)");
            s.execute("SELECT pg_switch_wal()");
            s.execute("CHECKPOINT");
          }
        } finally {
          s.execute("ALTER SYSTEM RESET max_slot_wal_keep_size");
          s.execute("SELECT pg_reload_conf()");
        }
      }
    });
  }

  interface SlotBreaker {
    void breakSlot(Connection db) throws Exception;
  }

  /**
   * The slot is broken while the job is down, and edits are made that it will never carry. Which
   * reason the gap check gives depends on whether the restarting CDC source has already created a
   * new slot (then it is confirmed past the restored position) or not.
   */
  private void restoreAfterLosingTheSlot(String database, String slot, SlotBreaker breaker) throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", database, false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(database.hashCode());
      placeFences(db, random, 0, 30);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient first = start(url, slot, inbox, 2, "hashmap");
      awaitStreaming(db, slot, inbox);
      List<Location> moved = moveObjects(db, inbox, random, 1, inside);
      awaitTriggers(db, expected.size());
      String savepoint = stopWithSavepoint(first);
      awaitClockPast(db, moved);
      placeFences(db, random, 0, 5);
      deleteFences(db, 5, 10, inside);
      breaker.breakSlot(db);
      // Edits the broken slot never carried: only the rebuild can know them.
      placeFences(db, random, 10, 15);
      deleteFences(db, 15, 18, inside);

      JobClient second = start(url, slot, inbox, 2, "hashmap", savepoint);
      try {
        awaitStreaming(db, slot, inbox);
        moveObjects(db, inbox, random, 2, inside);
        threeWayCheck(db, inbox, slot, POINTS);
        assertTriggersAsUninterrupted(db);
      } finally {
        second.cancel().get();
      }
      List<Episode> gaps = episodes(db).stream().filter(e -> "gap".equals(e.gapCheck)).toList();
      assertThat(gaps).as("a gap found by the restored subtasks").isNotEmpty()
          .allSatisfy(e -> assertThat(e.gapReason).containsAnyOf("does not exist", "wal_status = lost", "skipped"));
      assertThat(gaps).filteredOn(e -> e.hydratedAt != 0).hasSizeGreaterThanOrEqualTo(2).allSatisfy(EndToEndFixture::assertHydrated);
    }
  }

  /**
   * The fence database unreachable when a savepoint is restored (the network to it cut by a
   * proxy): the job keeps retrying (the CDC source fails over, the gap check retries), and no
   * location is evaluated; once the database is back the index catches up and the locations that
   * arrived meanwhile are evaluated, none lost.
   */
  @Test
  void databaseUnreachableAtRestoreHoldsLocationsUntilItIsBack() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_unreachable", false);
    try (TcpProxy proxy = new TcpProxy("localhost", postgres.getPort());
        Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      String viaProxy = "jdbc:postgresql://127.0.0.1:" + proxy.port() + "/geofence_unreachable";
      SplittableRandom random = new SplittableRandom(23);
      placeFences(db, random, 0, 30);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient first = start(url, viaProxy, "slot_unreachable", inbox, 2, "hashmap", null);
      awaitStreaming(db, "slot_unreachable", inbox);
      List<Location> moved = moveObjects(db, inbox, random, 1, inside);
      awaitTriggers(db, expected.size());
      String savepoint = stopWithSavepoint(first);
      awaitClockPast(db, moved);
      placeFences(db, random, 0, 5);
      deleteFences(db, 5, 8, inside);

      proxy.down();
      long triggersBefore = queryLong(db, "SELECT count(*) FROM geofence_triggers");
      JobClient second = start(url, viaProxy, "slot_unreachable", inbox, 2, "hashmap", savepoint);
      try {
        moveObjects(db, inbox, random, 2, inside);
        Thread.sleep(8_000);
        assertThat(queryLong(db, "SELECT count(*) FROM geofence_triggers"))
            .as("no location evaluated while the fence database is unreachable").isEqualTo(triggersBefore);
        proxy.up();
        awaitStreaming(db, "slot_unreachable", inbox);
        threeWayCheck(db, inbox, "unreachable", POINTS);
        assertTriggersAsUninterrupted(db);
      } finally {
        second.cancel().get();
      }
      // Flink failed the job over while the CDC source could not connect; each subtask ended
      // hydrated once the database was back.
      List<Episode> restored = episodes(db).stream().filter(e -> e.jobId.equals(second.getJobID().toString())).toList();
      assertThat(restored).filteredOn(e -> e.hydratedAt != 0).hasSizeGreaterThanOrEqualTo(2).allSatisfy(EndToEndFixture::assertHydrated);
    }
  }

  /**
   * A seq gap in the live stream (an edit's seq jumps: here, written with the versioning trigger
   * off) means the stream lost an edit: the subtask stops evaluating, rebuilds its buckets from the
   * source while the job runs, and goes on correct; the rebuild is an episode of its own.
   */
  @Test
  void seqGapInTheStreamIsRebuiltFromTheSource() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_seq_gap", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(17);
      placeFences(db, random, 0, 30);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient job = start(url, "slot_seq_gap", inbox, 2, "rocksdb");
      try {
        awaitStreaming(db, "slot_seq_gap", inbox);
        awaitClockPast(db, moveObjects(db, inbox, random, 1, inside));
        try (Statement s = db.createStatement()) {
          s.execute("BEGIN");
          s.execute("ALTER TABLE fences DISABLE TRIGGER fences_version");
          s.execute("UPDATE fences SET seq = seq + 3, geom = geom WHERE id = 'fence-3'");
          // PostgreSQL alters no table with deferred trigger events pending: the fold runs now.
          s.execute("SET CONSTRAINTS fences_fold IMMEDIATE");
          s.execute("ALTER TABLE fences ENABLE TRIGGER fences_version");
          s.execute("COMMIT");
        }
        placeFences(db, random, 3, 6);
        awaitStreaming(db, "slot_seq_gap", inbox);
        moveObjects(db, inbox, random, 2, inside);
        threeWayCheck(db, inbox, "seq-gap", POINTS);
        assertTriggersAsUninterrupted(db);
        assertThat(metricSum(job, "seq_gaps")).isEqualTo(1);
      } finally {
        job.cancel().get();
      }
      List<Episode> rebuilds = episodes(db).stream().filter(e -> e.startMode.equals("rebuild")).toList();
      assertThat(rebuilds).hasSize(1).allSatisfy(e -> {
        assertThat(e.gapReason).contains("seq gap on fence fence-3");
        assertHydrated(e);
      });
    }
  }

  /**
   * The TaskManager dies while a restored job is still catching up on thousands of edits made while
   * it was down: the job recovers from its last checkpoint or the savepoint, none lost, none twice.
   */
  @Test
  void taskFailureDuringCatchUpRecovers(@InjectMiniCluster MiniCluster cluster) throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_failover", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(19);
      placeFences(db, random, 0, 40);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient first = start(url, "slot_failover", inbox, 2, "rocksdb");
      awaitStreaming(db, "slot_failover", inbox);
      List<Location> moved = moveObjects(db, inbox, random, 1, inside);
      awaitTriggers(db, expected.size());
      String savepoint = stopWithSavepoint(first);
      awaitClockPast(db, moved);
      // Thousands of edits, each its own transaction: a catch-up that takes a while.
      try (PreparedStatement touch = db.prepareStatement("UPDATE fences SET geom = geom WHERE id = ?")) {
        for (int i = 0; i < 3000; i++) {
          touch.setString(1, "fence-" + random.nextInt(40));
          touch.execute();
        }
      }
      placeFences(db, random, 0, 10);

      JobClient second = start(url, "slot_failover", inbox, 2, "rocksdb", savepoint);
      try {
        moveObjects(db, inbox, random, 2, inside);
        long deadline = System.currentTimeMillis() + 60_000;
        while (queryLong(db, "SELECT count(*) FROM hydration_history WHERE start_mode = 'savepoint' AND hydrated_at IS NULL") == 0) {
          assertThat(System.currentTimeMillis()).as("the restored job never started hydrating").isLessThan(deadline);
          Thread.sleep(20);
        }
        cluster.terminateTaskManager(0).get();
        cluster.startTaskManager();
        awaitStreaming(db, "slot_failover", inbox);
        moveObjects(db, inbox, random, 3, inside);
        threeWayCheck(db, inbox, "failover", POINTS);
        assertTriggersAsUninterrupted(db);
      } finally {
        second.cancel().get();
      }
      List<Episode> episodes = episodes(db);
      assertThat(episodes).as("an episode cut short by the failure").anySatisfy(e -> assertThat(e.hydratedAt).isZero());
      assertThat(episodes).filteredOn(e -> e.attempt > 0).hasSizeGreaterThanOrEqualTo(2).allSatisfy(EndToEndFixture::assertHydrated);
      assertOneRowPerSubtaskAndAttempt(episodes);
    }
  }

  /** A replay rewrites an episode's row, never adds one: one row per job, start, subtask and attempt. */
  private static void assertOneRowPerSubtaskAndAttempt(List<Episode> episodes) {
    Map<String, Long> rows = episodes.stream().filter(e -> !e.startMode.equals("rebuild"))
        .collect(java.util.stream.Collectors.groupingBy(e -> e.jobId + " " + e.startMode + " #" + e.subtask + "/" + e.attempt, java.util.stream.Collectors.counting()));
    assertThat(rows).as("hydration rows per start, subtask and attempt").allSatisfy((key, count) -> assertThat(count).isEqualTo(1));
  }

  private static String walStatus(Connection db, String slot) throws Exception {
    try (Statement s = db.createStatement();
        java.sql.ResultSet r = s.executeQuery("SELECT wal_status FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
      return r.next() ? r.getString(1) : null;
    }
  }

  private static long lsn(Connection db, String sql) throws Exception {
    try (Statement s = db.createStatement(); java.sql.ResultSet r = s.executeQuery(sql)) {
      r.next();
      return Lsn.parse(r.getString(1));
    }
  }
}
