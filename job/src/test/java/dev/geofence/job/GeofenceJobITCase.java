package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.cli.GeofenceCommand;
import dev.geofence.job.testing.EndToEndFixture;
import dev.geofence.job.testing.Waiting;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.core.execution.JobClient;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.io.WKBWriter;

/**
 * The whole job on a Flink MiniCluster against a real PostgreSQL with logical replication: fences
 * inserted, reshaped and deleted through SQL while objects move; the triggers, presence and
 * dead-letter tables must equal an oracle computed independently (JTS) over the same history.
 */
class GeofenceJobITCase extends EndToEndFixture {

  /**
   * The PostGIS server the PostGIS case runs against: {@code .ci/postgis.sh} starts one and CI sets
   * this variable. Without it the case fails, never skips.
   */
  static final String POSTGIS_URL = "GEOFENCE_POSTGIS_URL";

  @ParameterizedTest(name = "parallelism {0}, {1}, {2}")
  @CsvSource({"1, hashmap, wkb", "3, rocksdb, wkb", "2, rocksdb-plain, postgis"})
  void triggersPresenceAndDeadLettersMatchTheOracle(int parallelism, String stateBackend, String column) throws Exception {
    if (column.equals("postgis")) {
      String server = System.getenv(POSTGIS_URL);
      assertThat(server).as("%s must name a PostgreSQL with PostGIS and wal_level=logical, user postgres/postgres"
          + " (bash .ci/postgis.sh starts one: jdbc:postgresql://127.0.0.1:55432/postgres)", POSTGIS_URL).isNotBlank();
      password = "postgres";
      database(server, password, "geofence_postgis_p" + parallelism, true, parallelism);
    } else {
      database("geofence_" + column + "_p" + parallelism, parallelism);
    }
    placeFences(0, 40);
    // Deleted before the job starts and re-created while it runs: the snapshot must know the
    // tombstone's seq, or the re-creation looks like a lost edit.
    deleteFence("fence-39");

    JobClient job = start(parallelism, stateBackend);
    // Phase 1: objects move through the initial fences.
    moveObjects();
    // Evaluated before the edits, as the oracle has them: a location the job reads only once the
    // clock has passed a delete does not reopen the deleted fence (docs/design.md, "Time rules").
    awaitEvaluated();
    // Phase 2: reshape some fences, delete some (objects inside must EXIT), add some, and send bad
    // input: a bad new fence, a bad reshape (the old shape stays), a bad location.
    placeFences(0, 8);
    deleteFences(8, 14);
    createFences(39, 46);
    List<String> expectedLetters = insertBadFences();
    writeLines(List.of("{\"object_id\": \"o-bad\", \"ts\": \"yesterday\", \"lon\": 1, \"lat\": 1}", "not json at all"));
    moveObjects();

    assertTriggersAsOracle();
    assertThat(expected).as("the history exercises every kind of trigger")
        .anyMatch(t -> t.contains(" ENTER ")).anyMatch(t -> t.endsWith(" EXIT delete"))
        .anyMatch(t -> t.contains(" EXIT ") && !t.endsWith("delete"));
    assertPresenceAsOracle();
    expectedLetters.addAll(List.of("location o-bad ERROR BAD_TIMESTAMP", "location null ERROR MALFORMED_JSON"));
    assertThat(Waiting.until("the dead letters " + expectedLetters, Duration.ofSeconds(30), this::deadLetters,
        letters -> letters.size() >= expectedLetters.size())).containsExactlyInAnyOrderElementsOf(expectedLetters);
    // The deletes streamed came without Debezium's tombstones, which the source would count as errors.
    assertThat(Waiting.until("the CDC source's numRecordsInErrors", PATIENCE,
        () -> fetchMetric(job, "Fence changes (CDC)", "numRecordsInErrors", "sum"), v -> v >= 0))
        .as("records the CDC source could not use").isZero();
  }

  /**
   * A fences table of one's own (docs/design.md#source-of-truth-contract), its columns named
   * otherwise and versioned by the migration's {@code geofence_versioning}, mapped by the run
   * command's flags: the snapshot, the stream, the tenant scoping and a rebuild (its slot dropped
   * while the job was down) all read it by those names, and the triggers and presence are the
   * oracle's.
   */
  @Test
  void aFencesTableOfItsOwnIsReadThroughTheColumnsMappedToIt() throws Exception {
    database(embeddedServerUrl(), "", "geofence_mapped", 43, db -> {
      try (Statement s = db.createStatement()) {
        // linger, the dwell delay column, stays null: a fence's own delay would DWELL, which this oracle has no rule for.
        s.execute("CREATE TABLE zones (zone_id text PRIMARY KEY, seq bigint NOT NULL DEFAULT 1, shape bytea NOT NULL, org text,"
            + " linger interval)");
        Migrations.applyVersioning(db);
        s.execute("SELECT geofence_versioning('zones', 'zone_id')");
      }
    });
    columns = FenceTableColumns.from(GeofenceCommand.RUN.parse(new String[] {
        "--fences-table", "zones", "--id-column", "zone_id", "--geometry-column", "shape", "--tenant-column", "org",
        "--dwell-delay-column", "linger"}, 0));
    assertThat(columns.toString()).isEqualTo("public.zones(zone_id, seq, shape, org, linger), public.fence_bucket_stats");
    placeFences(0, 30);
    JobClient first = start(2, "rocksdb");
    moveObjects();
    awaitEvaluated();
    placeFences(0, 5);
    deleteFences(5, 10);
    createFences(30, 35);
    // Two tenants' zones on one spot: a location of one tenant enters that tenant's only.
    awaitClockPastLocations();
    Geometry spot = JTS.toGeometry(new Envelope(50, 51, 20, 21));
    try (PreparedStatement s = db.prepareStatement("INSERT INTO zones (zone_id, shape, org) VALUES (?, ?, ?)")) {
      for (String tenant : List.of("acme", "other")) {
        s.setString(1, tenant + "-zone");
        s.setBytes(2, new WKBWriter().write(spot));
        s.setString(3, tenant);
        s.execute();
      }
    }
    probeTenant("acme");
    moveObjects();
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(queryLong("SELECT count(*) FROM geofence_triggers WHERE fence_id LIKE '%-zone'")).isEqualTo(1);

    String savepoint = stopWithSavepoint(first);
    placeFences(10, 15);
    deleteFences(15, 18);
    try (Statement s = db.createStatement()) {
      s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
    }
    JobClient second = start(2, "rocksdb", savepoint);
    moveObjects();
    probeTenant("other");
    threeWayCheck("mapped", 20_000);
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    assertThat(assertWarmUps(second, 2, "savepoint")).filteredOn(e -> e.startMode().equals("savepoint"))
        .allSatisfy(e -> assertThat(e.gapCheck()).as("the slot was dropped: %s", e).isEqualTo("gap"));
  }

  /** A location of {@code tenant} on the two tenants' zones: it enters its own tenant's only. */
  private void probeTenant(String tenant) throws Exception {
    Location probe = new Location("probe-" + tenant, nextLocationTime(), 50.5, 20.5, tenant);
    // The oracle knows no tenants, and not these zones: it expects this ENTER only.
    write(List.of(probe));
    expected.add(probe.objectId + " " + tenant + "-zone ENTER " + probe.timestamp);
    inside.put(probe.objectId, new HashSet<>(Set.of(tenant + "-zone")));
  }

  /**
   * Every kind of bad fence of docs/design.md#bad-input the column type lets through (PostGIS
   * parses what it stores, so unparseable bytes, NaN and open rings reach only a bytea column), a
   * bad reshape of a live fence (its old shape must stay in force), and a bow-tie the job repairs
   * and uses. Returns the dead letters they must cause.
   */
  private List<String> insertBadFences() throws Exception {
    List<String> letters = new ArrayList<>();
    Map<String, String> wkt = new java.util.LinkedHashMap<>();
    wkt.put("bad-empty EMPTY", "POLYGON EMPTY");
    wkt.put("bad-point NOT_AREAL", "POINT (1 1)");
    wkt.put("bad-line NOT_AREAL", "LINESTRING (0 0, 1 1)");
    wkt.put("bad-range OUT_OF_RANGE_COORDINATE", "POLYGON ((179 0, 181 0, 180 1, 179 0))");
    for (Map.Entry<String, String> e : wkt.entrySet()) {
      String[] idAndReason = e.getKey().split(" ");
      insertRaw(idAndReason[0], e.getValue(), new WKBWriter().write(new org.locationtech.jts.io.WKTReader().read(e.getValue())));
      letters.add("fence " + idAndReason[0] + " ERROR " + idAndReason[1]);
    }
    if (!postgis) {
      insertRaw("bad-bytes", null, new byte[] {1, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0});
      insertRaw("bad-nan", null, polygonWkb(0, 0, Double.NaN, 1, 1, 1, 0, 0));
      insertRaw("bad-open", null, polygonWkb(0, 0, 1, 0, 1, 1, 0, 1));
      letters.addAll(List.of("fence bad-bytes ERROR UNPARSEABLE", "fence bad-nan ERROR NON_FINITE_COORDINATE",
          "fence bad-open ERROR RING_NOT_CLOSED"));
    }
    // A bad reshape of a live fence: refused, the old shape stays (the oracle keeps it too).
    updateRaw("fence-20", "POINT (5 5)", new WKBWriter().write(JTS.createPoint(new Coordinate(5, 5))));
    letters.add("fence fence-20 ERROR NOT_AREAL");
    // A bow-tie where objects roam: repaired, used, and reported as a warning.
    Geometry bowTie = new org.locationtech.jts.io.WKTReader().read("POLYGON ((2 2, 8 8, 8 2, 2 8, 2 2))");
    insertRaw("bowtie", bowTie.toText(), new WKBWriter().write(bowTie));
    fences.put("bowtie", org.locationtech.jts.geom.util.GeometryFixer.fix(bowTie));
    letters.add("fence bowtie WARNING REPAIRED");
    return letters;
  }

  private List<String> deadLetters() throws Exception {
    List<String> rows = new ArrayList<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT source, key, severity, reason FROM geofence_dead_letters")) {
      while (r.next()) {
        rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + r.getString(4));
      }
    }
    return rows;
  }
}
