package dev.geofence.state.checksum;

import static org.assertj.core.api.Assertions.assertThat;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class FenceChecksumTest {

  /** The SQL form of h(id, seq) given by the source-of-truth contract. */
  private static final String H = "('x' || substr(md5(id || ':' || seq::text), 1, 16))::bit(64)::bigint";

  /** The SQL form of the bucket, as the migration's fence_bucket(id) computes it. */
  private static final String BUCKET = "('x' || substr(md5(id), 1, 8))::bit(32)::int & 4095";

  @Test
  void hashHasTheContractsCheckValue() {
    assertThat(FenceChecksum.hash("fence-1", 1)).isEqualTo(-9123025917352333894L);
  }

  @Test
  void accumulatorIsOrderIndependentAndUndoesItself() {
    FenceChecksum a = new FenceChecksum();
    a.add("x", 1);
    a.add("y", 7);
    FenceChecksum b = new FenceChecksum();
    b.add("y", 7);
    b.add("x", 1);
    assertThat(a.matches(b.count(), b.checksum())).isTrue();
    a.remove("y", 7);
    a.remove("x", 1);
    assertThat(a.matches(0, 0)).isTrue();
  }

  @Test
  void hashBucketAndXorAggregateEqualWhatPostgresComputes() throws Exception {
    SplittableRandom random = new SplittableRandom(5);
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start();
        Connection c = pg.getPostgresDatabase().getConnection()) {
      try (Statement s = c.createStatement()) {
        s.execute("CREATE TEMP TABLE f (id text PRIMARY KEY, seq bigint NOT NULL)");
      }
      FenceChecksum expected = new FenceChecksum();
      try (PreparedStatement insert = c.prepareStatement("INSERT INTO f VALUES (?, ?)")) {
        for (int i = 0; i < 5_000; i++) {
          // Plain, unicode and quote-bearing ids; seqs from 1 to beyond 2^31.
          String id = switch (i % 4) {
            case 0 -> "fence-" + i;
            case 1 -> "zone-ü-東京-" + random.nextInt();
            case 2 -> "o'brien:" + i;
            default -> Long.toHexString(random.nextLong());
          };
          long seq = i % 10 == 0 ? 3_000_000_000L + i : 1 + random.nextInt(1000);
          insert.setString(1, id);
          insert.setLong(2, seq);
          insert.addBatch();
          expected.add(id, seq);
        }
        insert.executeBatch();
      }
      Map<String, Integer> buckets = new HashMap<>();
      try (Statement s = c.createStatement();
          ResultSet rows = s.executeQuery("SELECT id, seq, " + H + ", " + BUCKET + " FROM f")) {
        int n = 0;
        while (rows.next()) {
          assertThat(FenceChecksum.hash(rows.getString(1), rows.getLong(2)))
              .as("h(%s, %d)", rows.getString(1), rows.getLong(2))
              .isEqualTo(rows.getLong(3));
          assertThat(FenceBuckets.of(rows.getString(1))).as("bucket of %s", rows.getString(1)).isEqualTo(rows.getInt(4));
          buckets.put(rows.getString(1), rows.getInt(4));
          n++;
        }
        assertThat(n).isEqualTo(5_000);
      }
      // Asked again, in another order and as other String instances: the buckets a thread keeps of
      // its last ids (5,000 ids share 256 places) answer the same.
      List<String> ids = new ArrayList<>(buckets.keySet());
      for (int round = 0; round < 2; round++) {
        Collections.shuffle(ids, new Random(round));
        for (String id : ids) {
          assertThat(FenceBuckets.of(new String(id.toCharArray()))).as("bucket of %s again", id).isEqualTo(buckets.get(id));
          assertThat(FenceBuckets.of(id)).as("bucket of %s at once again", id).isEqualTo(buckets.get(id));
        }
      }
      try (Statement s = c.createStatement();
          ResultSet row = s.executeQuery("SELECT count(*), bit_xor(" + H + ") FROM f")) {
        row.next();
        assertThat(expected.matches(row.getLong(1), row.getLong(2))).isTrue();
      }
    }
  }
}
