package dev.geofence.job.operator;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.state.checksum.FenceBuckets;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.SerializedCompositeKeyBuilder;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

/**
 * A fresh start's or a rebuild's read hands the operator its fences in the order of the keys
 * that the fence maps ({@link FenceIndexState#fencesStateDescriptor()}) have on RocksDB, so that
 * the load writes files that do not overlap (docs/performance/journal.md, "2026-12-03: a load in
 * RocksDB's key order"). The keys are Flink's own bytes, built as RocksDB's map state builds them
 * (key group, the job's key serializer, the namespace, the map key), and RocksDB orders them as
 * unsigned bytes. The table has ids of lengths from 3 to 300 characters (a length over 126 takes
 * two bytes), characters beyond ASCII (each takes two or three), and fences deleted and re-created.
 */
class LoadOrderTest {

  private static final int MAX_PARALLELISM = 128;

  @Test
  void everySubtasksReadComesInTheOrderOfItsFenceMapKeys() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, Migrations.GeometryColumn.WKB);
      Set<String> recreated = writeFences(db);
      TypeSerializer<FenceKey> keys = TypeInformation.of(FenceKey.class).createSerializer(new SerializerConfigImpl());
      SerializedCompositeKeyBuilder<FenceKey> keyBuilder = new SerializedCompositeKeyBuilder<>(
          keys, CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(MAX_PARALLELISM), 64);
      for (int parallelism : new int[] {1, 2, 3}) {
        Set<String> readBoth = new HashSet<>();
        int rows = 0;
        for (int subtask = 0; subtask < parallelism; subtask++) {
          KeyGroupRange range = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(MAX_PARALLELISM, parallelism, subtask);
          List<FenceChange> read = new ArrayList<>();
          BucketRead.read(db, FenceTableColumns.defaults(), MAX_PARALLELISM, range.getStartKeyGroup(), range.getEndKeyGroup(), change -> {
            if (change.kind == FenceChange.Kind.FENCE) {
              read.add(change);
            }
          });
          byte[] previous = null;
          FenceChange before = null;
          for (FenceChange change : read) {
            int bucket = FenceBuckets.of(change.fenceId);
            keyBuilder.setKeyAndKeyGroup(FenceKey.ofBucket(bucket), FenceBuckets.keyGroup(bucket, MAX_PARALLELISM));
            byte[] key = keyBuilder.buildCompositeKeyNamesSpaceUserKey(
                VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE, change.fenceId, StringSerializer.INSTANCE);
            if (previous != null) {
              assertThat(Arrays.compareUnsigned(previous, key))
                  .as("parallelism %d, subtask %d: %s after %s", parallelism, subtask, change.fenceId, before.fenceId)
                  .isLessThanOrEqualTo(0);
              if (Arrays.equals(previous, key)) {
                assertThat(before.delete && !change.delete).as("%s: its tombstone, then its re-created row", change.fenceId).isTrue();
                readBoth.add(change.fenceId);
              }
            }
            previous = key;
            before = change;
          }
          rows += read.size();
        }
        assertThat(readBoth).as("parallelism %d: fences re-created after a delete", parallelism).isEqualTo(recreated);
        assertThat(rows).as("parallelism %d: rows", parallelism).isEqualTo(count(db, "fences") + count(db, "fence_tombstones"));
      }
    }
  }

  /** Fences of many id shapes, some deleted and some of those re-created: the re-created ids. */
  private static Set<String> writeFences(Connection db) throws Exception {
    byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
    SplittableRandom random = new SplittableRandom(11);
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 4000; i++) {
      switch (i % 5) {
        case 0 -> ids.add("f-" + i);
        case 1 -> ids.add(Long.toHexString(random.nextLong()) + Long.toHexString(random.nextLong()));
        case 2 -> ids.add("zone/ä-" + i);
        case 3 -> ids.add("区域-" + i + "-\u00ff\u0100");
        default -> ids.add("L".repeat(120 + random.nextInt(180)) + i);
      }
    }
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (String id : ids) {
        insert.setString(1, id);
        insert.setBytes(2, square);
        insert.addBatch();
      }
      insert.executeBatch();
    }
    Set<String> recreated = new HashSet<>();
    try (PreparedStatement delete = db.prepareStatement("DELETE FROM fences WHERE id = ?");
        PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?)")) {
      for (int i = 0; i < ids.size(); i += 7) {
        delete.setString(1, ids.get(i));
        delete.execute();
        if (i % 2 == 0) {
          insert.setString(1, ids.get(i));
          insert.setBytes(2, square);
          insert.execute();
          recreated.add(ids.get(i));
        }
      }
    }
    return recreated;
  }

  private static int count(Connection db, String table) throws Exception {
    try (Statement s = db.createStatement(); var r = s.executeQuery("SELECT count(*) FROM " + table)) {
      r.next();
      return r.getInt(1);
    }
  }
}
