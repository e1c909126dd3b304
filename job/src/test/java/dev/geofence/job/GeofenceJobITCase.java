package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.sink.JdbcOutputs;
import dev.geofence.connectors.source.Migrations;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeSet;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
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
  @CsvSource({"1, hashmap, wkb", "3, rocksdb, wkb", "2, hashmap, postgis"})
  void triggersPresenceAndDeadLettersMatchTheOracle(int parallelism, String stateBackend, String column) throws Exception {
    postgis = column.equals("postgis");
    String server = embeddedServerUrl();
    if (postgis) {
      server = System.getenv(POSTGIS_URL);
      assertThat(server).as("%s must name a PostgreSQL with PostGIS and wal_level=logical, user postgres/postgres"
          + " (bash .ci/postgis.sh starts one: jdbc:postgresql://127.0.0.1:55432/postgres)", POSTGIS_URL).isNotBlank();
      password = "postgres";
    }
    String url = createDatabase(server, password, "geofence_" + column + "_p" + parallelism, postgis);
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", password)) {
      SplittableRandom random = new SplittableRandom(parallelism);
      placeFences(db, random, 0, 40);

      // Deleted before the job starts and re-created while it runs: the snapshot must know the
      // tombstone's seq, or the re-creation looks like a lost edit.
      deleteFence(db, "fence-39");

      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      JobClient job = start(url, "slot_" + column + "_p" + parallelism, inbox, parallelism, stateBackend);
      try {
        String sentinel = awaitStreaming(db, "slot_" + column + "_p" + parallelism, inbox);
        List<Location> all = new ArrayList<>();
        Map<String, Set<String>> inside = new HashMap<>();

        // Phase 1: objects move through the initial fences.
        all.addAll(moveObjects(db, inbox, random, 1, inside));
        // Phase 2: reshape some fences, delete some (objects inside must EXIT), add some, and
        // send bad input: a bad new fence, a bad reshape (the old shape stays), a bad location.
        awaitClockPast(db, all);
        placeFences(db, random, 0, 8);
        deleteFences(db, 8, 14, inside);
        createFences(db, random, 39, 46);
        List<String> expectedLetters = insertBadFences(db);
        writeLines(inbox, List.of("{\"object_id\": \"o-bad\", \"ts\": \"yesterday\", \"lon\": 1, \"lat\": 1}", "not json at all"));
        all.addAll(moveObjects(db, inbox, random, 2, inside));

        Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
        assertThat(expected).as("the history exercises every kind of trigger")
            .anyMatch(t -> t.contains(" ENTER ")).anyMatch(t -> t.endsWith(" EXIT delete"))
            .anyMatch(t -> t.contains(" EXIT ") && !t.endsWith("delete"));
        inside.put(sentinel, Set.of("sentinel"));
        assertThat(presence(db)).isEqualTo(flatten(inside));
        expectedLetters.addAll(List.of("location o-bad ERROR BAD_TIMESTAMP", "location null ERROR MALFORMED_JSON"));
        assertThat(deadLetters(db, expectedLetters.size())).containsExactlyInAnyOrderElementsOf(expectedLetters);
      } finally {
        job.cancel().get();
      }
    }
  }

  /**
   * Every kind of bad fence of DESIGN section 9 the column type lets through (PostGIS parses what
   * it stores, so unparseable bytes, NaN and open rings reach only a bytea column), a bad reshape
   * of a live fence (its old shape must stay in force), and a bow-tie the job repairs and uses.
   * Returns the dead letters they must cause.
   */
  private List<String> insertBadFences(Connection db) throws Exception {
    List<String> letters = new ArrayList<>();
    Map<String, String> wkt = new java.util.LinkedHashMap<>();
    wkt.put("bad-empty EMPTY", "POLYGON EMPTY");
    wkt.put("bad-point NOT_AREAL", "POINT (1 1)");
    wkt.put("bad-line NOT_AREAL", "LINESTRING (0 0, 1 1)");
    wkt.put("bad-range OUT_OF_RANGE_COORDINATE", "POLYGON ((179 0, 181 0, 180 1, 179 0))");
    for (Map.Entry<String, String> e : wkt.entrySet()) {
      String[] idAndReason = e.getKey().split(" ");
      insertRaw(db, idAndReason[0], e.getValue(), new WKBWriter().write(new org.locationtech.jts.io.WKTReader().read(e.getValue())));
      letters.add("fence " + idAndReason[0] + " ERROR " + idAndReason[1]);
    }
    if (!postgis) {
      insertRaw(db, "bad-bytes", null, new byte[] {1, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0});
      insertRaw(db, "bad-nan", null, polygonWkb(0, 0, Double.NaN, 1, 1, 1, 0, 0));
      insertRaw(db, "bad-open", null, polygonWkb(0, 0, 1, 0, 1, 1, 0, 1));
      letters.addAll(List.of("fence bad-bytes ERROR UNPARSEABLE", "fence bad-nan ERROR NON_FINITE_COORDINATE",
          "fence bad-open ERROR RING_NOT_CLOSED"));
    }
    // A bad reshape of a live fence: refused, the old shape stays (the oracle keeps it too).
    updateRaw(db, "fence-20", "POINT (5 5)", new WKBWriter().write(JTS.createPoint(new Coordinate(5, 5))));
    letters.add("fence fence-20 ERROR NOT_AREAL");
    // A bow-tie where objects roam: repaired, used, and reported as a warning.
    Geometry bowTie = new org.locationtech.jts.io.WKTReader().read("POLYGON ((2 2, 8 8, 8 2, 2 8, 2 2))");
    insertRaw(db, "bowtie", bowTie.toText(), new WKBWriter().write(bowTie));
    fences.put("bowtie", org.locationtech.jts.geom.util.GeometryFixer.fix(bowTie));
    letters.add("fence bowtie WARNING REPAIRED");
    return letters;
  }

  /** Little-endian WKB of a one-ring polygon, written by hand so that it can be malformed. */
  private static byte[] polygonWkb(double... xy) {
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(13 + 8 * xy.length).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    b.put((byte) 1).putInt(3).putInt(1).putInt(xy.length / 2);
    for (double v : xy) {
      b.putDouble(v);
    }
    return b.array();
  }

  private static List<String> deadLetters(Connection db, int expected) throws Exception {
    long deadline = System.currentTimeMillis() + 30_000;
    List<String> rows = new ArrayList<>();
    while (System.currentTimeMillis() < deadline) {
      rows.clear();
      try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT source, key, severity, reason FROM geofence_dead_letters")) {
        while (r.next()) {
          rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + r.getString(4));
        }
      }
      if (rows.size() >= expected) {
        break;
      }
      Thread.sleep(300);
    }
    return rows;
  }

}
