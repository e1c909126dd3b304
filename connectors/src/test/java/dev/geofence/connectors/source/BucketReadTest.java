package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.io.WKBReader;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

/**
 * The rebuild's read on a real PostgreSQL: the subtasks of a job together read every fence,
 * tombstone and bucket fingerprint exactly once, each subtask's fingerprints agree with the fences
 * it read, and a PostGIS geometry comes back as the EWKB the CDC source would deliver.
 */
class BucketReadTest {

  private static final String SQUARE = "POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))";

  @Test
  void subtasksTogetherReadEachFenceOnceAndTheirFingerprintsMatch() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      Map<String, Long> live = writeHistory(db, new WKBWriter().write(new WKTReader().read(SQUARE)), "?");
      Map<String, Long> tombstones = tombstones(db);
      int maxParallelism = 128;
      int[][] ranges = {{0, 42}, {43, 85}, {86, 127}};
      Map<String, Long> readLive = new HashMap<>();
      Map<String, Long> readDeleted = new HashMap<>();
      Set<Integer> buckets = new HashSet<>();
      for (int[] range : ranges) {
        Map<String, Long> mine = new HashMap<>();
        Map<Integer, long[]> fingerprints = new HashMap<>();
        BucketRead.Result result = BucketRead.read(db, FenceTableColumns.defaults(), maxParallelism, range[0], range[1], change -> {
          if (change.kind == FenceChange.Kind.BUCKET_STATS) {
            assertThat(buckets.add(change.bucket)).as("bucket %d read once", change.bucket).isTrue();
            fingerprints.put(change.bucket, new long[] {change.fenceCount, change.checksum});
            return;
          }
          int group = FenceBuckets.of(change.fenceId) % maxParallelism;
          assertThat(group).as("fence %s belongs to the range", change.fenceId).isBetween(range[0], range[1]);
          Map<String, Long> target = change.delete ? readDeleted : readLive;
          assertThat(target.put(change.fenceId, change.seq)).as("fence %s read once", change.fenceId).isNull();
          if (!change.delete) {
            assertThat(change.geometryBytes).isNotNull();
            mine.put(change.fenceId, change.seq);
          }
        });
        assertThat(result.lsn()).isPositive();
        for (Map.Entry<Integer, long[]> bucket : fingerprints.entrySet()) {
          FenceChecksum expected = new FenceChecksum();
          mine.forEach((id, seq) -> {
            if (FenceBuckets.of(id) == bucket.getKey()) {
              expected.add(id, seq);
            }
          });
          assertThat(bucket.getValue()).as("bucket %d", bucket.getKey()).containsExactly(expected.count(), expected.checksum());
        }
      }
      assertThat(readLive).isEqualTo(live);
      assertThat(readDeleted).isEqualTo(tombstones);
      assertThat(buckets).hasSize(FenceBuckets.COUNT);
    }
  }

  /**
   * A read whose consumer throws ends with that exception, not with the connection's complaint about
   * being reset inside the open transaction, and leaves the connection usable, in autocommit as before.
   */
  @Test
  void aConsumersExceptionEndsTheReadAsItselfAndTheConnectionStaysUsable() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      writeHistory(db, new WKBWriter().write(new WKTReader().read(SQUARE)), "?");
      IllegalStateException thrown = new IllegalStateException("the consumer's own");
      assertThat(org.assertj.core.api.Assertions.catchThrowable(() -> BucketRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, change -> {
        throw thrown;
      }))).isSameAs(thrown);
      assertThat(db.getAutoCommit()).isTrue();
      assertThat(db.isReadOnly()).isFalse();
      List<FenceChange> again = new ArrayList<>();
      BucketRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, again::add);
      assertThat(again).isNotEmpty();
    }
  }

  /** Needs a PostGIS server: CI starts one and sets this variable; without it the test fails. */
  @Test
  void postgisGeometryIsReadAsEwkb() throws Exception {
    String url = System.getenv("GEOFENCE_POSTGIS_URL");
    assertThat(url).as("GEOFENCE_POSTGIS_URL must name a PostGIS server (.ci/run starts one)").isNotNull();
    try (Connection admin = DriverManager.getConnection(url, "postgres", "postgres"); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS bucket_read WITH (FORCE)");
      s.execute("CREATE DATABASE bucket_read");
    }
    try (Connection db = DriverManager.getConnection(url.substring(0, url.lastIndexOf('/') + 1) + "bucket_read", "postgres", "postgres")) {
      Migrations.applySource(db, GeometryColumn.POSTGIS);
      Geometry square = new WKTReader().read(SQUARE);
      Map<String, Long> live = writeHistory(db, new WKBWriter().write(square), "ST_GeomFromWKB(?, 4326)");
      List<Geometry> read = new ArrayList<>();
      BucketRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, change -> {
        if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
          try {
            read.add(new WKBReader().read(change.geometryBytes));
          } catch (Exception e) {
            throw new AssertionError(e);
          }
        }
      });
      assertThat(read).hasSize(live.size()).allSatisfy(g -> {
        assertThat(g.getSRID()).isEqualTo(4326);
        assertThat(g.equalsExact(square)).isTrue();
      });
    }
  }

  /** Inserts, updates and deletes: the live fences with their seqs. */
  private static Map<String, Long> writeHistory(Connection db, byte[] wkb, String parameter) throws Exception {
    SplittableRandom random = new SplittableRandom(5);
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, " + parameter + ")")) {
      for (int i = 0; i < 3000; i++) {
        insert.setString(1, "fence-" + i);
        insert.setBytes(2, wkb);
        insert.addBatch();
      }
      insert.executeBatch();
    }
    try (Statement s = db.createStatement()) {
      for (int i = 0; i < 300; i++) {
        s.execute("UPDATE fences SET geom = geom WHERE id = 'fence-" + random.nextInt(3000) + "'");
      }
      s.execute("DELETE FROM fences WHERE id LIKE 'fence-1%'");
    }
    Map<String, Long> live = new HashMap<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT id, seq FROM fences")) {
      while (r.next()) {
        live.put(r.getString(1), r.getLong(2));
      }
    }
    return live;
  }

  private static Map<String, Long> tombstones(Connection db) throws Exception {
    Map<String, Long> deleted = new HashMap<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT id, seq FROM fence_tombstones")) {
      while (r.next()) {
        deleted.put(r.getString(1), r.getLong(2));
      }
    }
    return deleted;
  }
}
