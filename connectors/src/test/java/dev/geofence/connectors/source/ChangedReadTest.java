package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

/**
 * The catch-up's read of what changed on a real PostgreSQL, against brute force over generated
 * histories: for each of three subtasks' key groups, what the subtask held before a round of
 * creates, reshapes, deletes and re-creations, merged by seq with what the read hands out, equals
 * the source's live fences of its buckets; the read reads whole exactly the fences whose seq
 * differs, and its bucket rows agree with the fences it leaves the subtask holding.
 */
class ChangedReadTest {

  private static final int MAX_PARALLELISM = 128;
  private static final int[][] RANGES = {{0, 42}, {43, 85}, {86, 127}};

  @Test
  void heldFencesMergedWithTheReadEqualTheSourceOverGeneratedHistories() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
      SplittableRandom random = new SplittableRandom(37);
      edit(db, random, square, 1_500, 0);
      for (int round = 0; round < 8; round++) {
        Map<String, Long> source = live(db);
        Map<Integer, Map<String, Long>> held = new HashMap<>();
        for (int r = 0; r < RANGES.length; r++) {
          held.put(r, inRange(source, RANGES[r]));
        }
        edit(db, random, square, 40 + random.nextInt(200), 1_500 + round * 100);
        source = live(db);
        for (int r = 0; r < RANGES.length; r++) {
          int[] range = RANGES[r];
          Map<String, Long> before = held.get(r);
          Map<String, Long> expected = inRange(source, range);
          Set<String> changed = new HashSet<>();
          expected.forEach((id, seq) -> {
            if (!seq.equals(before.get(id))) {
              changed.add(id);
            }
          });
          Map<String, Long> holding = new HashMap<>(before);
          Map<String, Long> deleted = new HashMap<>();
          Set<String> readWhole = new HashSet<>();
          Map<Integer, long[]> fingerprints = new HashMap<>();
          ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), MAX_PARALLELISM, range[0], range[1],
              new HashMap<>(before), change -> {
                if (change.kind == FenceChange.Kind.BUCKET_STATS) {
                  fingerprints.put(change.bucket, new long[] {change.fenceCount, change.checksum});
                } else if (change.delete) {
                  if (holding.getOrDefault(change.fenceId, 0L) < change.seq) {
                    holding.remove(change.fenceId);
                    deleted.put(change.fenceId, change.seq);
                  }
                } else {
                  assertThat(change.geometryBytes).isNotNull();
                  assertThat(readWhole.add(change.fenceId)).as("%s read once", change.fenceId).isTrue();
                  long current = Math.max(holding.getOrDefault(change.fenceId, 0L), deleted.getOrDefault(change.fenceId, 0L));
                  if (change.seq > current) {
                    holding.put(change.fenceId, change.seq);
                    deleted.remove(change.fenceId);
                  }
                }
              });
          result.missing().forEach(holding::remove);
          assertThat(holding).as("round %d, key groups %d-%d", round, range[0], range[1]).isEqualTo(expected);
          assertThat(readWhole).as("read whole: exactly the fences whose seq differs").isEqualTo(changed);
          assertThat(result.changed()).isEqualTo(changed.size());
          assertThat(result.keys()).isEqualTo(expected.size());
          assertThat(result.missing()).as("every held fence the source lacks has a tombstone").isEmpty();
          for (Map.Entry<Integer, long[]> bucket : fingerprints.entrySet()) {
            FenceChecksum sum = new FenceChecksum();
            holding.forEach((id, seq) -> {
              if (FenceBuckets.of(id) == bucket.getKey()) {
                sum.add(id, seq);
              }
            });
            assertThat(bucket.getValue()).as("bucket %d", bucket.getKey()).containsExactly(sum.count(), sum.checksum());
          }
          assertThat(result.readTime()).isGreaterThan(System.currentTimeMillis() - 60_000);
        }
      }
    }
  }

  /** A fence the source lost without a tombstone (rows deleted by hand) is reported missing, for the subtask to delete. */
  @Test
  void aHeldFenceWithNoRowAtAllIsMissing() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      Map<String, Long> held = new HashMap<>(Map.of("ghost", 4L));
      ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, held, change -> {});
      assertThat(result.missing()).containsExactly("ghost");
      assertThat(result.changed()).isZero();
    }
  }

  /** {@code n} random edits: creates of new ids from {@code firstNew}, reshapes, deletes, re-creations of deleted ids. */
  private static void edit(Connection db, SplittableRandom random, byte[] wkb, int n, int firstNew) throws Exception {
    try (PreparedStatement insert = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, ?) ON CONFLICT (id) DO NOTHING");
        PreparedStatement reshape = db.prepareStatement("UPDATE fences SET geom = geom WHERE id = ?");
        PreparedStatement delete = db.prepareStatement("DELETE FROM fences WHERE id = ?")) {
      for (int i = 0; i < n; i++) {
        int kind = firstNew == 0 ? 0 : random.nextInt(4);
        String id = "fence-" + (kind == 0 ? firstNew + i : random.nextInt(firstNew));
        PreparedStatement s = kind == 1 ? reshape : kind == 2 ? delete : insert;
        s.setString(1, id);
        if (s == insert) {
          s.setBytes(2, wkb);
        }
        s.execute();
      }
    }
  }

  private static Map<String, Long> live(Connection db) throws Exception {
    Map<String, Long> live = new HashMap<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT id, seq FROM fences")) {
      while (r.next()) {
        live.put(r.getString(1), r.getLong(2));
      }
    }
    return live;
  }

  private static Map<String, Long> inRange(Map<String, Long> fences, int[] range) {
    Map<String, Long> in = new HashMap<>();
    fences.forEach((id, seq) -> {
      if (FenceBuckets.inKeyGroups(FenceBuckets.of(id), MAX_PARALLELISM, range[0], range[1])) {
        in.put(id, seq);
      }
    });
    return in;
  }
}
