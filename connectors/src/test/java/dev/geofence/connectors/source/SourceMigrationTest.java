package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The source-of-truth migration on a real PostgreSQL: the seq, tombstone and fence_stats contract
 * of DESIGN section 3 against a model of it kept in Java, over random multi-row edits.
 */
class SourceMigrationTest {

  /** WKB of POLYGON ((0 0, 1 0, 1 1, 0 0)); the triggers never look at the geometry. */
  private static final String WKB =
      "\\x01030000000100000004000000000000000000000000000000000000000000000000"
          + "00f03f0000000000000000000000000000f03f000000000000f03f0000000000000000"
          + "0000000000000000";

  private static EmbeddedPostgres postgres;
  private Connection connection;

  @BeforeAll
  static void start() throws Exception {
    postgres = EmbeddedPostgres.builder().start();
  }

  @AfterAll
  static void stop() throws Exception {
    postgres.close();
  }

  @BeforeEach
  void freshSchema() throws Exception {
    connection = postgres.getPostgresDatabase().getConnection();
    try (Statement s = connection.createStatement()) {
      s.execute("DROP TABLE IF EXISTS fences, fence_tombstones, fence_stats, fence_bucket_stats, fence_heartbeat CASCADE; DROP PUBLICATION IF EXISTS geofence_publication");
    }
    Migrations.applySource(connection, GeometryColumn.WKB);
  }

  @AfterEach
  void closeConnection() throws Exception {
    // A failed test may leave a transaction open; its locks must not block the next test's set-up.
    if (!connection.getAutoCommit()) {
      connection.rollback();
    }
    connection.close();
  }

  @Test
  void everyBucketHasAFingerprintRowFromTheStart() throws Exception {
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats")).isEqualTo(4096);
    assertThat(queryLong("SELECT count(*) FROM fence_bucket_stats WHERE fence_count <> 0 OR checksum <> 0")).isZero();
  }

  @Test
  void applyingTwiceChangesNothing() throws Exception {
    exec("INSERT INTO fences (id, geom) VALUES ('a', '" + WKB + "')");
    Migrations.applySource(connection, GeometryColumn.WKB);
    assertThat(stats()).containsExactly(1L, FenceChecksum.hash("a", 1));
    assertThat(queryLong("SELECT fence_hash('fence-1', 1)")).isEqualTo(-9123025917352333894L);
  }

  @Test
  void randomEditsKeepSeqTombstonesAndStatsExact() throws Exception {
    SplittableRandom random = new SplittableRandom(3);
    Map<String, Long> live = new HashMap<>();
    Map<String, Long> tombstones = new HashMap<>();
    for (int step = 0; step < 400; step++) {
      boolean rollback = random.nextInt(8) == 0;
      Map<String, Long> liveBefore = new HashMap<>(live);
      Map<String, Long> tombstonesBefore = new HashMap<>(tombstones);
      connection.setAutoCommit(false);
      List<String> ids = pick(random, 1 + random.nextInt(30));
      switch (random.nextInt(4)) {
        case 0: // insert the ones that are not live, re-creating deleted ones
          ids.removeIf(live::containsKey);
          if (!ids.isEmpty()) {
            exec("INSERT INTO fences (id, seq, geom) SELECT x, 999, '" + WKB + "' FROM unnest(?::text[]) x", ids);
            ids.forEach(id -> live.put(id, tombstones.getOrDefault(id, 0L) + 1));
          }
          break;
        case 1: // update live ones, with a client-written seq that must be ignored
          exec("UPDATE fences SET seq = 0, name = 'n' WHERE id = ANY(?::text[])", ids);
          ids.stream().filter(live::containsKey).forEach(id -> live.merge(id, 1L, Long::sum));
          break;
        case 2:
          exec("DELETE FROM fences WHERE id = ANY(?::text[])", ids);
          ids.stream().filter(live::containsKey).forEach(id -> tombstones.put(id, live.remove(id) + 1));
          break;
        default: // upsert: inserts some, updates others, in one statement
          exec("INSERT INTO fences (id, geom) SELECT x, '" + WKB + "' FROM unnest(?::text[]) x "
              + "ON CONFLICT (id) DO UPDATE SET name = 'upserted'", ids);
          for (String id : ids) {
            if (live.containsKey(id)) {
              live.merge(id, 1L, Long::sum);
            } else {
              live.put(id, tombstones.getOrDefault(id, 0L) + 1);
            }
          }
      }
      if (rollback) {
        connection.rollback();
        live.clear();
        live.putAll(liveBefore);
        tombstones.clear();
        tombstones.putAll(tombstonesBefore);
      } else {
        connection.commit();
      }
      connection.setAutoCommit(true);
      assertThat(rows("SELECT id, seq FROM fences")).as("step %d", step).isEqualTo(live);
      assertThat(rows("SELECT id, seq FROM fence_tombstones")).as("step %d", step).isEqualTo(tombstones);
      FenceChecksum expected = new FenceChecksum();
      live.forEach(expected::add);
      assertThat(stats()).as("step %d", step).containsExactly(expected.count(), expected.checksum());
      Map<Integer, FenceChecksum> byBucket = new HashMap<>();
      live.forEach((id, seq) -> byBucket.computeIfAbsent(FenceBuckets.of(id), b -> new FenceChecksum()).add(id, seq));
      Map<Integer, List<Long>> expectedBuckets = new HashMap<>();
      byBucket.forEach((bucket, c) -> expectedBuckets.put(bucket, List.of(c.count(), c.checksum())));
      assertThat(bucketStats()).as("step %d", step).isEqualTo(expectedBuckets);
    }
    assertThat(live).hasSizeGreaterThan(20);
    assertThat(tombstones).hasSizeGreaterThan(20);
  }

  @Test
  void bulkLoadUpdatesTheStatsRowOnce() throws Exception {
    connection.setAutoCommit(false);
    exec("INSERT INTO fences (id, geom) SELECT 'bulk-' || g, '" + WKB + "' FROM generate_series(1, 50000) g");
    exec("UPDATE fences SET name = 'renamed' WHERE id LIKE 'bulk-1%'");
    // Counts of this transaction so far, visible at once (unlike the cumulative statistics).
    assertThat(queryLong("SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'fence_stats'"))
        .isEqualTo(2);
    // Per statement each of the 4096 bucket rows is written at most once (an upsert counts as an
    // insert attempt and an update): far below one write per fence row (55,000 here).
    assertThat(queryLong("SELECT n_tup_ins + n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'fence_bucket_stats'"))
        .isLessThanOrEqualTo(2 * 4096 + 4096);
    connection.commit();
    connection.setAutoCommit(true);
    assertThat(stats())
        .containsExactly(
            queryLong("SELECT count(*) FROM fences"),
            queryLong("SELECT bit_xor(fence_hash(id, seq)) FROM fences"));
  }

  @Test
  void truncateAndIdChangesAreRefused() throws Exception {
    exec("INSERT INTO fences (id, geom) VALUES ('a', '" + WKB + "')");
    assertThatThrownBy(() -> exec("TRUNCATE fences")).hasMessageContaining("use DELETE FROM fences");
    assertThatThrownBy(() -> exec("UPDATE fences SET id = 'b' WHERE id = 'a'"))
        .hasMessageContaining("fence id a cannot change to b");
    assertThat(stats()).containsExactly(1L, FenceChecksum.hash("a", 1));
  }

  private static List<String> pick(SplittableRandom random, int n) {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String id = "fence-" + random.nextInt(150);
      if (!ids.contains(id)) {
        ids.add(id);
      }
    }
    return ids;
  }

  private void exec(String sql, List<String> ids) throws SQLException {
    try (PreparedStatement s = connection.prepareStatement(sql)) {
      s.setArray(1, connection.createArrayOf("text", ids.toArray()));
      s.execute();
    }
  }

  private void exec(String sql) throws SQLException {
    try (Statement s = connection.createStatement()) {
      s.execute(sql);
    }
  }

  private long queryLong(String sql) throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  private Map<String, Long> rows(String sql) throws SQLException {
    Map<String, Long> rows = new HashMap<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        rows.put(r.getString(1), r.getLong(2));
      }
    }
    return rows;
  }

  /** The bucket fingerprints, leaving out buckets that have emptied (count and checksum 0). */
  private Map<Integer, List<Long>> bucketStats() throws SQLException {
    Map<Integer, List<Long>> rows = new HashMap<>();
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT bucket, fence_count, checksum FROM fence_bucket_stats WHERE fence_count <> 0 OR checksum <> 0")) {
      while (r.next()) {
        rows.put(r.getInt(1), List.of(r.getLong(2), r.getLong(3)));
      }
    }
    return rows;
  }

  private List<Long> stats() throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT fence_count, checksum FROM fence_stats")) {
      assertThat(r.next()).isTrue();
      List<Long> values = List.of(r.getLong(1), r.getLong(2));
      assertThat(r.next()).as("exactly one stats row").isFalse();
      return values;
    }
  }
}
