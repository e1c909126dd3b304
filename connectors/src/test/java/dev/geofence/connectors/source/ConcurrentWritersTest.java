package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The source contract under concurrent writers, on the PostGIS server CI starts ({@code
 * GEOFENCE_POSTGIS_URL}), written by Debian's {@code pgbench}: 8 clients for 10 s of the
 * multi-statement transactions of {@code bench/run source} (two updates, a delete and a re-create
 * each) over 100,000 fences. No transaction may fail on a deadlock (pgbench's count and the
 * server's), every bucket's fingerprint must equal a recomputation from the table, and the change
 * stream (a {@code test_decoding} slot over the whole run) must carry what the job's readiness and
 * gap check rely on: each bucket row one version past the last, with the count and checksum of the
 * fences streamed before it. Both prerequisites are checked: the test fails without them.
 */
class ConcurrentWritersTest {

  private static final Path PGBENCH = Path.of("/usr/lib/postgresql/15/bin/pgbench");
  private static final Path WORKLOAD = Path.of("../bench/pgbench/multi-statement.sql");
  private static final String DATABASE = "concurrent_writers";
  private static final String SLOT = "concurrent_writers_stream";
  private static final int FENCES = 100_000;
  /** test_decoding's text for a fence row or a tombstone: its id and seq. */
  private static final Pattern FENCE = Pattern.compile("id\\[text]:'([^']*)' seq\\[bigint]:(-?\\d+)");
  private static final Pattern BUCKET = Pattern.compile(
      "bucket\\[integer]:(\\d+) fence_count\\[bigint]:(-?\\d+) checksum\\[bigint]:(-?\\d+) version\\[bigint]:(\\d+)");

  @Test
  void eightWritersNeverDeadlockAndTheFingerprintsStayExactInTheTableAndTheStream() throws Exception {
    String url = System.getenv("GEOFENCE_POSTGIS_URL");
    assertThat(url).as("GEOFENCE_POSTGIS_URL must name a PostGIS server (.ci/run starts one)").isNotNull();
    assertThat(Files.isExecutable(PGBENCH)).as("%s (Debian's postgresql-15, which .ci/postgis.sh installs)", PGBENCH).isTrue();
    URI server = URI.create(url.substring("jdbc:".length()));
    String databaseUrl = url.substring(0, url.lastIndexOf('/') + 1) + DATABASE;
    try (Connection admin = DriverManager.getConnection(url, "postgres", "postgres"); Statement s = admin.createStatement()) {
      s.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + SLOT + "'");
      s.execute("DROP DATABASE IF EXISTS " + DATABASE + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + DATABASE);
    }
    try (Connection db = DriverManager.getConnection(databaseUrl, "postgres", "postgres"); Statement s = db.createStatement()) {
      Migrations.applySource(db, GeometryColumn.POSTGIS);
      s.execute("INSERT INTO fences (id, geom) SELECT 'f-' || g, ST_MakeEnvelope(g % 300 * 0.1, g / 300 * 0.1,"
          + " g % 300 * 0.1 + 0.01, g / 300 * 0.1 + 0.01, 4326) FROM generate_series(1, " + FENCES + ") g");
      // The stream from here on; nothing writes until pgbench does, so the tables read next are
      // exactly where it starts.
      s.execute("SELECT pg_create_logical_replication_slot('" + SLOT + "', 'test_decoding')");
      Buckets streamed = Buckets.read(s);
      Map<String, Long> held = new HashMap<>();
      try (ResultSet r = s.executeQuery("SELECT id, seq FROM fences")) {
        while (r.next()) {
          held.put(r.getString(1), r.getLong(2));
        }
      }
      long deadlocksBefore = deadlocks(s);

      ProcessBuilder run = new ProcessBuilder(PGBENCH.toString(), "-h", server.getHost(), "-p", Integer.toString(server.getPort()),
          "-U", "postgres", "-n", "-c", "8", "-j", "2", "-T", "10", "-D", "fences=" + FENCES, "-f", WORKLOAD.toString(),
          "--failures-detailed", DATABASE)
          .redirectErrorStream(true);
      run.environment().put("PGPASSWORD", "postgres");
      // A slot is read up to the WAL flushed: CI's server commits asynchronously, which would leave
      // the last transactions' commits out of the stream read below while the tables hold them.
      run.environment().put("PGOPTIONS", "-c synchronous_commit=on");
      Process pgbench = run.start();
      pgbench.getOutputStream().close();
      String output = new String(pgbench.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(pgbench.waitFor(60, TimeUnit.SECONDS)).as("pgbench finished").isTrue();
      assertThat(pgbench.exitValue()).as("pgbench's exit status:%n%s", output).isZero();
      assertThat(number(output, "number of transactions actually processed: (\\d+)"))
          .as("transactions: a run of real concurrent work%n%s", output).isGreaterThan(2000);
      assertThat(number(output, "number of failed transactions: (\\d+)")).as(output).isZero();
      assertThat(number(output, "number of deadlock failures: (\\d+)")).as(output).isZero();
      // pgbench's backends have exited, and report their statistics as they go.
      assertThat(deadlocks(s) - deadlocksBefore).as("deadlocks the server detected").isZero();

      Buckets table = Buckets.recompute(s);
      assertThat(Buckets.read(s).fingerprints()).as("fence_bucket_stats vs a recomputation from the table")
          .isEqualTo(table.fingerprints());
      try (ResultSet r = s.executeQuery("SELECT fence_count, checksum FROM fence_stats")) {
        r.next();
        assertThat(new long[] {r.getLong(1), r.getLong(2)}).as("fence_stats vs the table").containsExactly(table.total());
      }

      long bucketRows = replayTheStream(db, streamed, held);
      assertThat(bucketRows).as("bucket rows in the stream").isGreaterThan(2000);
      assertThat(streamed.fingerprints()).as("the stream, replayed, ends where the table is").isEqualTo(table.fingerprints());
    } finally {
      try (Connection admin = DriverManager.getConnection(url, "postgres", "postgres"); Statement s = admin.createStatement()) {
        s.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + SLOT + "'");
        s.execute("DROP DATABASE IF EXISTS " + DATABASE + " WITH (FORCE)");
      }
    }
  }

  /**
   * Folds every fence change of the stream into {@code buckets} as the job reads the stream (a
   * fence row's insert or update, a delete from its tombstone; the row's own delete, which carries
   * only the key, skipped), and checks each bucket row against it as it comes: the stream delivers
   * a bucket's row after the fence changes of the same transaction, with the version one past the
   * last. {@code held} is each live fence's seq where the stream starts. Returns the bucket rows seen.
   */
  private static long replayTheStream(Connection db, Buckets buckets, Map<String, Long> held) throws SQLException {
    long rows = 0;
    db.setAutoCommit(false); // a cursor, so that the stream is read in batches
    try (Statement s = db.createStatement()) {
      s.setFetchSize(5000);
      try (ResultSet r = s.executeQuery("SELECT data FROM pg_logical_slot_get_changes('" + SLOT + "', NULL, NULL)")) {
        while (r.next()) {
          String line = r.getString(1);
          if (line.startsWith("table public.fences: INSERT:") || line.startsWith("table public.fences: UPDATE:")) {
            // The primary key as replica identity: an update carries its new row alone.
            assertThat(line).as("an update without its old row").doesNotContain("old-key:");
            Matcher m = FENCE.matcher(line);
            assertThat(m.find()).as(line).isTrue();
            String id = m.group(1);
            long seq = Long.parseLong(m.group(2));
            Long before = held.put(id, seq);
            if (before != null) {
              buckets.remove(id, before);
            }
            buckets.add(id, seq);
          } else if (line.startsWith("table public.fence_tombstones: INSERT:") || line.startsWith("table public.fence_tombstones: UPDATE:")) {
            Matcher m = FENCE.matcher(line);
            assertThat(m.find()).as(line).isTrue();
            String id = m.group(1);
            Long before = held.remove(id);
            assertThat(before).as("the fence a tombstone deletes was live: %s", line).isNotNull();
            assertThat(Long.parseLong(m.group(2))).as("the delete's version, old seq + 1: %s", line).isEqualTo(before + 1);
            buckets.remove(id, before);
          } else if (line.startsWith("table public.fence_bucket_stats: UPDATE:")) {
            assertThat(line).as("a bucket row's update without its old row").doesNotContain("old-key:");
            Matcher m = BUCKET.matcher(line);
            assertThat(m.find()).as(line).isTrue();
            int bucket = Integer.parseInt(m.group(1));
            assertThat(Long.parseLong(m.group(4))).as("bucket %d's version", bucket).isEqualTo(buckets.versions[bucket] + 1);
            buckets.versions[bucket]++;
            assertThat(new long[] {Long.parseLong(m.group(2)), Long.parseLong(m.group(3))})
                .as("bucket %d's row against the fences streamed before it", bucket)
                .containsExactly(buckets.count[bucket], buckets.checksum[bucket]);
            rows++;
          }
        }
      }
      db.commit();
    } finally {
      db.setAutoCommit(true);
    }
    return rows;
  }

  /** Count, checksum and version per bucket. */
  private static final class Buckets {
    final long[] count = new long[FenceBuckets.COUNT];
    final long[] checksum = new long[FenceBuckets.COUNT];
    final long[] versions = new long[FenceBuckets.COUNT];

    static Buckets read(Statement s) throws SQLException {
      Buckets b = new Buckets();
      try (ResultSet r = s.executeQuery("SELECT bucket, fence_count, checksum, version FROM fence_bucket_stats")) {
        while (r.next()) {
          b.count[r.getInt(1)] = r.getLong(2);
          b.checksum[r.getInt(1)] = r.getLong(3);
          b.versions[r.getInt(1)] = r.getLong(4);
        }
      }
      return b;
    }

    /** The fingerprints as the rows of the table make them, hashed in Java. */
    static Buckets recompute(Statement s) throws SQLException {
      Buckets b = new Buckets();
      try (ResultSet r = s.executeQuery("SELECT id, seq FROM fences")) {
        while (r.next()) {
          b.add(r.getString(1), r.getLong(2));
        }
      }
      return b;
    }

    void add(String id, long seq) {
      int bucket = FenceBuckets.of(id);
      count[bucket]++;
      checksum[bucket] ^= FenceChecksum.hash(id, seq);
    }

    void remove(String id, long seq) {
      int bucket = FenceBuckets.of(id);
      count[bucket]--;
      checksum[bucket] ^= FenceChecksum.hash(id, seq);
    }

    String fingerprints() {
      StringBuilder text = new StringBuilder();
      for (int b = 0; b < FenceBuckets.COUNT; b++) {
        text.append(b).append(' ').append(count[b]).append(' ').append(checksum[b]).append('\n');
      }
      return text.toString();
    }

    long[] total() {
      long[] total = new long[2];
      for (int b = 0; b < FenceBuckets.COUNT; b++) {
        total[0] += count[b];
        total[1] ^= checksum[b];
      }
      return total;
    }
  }

  private static long deadlocks(Statement s) throws SQLException {
    s.execute("SELECT pg_stat_clear_snapshot()");
    try (ResultSet r = s.executeQuery("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")) {
      r.next();
      return r.getLong(1);
    }
  }

  private static long number(String output, String pattern) {
    Matcher m = Pattern.compile(pattern).matcher(output);
    assertThat(m.find()).as("pgbench printed /%s/:%n%s", pattern, output).isTrue();
    return Long.parseLong(m.group(1));
  }
}
