package dev.geofence.savepoints;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.savepoints.SavepointInspection;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.snapshot.ArrowSnapshotFile;
import dev.geofence.state.snapshot.SnapshotFence;
import dev.geofence.state.time.StayRules;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;

/**
 * The savepoint tools on real savepoints: {@code inspect} and {@code verify} on one the job took,
 * of known content; {@code bootstrap} writing one the job restores from, without a CDC snapshot;
 * {@code export} and {@code bootstrap --from-arrow} keeping every fence as the job held it.
 */
class SavepointToolsITCase extends EndToEndFixture {

  @Test
  void inspectReportsWhatTheSavepointHolds() throws Exception {
    database("geofence_inspect", 29);
    placeFences(0, 60);
    JobClient job = start(2, "rocksdb");
    moveObjects();
    // Evaluated before the deletes, as the oracle has them (FlinkSqlITCase says why).
    awaitEvaluated();
    deleteFences(50, 60);
    assertTriggersAsOracle();
    String savepoint = stopWithSavepoint(job);

    SavepointInspection inspection = SavepointInspection.read(savepoint, 3);
    assertThat(inspection.fences).as("not an empty savepoint").isPositive()
        .isEqualTo(queryLong("SELECT fence_count FROM fence_stats"));
    assertThat(inspection.checksum).isEqualTo(queryLong("SELECT checksum FROM fence_stats"));
    assertThat(inspection.tombstones).isEqualTo(queryLong("SELECT count(*) FROM fence_tombstones"));
    assertThat(inspection.unreadable).isZero();
    // A savepoint taken once the index is ready folds every bucket's overlay due into its segment:
    // with a few fences per bucket, all of them.
    assertThat(inspection.segments).as("buckets held as segments").isPositive();
    assertThat(inspection.unreadableSegments).isZero();
    assertThat(inspection.overlayFences).isZero();
    assertThat(inspection.vertices).isEqualTo(fences.values().stream().filter(g -> g != null).mapToLong(g -> g.getNumPoints()).sum());
    assertThat(inspection.memberships).isEqualTo(queryLong("SELECT count(*) FROM geofence_presence"));
    assertThat(inspection.fencesPerSubtask).hasSize(3);
    assertThat(java.util.Arrays.stream(inspection.fencesPerSubtask).sum()).isEqualTo(inspection.fences);
    assertThat(java.util.Arrays.stream(inspection.fencesPerKeyGroup).sum()).isEqualTo(inspection.fences);
    assertThat(Long.compareUnsigned(inspection.restoredLsn, 0)).isPositive();
    assertThat(inspection.restoredLsn).isLessThanOrEqualTo(Lsn.parse(queryString("SELECT pg_current_wal_lsn()::text")));

    JsonNode json = new ObjectMapper().readTree(inspection.json(System.currentTimeMillis()));
    assertThat(json.get("fences").asLong()).isEqualTo(inspection.fences);
    assertThat(json.get("stream_lsn").asText()).isEqualTo(Lsn.format(inspection.restoredLsn));
    assertThat(inspection.restoredHorizon).as("a heartbeat's transaction horizon, every 300 ms").isPositive();
    assertThat(json.get("stream_horizon").asLong()).isEqualTo(inspection.restoredHorizon);
    assertThat(json.get("segments").asLong()).isEqualTo(inspection.segments);
    assertThat(inspection.table(System.currentTimeMillis())).contains("live", "subtask 2",
        String.format(java.util.Locale.ROOT, "%,d bucket segments, 0 fences in overlays", inspection.segments));

    // The command line, as users run it.
    assertThat(command(new String[] {"inspect", savepoint, "--json"})).startsWith("0 {");
    assertThat(lastErr).as("progress").containsPattern("state entries: [0-9,]+ in [0-9.]+ s \\([0-9,]+/s\\), done");
    assertThat(command(new String[] {"inspect", "/nowhere"})).startsWith("2 geofence-savepoints: savepoint /nowhere cannot be read (");
    String[] verify = {"verify", savepoint, "--source-url", url, "--source-user", "postgres"};
    assertThat(command(verify)).startsWith("0 equal as of the savepoint: 0 fences differ, 0 buckets behind")
        .contains("savepoint: " + inspection.fences + " fences, checksum " + inspection.checksum
            + "; source now: " + inspection.fences + " fences, checksum " + inspection.checksum);

    // An edit after the savepoint is no difference as of it: its bucket is not compared.
    placeFences(20, 21);
    assertThat(command(verify)).startsWith("0 equal").contains("1 buckets edited since");

    // Changes that bypassed the versioning (the triggers off): verify finds each, by kind.
    assertThat(java.util.stream.Stream.of("fence-3", "fence-4", "oob-1").map(dev.geofence.state.checksum.FenceBuckets::of))
        .doesNotContain(dev.geofence.state.checksum.FenceBuckets.of("fence-20"));
    try (java.sql.Statement s = db.createStatement()) {
      s.execute("ALTER TABLE fences DISABLE TRIGGER USER");
      s.execute("DELETE FROM fences WHERE id = 'fence-3'");
      s.execute("UPDATE fences SET seq = seq + 5 WHERE id = 'fence-4'");
      s.execute("INSERT INTO fences (id, seq, geom) SELECT 'oob-1', 1, geom FROM fences WHERE id = 'fence-5'");
      s.execute("ALTER TABLE fences ENABLE TRIGGER USER");
    }
    assertThat(command(verify)).startsWith("1 DIFFERENT as of the savepoint: 3 fences differ")
        .contains("extra fence-3", "stale fence-4", "missing oob-1");
  }

  /**
   * A first deploy from a bootstrapped savepoint: it holds what the source holds (not empty), the
   * job restores from it streaming from the slot the bootstrap created, catches up on the edits
   * made since, and answers as the oracle and a fresh rebuild do.
   */
  @Test
  void theJobRestoresFromABootstrappedSavepoint() throws Exception {
    database("geofence_bootstrap", 31);
    placeFences(0, 50);
    deleteFences(40, 45);
    createFences(40, 42);
    String savepoint = temp.resolve("bootstrapped").toString();
    assertThat(command(new String[] {"bootstrap", "--source-url", url, "--source-user", "postgres", "--slot", slot,
        "--output", savepoint})).startsWith("0 bootstrapped");
    SavepointInspection written = SavepointInspection.read(savepoint, 2);
    assertThat(written.fences).as("not an empty savepoint").isPositive().isEqualTo(queryLong("SELECT fence_count FROM fence_stats"));
    assertThat(written.checksum).isEqualTo(queryLong("SELECT checksum FROM fence_stats"));
    assertThat(written.tombstones).as("deleted and not re-created")
        .isEqualTo(queryLong("SELECT count(*) FROM fence_tombstones t WHERE NOT EXISTS (SELECT 1 FROM fences f WHERE f.id = t.id)"));
    assertThat(written.vertices).isEqualTo(fences.values().stream().filter(g -> g != null).mapToLong(g -> g.getNumPoints()).sum());
    assertThat(written.segments).as("every bucket's fences written as its segment").isPositive();
    assertThat(written.overlayFences).isZero();

    // The read's transaction horizon is every key group's: rows last written before the read are
    // older than it, and each row written after it is not.
    assertThat(written.restoredHorizon).as("the read's transaction horizon").isPositive();
    assertThat(queryLong("SELECT count(*) FROM fences WHERE age(xmin) <= age('" + written.restoredHorizon + "'::xid)")).isZero();
    assertThat(SavepointInspection.read(savepoint, 2).table(System.currentTimeMillis()))
        .contains("transaction horizon " + written.restoredHorizon);

    // Edits after the bootstrap's read: the restored job catches up on them by reading what changed,
    // its key pass narrowed by the bootstrap's horizon to the 8 rows written since (5 reshaped, 3
    // created; the 3 deleted have tombstones): a pass over every row would compare all 47.
    placeFences(0, 5);
    deleteFences(5, 8);
    createFences(50, 53);
    assertThat(queryLong("SELECT count(*) FROM fences")).isEqualTo(47);
    catchUp = CatchUp.READ;
    JobClient job = start(2, "rocksdb", savepoint);
    // Locations stamped before a subtask's read would be BEFORE_READ dead letters.
    awaitHydrated(job, 2);
    moveObjects();
    threeWayCheck("bootstrapped", 100_000);
    assertTriggersAsOracle();
    assertThat(assertWarmUps(job, 2, "savepoint")).filteredOn(e -> e.startMode().equals("savepoint"))
        .allSatisfy(e -> assertThat(e.gapCheck()).as("gap check of %s", e).isEqualTo("covered"));
    assertThat(metricSum(job, "catchup_keys_compared")).as("keys compared by the read's narrowed key pass").isEqualTo(8);
    assertThat(queryLong("SELECT count(*) FROM geofence_dead_letters")).isZero();
  }

  /**
   * A savepoint exported to an Arrow file and bootstrapped back holds the same, and the job
   * restored from it (at another parallelism, streaming from its slot) catches up and answers as
   * the oracle and a fresh rebuild do, with no trigger lost or repeated: the objects inside fences
   * travel in the file too.
   */
  @Test
  void aSavepointRoundTripsThroughAnArrowFile() throws Exception {
    database("geofence_arrow", 37);
    placeFences(0, 40);
    String savepoint = runAndStopWithSavepoint(2, "rocksdb").savepoint();

    Path file = temp.resolve("fences.arrow");
    assertThat(command(new String[] {"export", savepoint, "--to-arrow", file.toString()})).startsWith("0 exported");
    assertThat(lastErr).as("progress with a total").containsPattern("fences: [0-9,]+ of [0-9,]+ in .*, done");
    String imported = temp.resolve("imported").toString();
    assertThat(command(new String[] {"bootstrap", "--from-arrow", file.toString(), "--output", imported})).startsWith("0 bootstrapped");
    SavepointInspection original = SavepointInspection.read(savepoint, 2);
    SavepointInspection copy = SavepointInspection.read(imported, 2);
    assertThat(copy.fences).as("not an empty savepoint").isPositive().isEqualTo(original.fences);
    assertThat(copy.liveSeqs).isEqualTo(original.liveSeqs);
    assertThat(copy.checksum).isEqualTo(original.checksum);
    assertThat(copy.vertices).isEqualTo(original.vertices);
    assertThat(copy.memberships).isPositive().isEqualTo(original.memberships);
    assertThat(copy.restoredLsn).isEqualTo(original.restoredLsn);
    assertThat(copy.bucketVersions).isEqualTo(original.bucketVersions);
    assertThat(copy.segments).isPositive();
    assertThat(copy.overlayFences).isZero();
    Path copied = temp.resolve("copy.arrow");
    assertThat(command(new String[] {"export", imported, "--to-arrow", copied.toString()})).startsWith("0 exported");
    assertThat(fencesOf(copied)).as("fence by fence: tenant, dwell delay, geometry, the objects inside")
        .usingRecursiveComparison().isEqualTo(fencesOf(file));

    placeFences(0, 5);
    deleteFences(5, 8);
    // A bootstrapped savepoint holds no source's position: the restored job reads a new inbox.
    inbox = Files.createDirectories(temp.resolve("inbox-after-import"));
    start(3, "rocksdb", imported);
    moveObjects();
    threeWayCheck("arrow", 100_000);
    assertTriggersAsOracle();
  }

  /**
   * Each fence's own dwell delay (a few with one, a few 0, a negative one taken as 0, most none)
   * goes from a bootstrap's rows into the savepoint, through {@code export} into the file, and
   * through {@code bootstrap --from-arrow} into another savepoint, whose export is the first file
   * fence by fence. A fence whose geometry does not decode has no delay, as the job holds it. The
   * first savepoint is written from rows, as a bootstrap from the database writes it: the delays
   * are known without a table or a job.
   */
  @Test
  void eachFencesDwellDelayTravelsThroughExportAndImport() throws Exception {
    List<BootstrapRow> rows = new ArrayList<>();
    Map<String, Long> expected = new TreeMap<>();
    for (int i = 0; i < 60; i++) {
      Long own = switch (i) {
        case 0, 1, 2, 3 -> 90_000L << i;
        case 4, 5 -> 0L;
        case 6 -> -5_000L;
        default -> null;
      };
      rows.add(fenceRow("fence-" + i, i + 1, polygonWkb(i, 0, i + 1, 0, i + 1, 1, i, 1, i, 0), i % 3 == 0 ? "t" + i : null, own));
      expected.put("fence-" + i, own == null ? StayRules.NO_FENCE_DELAY : Math.max(0, own));
    }
    rows.add(fenceRow("unclosed", 2, polygonWkb(0, 0, 1, 0, 1, 1, 0, 1), null, 60_000L));
    expected.put("unclosed", StayRules.NO_FENCE_DELAY);
    BootstrapRow gone = fenceRow("gone", 5, null, null, null);
    gone.change.delete = true;
    rows.add(gone);
    expected.put("gone", StayRules.NO_FENCE_DELAY);
    String savepoint = temp.resolve("with-delays").toString();
    SavepointBootstrap.writeRows(rows, 0x1_0000_0040L, 1_765_000_000_000L, 9_000_017L, savepoint, 128,
        GeometryReadOptions.defaults(), GeometryFormat.WKB);

    Path file = temp.resolve("with-delays.arrow");
    assertThat(command(new String[] {"export", savepoint, "--to-arrow", file.toString()})).startsWith("0 exported 62 fences");
    Map<String, SnapshotFence> exported = fencesOf(file);
    assertThat(dwellDelays(exported)).isEqualTo(expected);
    assertThat(exported.get("unclosed").geometry()).as("refused").isNull();

    String imported = temp.resolve("imported-with-delays").toString();
    assertThat(command(new String[] {"bootstrap", "--from-arrow", file.toString(), "--output", imported})).startsWith("0 bootstrapped");
    Path copied = temp.resolve("imported-with-delays.arrow");
    assertThat(command(new String[] {"export", imported, "--to-arrow", copied.toString()})).startsWith("0 exported 62 fences");
    assertThat(fencesOf(copied)).usingRecursiveComparison().isEqualTo(exported);
    // The position's transaction horizon travels too, so that the imported savepoint's catch-up
    // narrows its key pass as the first's would.
    assertThat(ArrowSnapshotFile.read(file).horizon()).isEqualTo(9_000_017L);
    assertThat(SavepointInspection.read(imported, 1).restoredHorizon).isEqualTo(9_000_017L);
  }

  /**
   * A bootstrap from the database writes each fence's own dwell delay from the table's {@code
   * dwell_delay} column (an interval; null: none of its own, negative: 0), and {@code verify} finds
   * the savepoint equal to the source: a delay is part of the row whose seq it compares. The
   * connectors' bucket read reads the column (geofence.source.dwell-delay-column, by default).
   */
  @Test
  void aBootstrapFromTheDatabaseKeepsEachFencesDwellDelay() throws Exception {
    database("geofence_bootstrap_delays", 41);
    try (java.sql.Statement s = db.createStatement()) {
      s.execute("ALTER TABLE fences ADD COLUMN IF NOT EXISTS dwell_delay interval");
    }
    placeFences(0, 40);
    insertRaw("unclosed", "POLYGON ((0 0, 1 0, 1 1, 0 1))", polygonWkb(0, 0, 1, 0, 1, 1, 0, 1));
    try (java.sql.Statement s = db.createStatement()) {
      s.execute("UPDATE fences SET dwell_delay = CASE id WHEN 'fence-0' THEN interval '90 seconds' WHEN 'fence-1' THEN interval '2 hours'"
          + " WHEN 'fence-2' THEN interval '0' WHEN 'fence-3' THEN interval '-1 minute' ELSE interval '5 minutes' END"
          + " WHERE id IN ('fence-0', 'fence-1', 'fence-2', 'fence-3', 'fence-38', 'unclosed')");
    }
    deleteFences(38, 40);
    Map<String, Long> expected = new TreeMap<>();
    for (int i = 0; i < 40; i++) {
      expected.put("fence-" + i, StayRules.NO_FENCE_DELAY);
    }
    expected.putAll(Map.of("fence-0", 90_000L, "fence-1", 7_200_000L, "fence-2", 0L, "fence-3", 0L));
    expected.put("unclosed", StayRules.NO_FENCE_DELAY);
    String savepoint = temp.resolve("bootstrapped").toString();
    assertThat(command(new String[] {"bootstrap", "--source-url", url, "--source-user", "postgres", "--slot", slot,
        "--output", savepoint})).startsWith("0 bootstrapped");

    Path file = temp.resolve("bootstrapped.arrow");
    assertThat(command(new String[] {"export", savepoint, "--to-arrow", file.toString()})).startsWith("0 exported");
    assertThat(dwellDelays(fencesOf(file))).isEqualTo(expected);
    assertThat(command(new String[] {"verify", savepoint, "--source-url", url, "--source-user", "postgres"}))
        .startsWith("0 equal as of the savepoint: 0 fences differ");
  }

  /** A fence row of a bucket read: WKB, or none for a tombstone; a dwell delay of its own, or null. */
  private static BootstrapRow fenceRow(String id, long seq, byte[] wkb, String tenant, Long dwellDelay) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.FENCE;
    change.snapshot = true;
    change.fenceId = id;
    change.seq = seq;
    change.geometryBytes = wkb;
    change.tenant = tenant;
    change.dwellDelay = dwellDelay;
    return new BootstrapRow(change);
  }

  /** The fences of a snapshot file by id, the objects inside each in id order: a savepoint keeps them in none. */
  private static Map<String, SnapshotFence> fencesOf(Path file) throws Exception {
    Map<String, SnapshotFence> fences = new TreeMap<>();
    for (SnapshotFence f : ArrowSnapshotFile.read(file).fences()) {
      TreeMap<String, Long> inside = new TreeMap<>();
      for (int m = 0; m < f.memberIds().length; m++) {
        inside.put(f.memberIds()[m], f.memberSince()[m]);
      }
      fences.put(f.id(), new SnapshotFence(f.id(), f.seq(), f.deleted(), f.tenant(), f.dwellDelay(), f.geometry(),
          inside.keySet().toArray(new String[0]), inside.values().stream().mapToLong(Long::longValue).toArray()));
    }
    return fences;
  }

  private static Map<String, Long> dwellDelays(Map<String, SnapshotFence> fences) {
    Map<String, Long> delays = new TreeMap<>();
    fences.forEach((id, fence) -> delays.put(id, fence.dwellDelay()));
    return delays;
  }

  /** What the last command printed on its error stream: progress, and errors. */
  private String lastErr = "";

  /** Runs the savepoint command line: its exit code, a space, and what it printed (errors included). */
  private String command(String[] args) {
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    java.io.ByteArrayOutputStream errBytes = new java.io.ByteArrayOutputStream();
    int status = dev.geofence.savepoints.SavepointCommand.run(args,
        new java.io.PrintStream(bytes, true, java.nio.charset.StandardCharsets.UTF_8),
        new java.io.PrintStream(errBytes, true, java.nio.charset.StandardCharsets.UTF_8));
    lastErr = errBytes.toString(java.nio.charset.StandardCharsets.UTF_8);
    String printed = bytes.toString(java.nio.charset.StandardCharsets.UTF_8);
    // A failure's one sentence is on the error stream, after any progress lines.
    String[] errLines = lastErr.strip().split("\\R");
    return status + " " + (status == 2 ? errLines[errLines.length - 1] : printed);
  }

  private String queryString(String sql) throws Exception {
    try (java.sql.Statement s = db.createStatement(); java.sql.ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getString(1);
    }
  }
}
