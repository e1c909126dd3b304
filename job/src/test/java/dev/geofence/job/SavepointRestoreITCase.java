package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
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

  @Test
  void restoreCatchesUpOnEditsMadeWhileTheJobWasDown() throws Exception {
    String url = createDatabase(embeddedServerUrl(), "", "geofence_savepoint", false);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", "")) {
      SplittableRandom random = new SplittableRandom(11);
      for (int i = 0; i < 40; i++) {
        upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
      }
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
      reshapeFences(db, random, 0, 6);
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
