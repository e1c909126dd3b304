package dev.geofence.connectors.source;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.source.Migrations.GeometryColumn;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.edit.HeldFences;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
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
 * differs, and its bucket rows agree with the fences it leaves the subtask holding. Narrowed by the
 * transaction horizon of a heartbeat written before the round, the key pass scans exactly those
 * fences, and the outcome is the same, also after {@code VACUUM (FREEZE)}.
 */
class ChangedReadTest {

  private static final int MAX_PARALLELISM = 128;
  private static final int[][] RANGES = {{0, 42}, {43, 85}, {86, 127}};

  @Test
  void heldFencesMergedWithTheReadEqualTheSourceOverGeneratedHistories() throws Exception {
    // The horizon of the round before, older than the held fences': the pass then also meets rows
    // the held fences have at their seq (those edited in the round before), which it must not hand on.
    long[] horizons = {0, 0};
    int[] lastRound = {-1};
    long[] scannedBeyondChanged = {0};
    overGeneratedHistories(37, 8, 200, (db, round, range, before, expected, horizon) -> {
      if (round == 5) {
        try (Statement s = db.createStatement()) {
          s.execute("VACUUM (FREEZE) fences");
        }
      }
      if (round != lastRound[0]) {
        lastRound[0] = round;
        horizons[0] = horizons[1];
        horizons[1] = horizon;
      }
      checkRead(db, round, range, before, expected, 0, true);
      checkRead(db, round, range, before, expected, horizon, true);
      if (horizons[0] > 0) {
        scannedBeyondChanged[0] += checkRead(db, round, range, before, expected, horizons[0], false);
      }
    });
    assertThat(scannedBeyondChanged[0]).as("rows an older horizon's pass met at the seq held").isPositive();
  }

  /**
   * Checks a read of what changed against the source; with {@code stateHorizon}, {@code horizon} is
   * the held fences' own, so that a narrowed pass meets exactly the fences that changed. Returns
   * how many rows the pass met beyond those.
   */
  private static long checkRead(Connection db, int round, int[] range, Map<String, Long> before, Map<String, Long> expected,
      long horizon, boolean stateHorizon) throws Exception {
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
        HeldFences.ofLive(before), horizon, false, change -> {
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
    String what = String.format("round %d, key groups %d-%d, horizon %d", round, range[0], range[1], horizon);
    assertThat(holding).as(what).isEqualTo(expected);
    assertThat(readWhole).as("read whole: exactly the fences whose seq differs, %s", what).isEqualTo(changed);
    assertThat(result.changed()).isEqualTo(changed.size());
    assertThat(result.narrowed()).as(what).isEqualTo(horizon > 0);
    // Narrowed by the state's horizon, the pass scans the rows written since: exactly the fences that changed.
    if (horizon == 0 || stateHorizon) {
      assertThat(result.keys()).as("keys scanned, %s", what).isEqualTo(horizon > 0 ? changed.size() : expected.size());
    } else {
      assertThat(result.keys()).as("keys scanned, %s", what).isGreaterThanOrEqualTo(changed.size());
    }
    assertThat(result.missing()).as("every held fence the source lacks has a tombstone").isEmpty();
    assertFingerprintsAgree(fingerprints, holding);
    assertThat(result.readTime()).isGreaterThan(System.currentTimeMillis() - 60_000);
    return result.keys() - changed.size();
  }

  /**
   * The catch-up's load (the read whole) over generated histories: into a subtask that set its
   * fences aside, every live fence of its buckets comes once and the result equals the source; a
   * tombstone comes only if it is newer than the version held before (so a delete and re-creation
   * before the held version never EXITs that version's members), and those that come are exactly
   * the held fences deleted since.
   */
  @Test
  void theLoadReadsEveryFenceWholeAndOnlyTheDeletesSinceTheHeldVersions() throws Exception {
    overGeneratedHistories(370, 6, 400, (db, round, range, before, expected, horizon) -> {
      Set<String> deletedSince = new HashSet<>();
      before.forEach((id, seq) -> {
        if (!expected.containsKey(id) || tombstoneSeq(db, id) > seq) {
          deletedSince.add(id);
        }
      });
      Map<String, Long> loaded = new HashMap<>();
      Set<String> deletes = new HashSet<>();
      Map<Integer, long[]> fingerprints = new HashMap<>();
      ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), MAX_PARALLELISM, range[0], range[1],
          HeldFences.ofLive(before), 0, true, change -> {
            if (change.kind == FenceChange.Kind.BUCKET_STATS) {
              fingerprints.put(change.bucket, new long[] {change.fenceCount, change.checksum});
            } else if (change.delete) {
              assertThat(loaded).as("a delete before the re-creation it precedes").doesNotContainKey(change.fenceId);
              if (before.containsKey(change.fenceId)) {
                deletes.add(change.fenceId);
              }
            } else {
              assertThat(change.geometryBytes).isNotNull();
              assertThat(loaded.put(change.fenceId, change.seq)).as("%s read once", change.fenceId).isNull();
            }
          });
      assertThat(loaded).as("round %d, key groups %d-%d", round, range[0], range[1]).isEqualTo(expected);
      assertThat(deletes).as("tombstones of held fences: the deletes since the held versions").isEqualTo(deletedSince);
      assertThat(result.changed()).isEqualTo(expected.size());
      assertThat(result.missing()).as("every held fence the source lacks has a tombstone").isEmpty();
      assertThat(fingerprints).isNotEmpty();
      assertFingerprintsAgree(fingerprints, loaded);
    });
  }

  /** Each bucket row read agrees with the fences {@code held} leaves in its bucket. */
  private static void assertFingerprintsAgree(Map<Integer, long[]> fingerprints, Map<String, Long> held) {
    for (Map.Entry<Integer, long[]> bucket : fingerprints.entrySet()) {
      FenceChecksum sum = new FenceChecksum();
      held.forEach((id, seq) -> {
        if (FenceBuckets.of(id) == bucket.getKey()) {
          sum.add(id, seq);
        }
      });
      assertThat(bucket.getValue()).as("bucket %d", bucket.getKey()).containsExactly(sum.count(), sum.checksum());
    }
  }

  /**
   * One subtask's key groups after a round of generated edits: what it held before them, what the
   * source has after, and the transaction horizon of a heartbeat written before them.
   */
  private interface Round {
    void check(Connection db, int round, int[] range, Map<String, Long> before, Map<String, Long> expected, long horizon)
        throws Exception;
  }

  /**
   * 1,500 fences, then {@code rounds} rounds of up to {@code maxEdits} random edits, each checked for
   * every subtask's key groups of {@link #RANGES}.
   */
  private static void overGeneratedHistories(long seed, int rounds, int maxEdits, Round check) throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
      SplittableRandom random = new SplittableRandom(seed);
      edit(db, random, square, 1_500, 0);
      for (int round = 0; round < rounds; round++) {
        Map<String, Long> source = live(db);
        Map<Integer, Map<String, Long>> held = new HashMap<>();
        for (int r = 0; r < RANGES.length; r++) {
          held.put(r, inRange(source, RANGES[r]));
        }
        long horizon = heartbeatHorizon(db);
        edit(db, random, square, 40 + random.nextInt(maxEdits), 1_500 + round * 100);
        source = live(db);
        for (int r = 0; r < RANGES.length; r++) {
          check.check(db, round, RANGES[r], held.get(r), inRange(source, RANGES[r]), horizon);
        }
      }
    }
  }

  /** Writes the heartbeat row as the job does and returns the horizon the migration's trigger gave it. */
  private static long heartbeatHorizon(Connection db) throws Exception {
    try (Statement s = db.createStatement()) {
      s.executeUpdate(FenceSource.heartbeatSql(FenceTableColumns.defaults()));
      try (ResultSet r = s.executeQuery("SELECT horizon FROM fence_heartbeat")) {
        r.next();
        assertThat(r.getLong(1)).as("the heartbeat's horizon").isPositive();
        return r.getLong(1);
      }
    }
  }

  /** The seq of the fence's tombstone, 0 if it has none. */
  private static long tombstoneSeq(Connection db, String id) {
    try (PreparedStatement s = db.prepareStatement("SELECT seq FROM fence_tombstones WHERE id = ?")) {
      s.setString(1, id);
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? r.getLong(1) : 0;
      }
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
  }

  /**
   * The read's stream position loses nothing under concurrent writers: a stream started there (as
   * the job's slot is moved for it) and merged by seq with what the read held equals the source
   * after the writers stop. The stream here is a test_decoding slot created before the writers, of
   * which only the transactions committed after the position count.
   */
  @Test
  void aStreamFromTheReadsPositionLosesNothingUnderConcurrentWriters() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
      edit(db, new SplittableRandom(3), square, 300, 0);
      s.execute("SELECT pg_create_logical_replication_slot('pairing', 'test_decoding')");
      java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
      List<Thread> writers = new java.util.ArrayList<>();
      for (int w = 0; w < 3; w++) {
        int seed = w;
        Thread writer = new Thread(() -> {
          SplittableRandom random = new SplittableRandom(seed);
          try (Connection c = pg.getPostgresDatabase().getConnection();
              PreparedStatement update = c.prepareStatement("UPDATE fences SET geom = geom WHERE id = ?")) {
            while (!stop.get()) {
              update.setString(1, "fence-" + random.nextInt(300));
              update.execute();
            }
          } catch (Exception e) {
            throw new AssertionError(e);
          }
        });
        writer.start();
        writers.add(writer);
      }
      List<long[]> positions = new java.util.ArrayList<>();
      List<Map<String, Long>> reads = new java.util.ArrayList<>();
      try {
        for (int i = 0; i < 12; i++) {
          Map<String, Long> read = new HashMap<>();
          ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(Map.of()), 0, false, change -> {
            if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
              read.put(change.fenceId, change.seq);
            }
          });
          assertThat(result.streamFrom()).as("read %d paired with a stream position", i).isPositive();
          assertThat(Long.compareUnsigned(result.streamFrom(), result.lsn())).isLessThanOrEqualTo(0);
          positions.add(new long[] {result.streamFrom()});
          reads.add(read);
          Thread.sleep(20);
        }
      } finally {
        stop.set(true);
        for (Thread writer : writers) {
          writer.join();
        }
      }
      // Decoding stops at the WAL flushed so far (the server commits asynchronously): all of it.
      s.execute("CHECKPOINT");
      // Each transaction's updates and the LSN of its commit, from the slot.
      Map<Long, List<String[]>> updates = new HashMap<>();
      Map<Long, Long> commits = new HashMap<>();
      java.util.regex.Pattern row = java.util.regex.Pattern.compile("^table public\\.fences: (?:UPDATE|INSERT): id\\[text\\]:'([^']*)' seq\\[bigint\\]:(\\d+)");
      try (ResultSet r = s.executeQuery("SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_changes('pairing', NULL, NULL)")) {
        while (r.next()) {
          String data = r.getString(3);
          java.util.regex.Matcher m = row.matcher(data);
          if (m.find()) {
            updates.computeIfAbsent(r.getLong(2), x -> new java.util.ArrayList<>()).add(new String[] {m.group(1), m.group(2)});
          } else if (data.startsWith("COMMIT")) {
            commits.put(r.getLong(2), dev.geofence.state.readiness.Lsn.parse(r.getString(1)));
          }
        }
      }
      Map<String, Long> source = live(db);
      for (int i = 0; i < reads.size(); i++) {
        long from = positions.get(i)[0];
        Map<String, Long> merged = new HashMap<>(reads.get(i));
        updates.forEach((xid, rows) -> {
          if (Long.compareUnsigned(commits.get(xid), from) > 0) {
            rows.forEach(u -> merged.merge(u[0], Long.parseLong(u[1]), Math::max));
          }
        });
        Map<String, String> differ = new java.util.TreeMap<>();
        source.forEach((id, seq) -> {
          if (!seq.equals(merged.get(id))) {
            differ.put(id, merged.get(id) + " against " + seq);
          }
        });
        assertThat(differ).as("read %d merged with the stream from %s: the fences that differ from the source's seq (%d transactions"
            + " decoded, %d updates)", i, dev.geofence.state.readiness.Lsn.format(from), commits.size(), updates.size()).isEmpty();
        assertThat(merged).hasSameSizeAs(source);
      }
      assertThat(commits).as("transactions the writers committed meanwhile").hasSizeGreaterThan(100);
    }
  }

  /**
   * A fence the source lost without a tombstone (rows deleted by hand) is reported missing, for the
   * subtask to delete, by a key pass over every row; a narrowed one cannot tell (the bucket's
   * fingerprint then does). A horizon ahead of the source's transactions (another history) does not
   * narrow the pass.
   */
  @Test
  void aHeldFenceWithNoRowAtAllIsMissing() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().start(); Connection db = pg.getPostgresDatabase().getConnection()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      long horizon = heartbeatHorizon(db);
      for (long tooFar : new long[] {0, horizon + 1_000_000}) {
        ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(Map.of("ghost", 4L)),
            tooFar, false, change -> {});
        assertThat(result.narrowed()).as("horizon %d", tooFar).isFalse();
        assertThat(result.missing()).containsExactly("ghost");
        assertThat(result.changed()).isZero();
      }
      ChangedRead.Result narrowed = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(Map.of("ghost", 4L)),
          horizon, false, change -> {});
      assertThat(narrowed.narrowed()).isTrue();
      assertThat(narrowed.missing()).isEmpty();
      // Among held fences that have their rows, at other seqs or the same, the pass over every row
      // and the load report only the ghost.
      edit(db, new SplittableRandom(3), new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))")), 20, 0);
      Map<String, Long> held = new HashMap<>(live(db));
      held.replaceAll((id, seq) -> id.endsWith("7") ? seq + 1 : seq);
      held.put("ghost", 4L);
      for (boolean whole : new boolean[] {false, true}) {
        ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(held), 0, whole,
            change -> {});
        assertThat(result.missing()).as(whole ? "load" : "key pass").containsExactly("ghost");
      }
    }
  }

  /**
   * A transaction whose commit record is written but which is not visible yet (its commit waits for
   * a synchronous standby, as any commit waits for its flush) is the newest, so a snapshot's list of
   * running ids leaves it out: the read must not pair with a position past its commit record, or a
   * stream started there would lose its edit, which the read does not see either. It waits for it,
   * then reads unpaired; once it is visible, a read sees its edit and pairs. Red when the pairing
   * waited only for the ids a snapshot lists.
   */
  @Test
  void aCommitNotYetVisibleIsNotSkippedByTheReadsPosition() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("synchronous_standby_names", "nobody")
        .setServerConfig("synchronous_commit", "local").start();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
      edit(db, new SplittableRandom(7), square, 20, 0);
      Map<String, Long> before = live(db);
      long beforeCommit;
      try (ResultSet r = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
        r.next();
        beforeCommit = dev.geofence.state.readiness.Lsn.parse(r.getString(1));
      }
      Thread writer = new Thread(() -> {
        try (Connection c = pg.getPostgresDatabase().getConnection(); Statement w = c.createStatement()) {
          w.execute("SET synchronous_commit = on");
          w.executeUpdate("UPDATE fences SET geom = geom WHERE id = 'fence-3'");
        } catch (Exception e) {
          throw new AssertionError(e);
        }
      });
      writer.start();
      try {
        long deadline = System.currentTimeMillis() + 10_000;
        while (!waitingForStandby(s)) {
          assertThat(System.currentTimeMillis()).as("the writer's commit waits for the standby").isLessThan(deadline);
          Thread.sleep(10);
        }
        Map<String, Long> read = new HashMap<>();
        ChangedRead.Result unpaired = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(before), 0, false,
            change -> {
              if (change.kind == FenceChange.Kind.FENCE) {
                read.put(change.fenceId, change.seq);
              }
            });
        assertThat(read).as("the read's snapshot does not see the commit still waiting").isEmpty();
        assertThat(unpaired.streamFrom()).as("a stream from the read's position would skip the commit the read did not see")
            .satisfiesAnyOf(from -> assertThat(from).isZero(),
                from -> assertThat(Long.compareUnsigned(from, beforeCommit)).isLessThanOrEqualTo(0));
      } finally {
        // Cancelled, the wait ends with the transaction committed (locally, as PostgreSQL warns).
        s.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
        writer.join(10_000);
      }
      assertThat(writer.isAlive()).as("the writer's commit, released").isFalse();
      Map<String, Long> read = new HashMap<>();
      ChangedRead.Result paired = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(before), 0, false,
          change -> {
            if (change.kind == FenceChange.Kind.FENCE) {
              read.put(change.fenceId, change.seq);
            }
          });
      assertThat(read).as("the edit, visible now").containsOnlyKeys("fence-3").containsEntry("fence-3", live(db).get("fence-3"));
      assertThat(paired.streamFrom()).as("paired once nothing is committing").isPositive();
    }
  }

  private static boolean waitingForStandby(Statement s) throws Exception {
    try (ResultSet r = s.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")) {
      r.next();
      return r.getInt(1) > 0;
    }
  }

  /** Ids of pg_locks made 64-bit against a reference in the same epoch, the one before and the one after. */
  @Test
  void aLockedIdIsTheFullIdNearestTheReference() {
    long epoch = 1L << 32;
    assertThat(ChangedRead.fullXid(epoch + 1_000, 990)).isEqualTo(epoch + 990);
    assertThat(ChangedRead.fullXid(epoch + 1_000, 1_005)).isEqualTo(epoch + 1_005);
    assertThat(ChangedRead.fullXid(epoch + 5, 4_294_967_290L)).as("before the epoch's wrap").isEqualTo(epoch - 6);
    assertThat(ChangedRead.fullXid(epoch - 6, 5)).as("after it").isEqualTo(epoch + 5);
  }

  /**
   * A read, and a load, end by writing the heartbeat row: with nothing else written, a stream from
   * the read's position brings a heartbeat committed after it, so the subtask is ready as soon as
   * the stream starts rather than at the job's next heartbeat.
   */
  @Test
  void aReadEndsWithAHeartbeatBeyondItsPosition() throws Exception {
    try (EmbeddedPostgres pg = EmbeddedPostgres.builder().setServerConfig("wal_level", "logical").start();
        Connection db = pg.getPostgresDatabase().getConnection(); Statement s = db.createStatement()) {
      Migrations.applySource(db, GeometryColumn.WKB);
      byte[] square = new WKBWriter().write(new WKTReader().read("POLYGON ((0 0, 1 0, 1 1, 0 1, 0 0))"));
      edit(db, new SplittableRandom(5), square, 50, 0);
      s.execute("SELECT pg_create_logical_replication_slot('after_read', 'test_decoding')");
      for (boolean whole : new boolean[] {false, true}) {
        ChangedRead.Result result = ChangedRead.read(db, FenceTableColumns.defaults(), 1, 0, 0, HeldFences.ofLive(Map.of()), 0, whole,
            change -> {});
        // Decoding stops at the WAL flushed so far (the server commits asynchronously).
        s.execute("CHECKPOINT");
        List<String> after = new java.util.ArrayList<>();
        try (ResultSet r = s.executeQuery("SELECT lsn::text, data FROM pg_logical_slot_get_changes('after_read', NULL, NULL)")) {
          while (r.next()) {
            if (Long.compareUnsigned(dev.geofence.state.readiness.Lsn.parse(r.getString(1)), result.lsn()) > 0) {
              after.add(r.getString(2));
            }
          }
        }
        assertThat(after).as("the stream after the %s's position", whole ? "load" : "read")
            .anyMatch(data -> data.startsWith("table public.fence_heartbeat: "));
      }
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
