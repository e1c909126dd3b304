package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.connectors.source.Migrations;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * A real savepoint: the job is stopped with one, fences are inserted, reshaped, deleted and
 * re-created while it is down, and it is restored from the savepoint at another parallelism. The
 * triggers must equal those of an uninterrupted run (the oracle): none lost, none duplicated, the
 * edits made while down caught up from the replication slot, deleted fences' objects EXITed.
 */
class SavepointRestoreITCase extends EndToEndFixture {

  /**
   * The trap the gap check exists for: a savepoint older than the slot's confirmed position. The
   * slot would silently stream from its own position and skip the edits in between, so the
   * restored job must find the gap and evaluate no location.
   */
  @Test
  void olderSavepointAfterTheSlotMovedOnIsAGapAndNothingIsEvaluated() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_old_savepoint", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(13);
      placeFences(db, random, 0, 20);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      Map<String, Set<String>> inside = new HashMap<>();
      JobClient first = start(url, "slot_old", inbox, 2, "hashmap");
      awaitStreaming(db, "slot_old", inbox);
      moveObjects(db, inbox, random, 1, inside);
      awaitTriggers(db, expected.size());
      String older = first.triggerSavepoint(temp.resolve("savepoints").toUri().toString()).get();
      long afterSavepoint = lsn(db, "SELECT pg_current_wal_lsn()");

      // Edits the older savepoint has not seen, then checkpoints until the slot confirms past it.
      deleteFences(db, 0, 5, inside);
      placeFences(db, random, 5, 10);
      long deadline = System.currentTimeMillis() + 60_000;
      while (lsn(db, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'slot_old'") <= afterSavepoint) {
        assertThat(System.currentTimeMillis()).as("the slot never confirmed past the savepoint").isLessThan(deadline);
        Thread.sleep(200);
      }
      first.cancel().get();
      long triggersBefore = queryLong(db, "SELECT count(*) FROM geofence_triggers");

      JobClient second = start(url, "slot_old", inbox, 2, "hashmap", older);
      try {
        long t = queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") + 50;
        writeLines(inbox, List.of(LocationJson.format(new Location("after-gap", t, 100.5, 50.5, null))));
        moveObjects(db, inbox, random, 2, inside);
        Thread.sleep(8_000);
        assertThat(queryLong(db, "SELECT count(*) FROM geofence_triggers"))
            .as("no location evaluated against fences restored across a gap").isEqualTo(triggersBefore);
      } finally {
        second.cancel().get();
      }
    }
  }

  private static long lsn(Connection db, String sql) throws Exception {
    try (Statement s = db.createStatement(); java.sql.ResultSet r = s.executeQuery(sql)) {
      r.next();
      return Lsn.parse(r.getString(1));
    }
  }

  @Test
  void restoreCatchesUpOnEditsMadeWhileTheJobWasDown() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_savepoint", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(11);
      placeFences(db, random, 0, 40);
      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      List<Location> all = new ArrayList<>();
      Map<String, Set<String>> inside = new HashMap<>();

      JobClient first = start(url, "slot_savepoint", inbox, 2, "rocksdb");
      String sentinel1 = awaitStreaming(db, "slot_savepoint", inbox);
      all.addAll(moveObjects(db, inbox, random, 1, inside));
      awaitTriggers(db, expected.size());
      String savepoint = first.stopWithSavepoint(false, temp.resolve("savepoints").toUri().toString()).get();
      assertThat(Path.of(java.net.URI.create(savepoint))).exists();

      // While the job is down: reshape, delete (objects inside must EXIT once it is back), add,
      // and delete-then-re-create.
      awaitClockPast(db, all);
      placeFences(db, random, 0, 6);
      deleteFences(db, 6, 14, inside);
      createFences(db, random, 6, 9);
      createFences(db, random, 40, 46);

      JobClient second = start(url, "slot_savepoint", inbox, 3, "rocksdb", savepoint);
      try {
        String sentinel2 = awaitStreaming(db, "slot_savepoint", inbox);
        all.addAll(moveObjects(db, inbox, random, 2, inside));
        Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
        assertThat(queryLong(db, "SELECT count(*) FROM geofence_triggers")).as("no trigger written twice").isEqualTo(expected.size());
        inside.put(sentinel1, Set.of("sentinel"));
        inside.put(sentinel2, Set.of("sentinel"));
        assertThat(presence(db)).isEqualTo(flatten(inside));
      } finally {
        second.cancel().get();
      }
    }
  }
}
