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
    String database = "geofence_savepoint";
    try (Connection admin = postgres.getPostgresDatabase().getConnection(); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + database);
    }
    String url = "jdbc:postgresql://localhost:" + postgres.getPort() + "/" + database;
    try (Connection db = postgres.getDatabase("postgres", database).getConnection()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      Migrations.applyOutputs(db);
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
      for (int i = 0; i < 6; i++) {
        upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
      }
      for (int i = 6; i < 14; i++) {
        for (Map.Entry<String, Set<String>> e : inside.entrySet()) {
          if (e.getValue().remove("fence-" + i)) {
            expected.add(e.getKey() + " fence-" + i + " EXIT delete");
          }
        }
        deleteFence(db, "fence-" + i);
      }
      for (int i = 6; i < 9; i++) {
        upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble()));
      }
      for (int i = 40; i < 46; i++) {
        upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble()));
      }

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
