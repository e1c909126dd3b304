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
class GeofenceJobITCase {

  @RegisterExtension
  static final MiniClusterExtension FLINK = new MiniClusterExtension(
      new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

  private static EmbeddedPostgres postgres;
  private static final GeometryFactory JTS = new GeometryFactory();

  @TempDir Path temp;

  @BeforeAll
  static void startPostgres() throws Exception {
    postgres = EmbeddedPostgres.builder()
        .setServerConfig("wal_level", "logical")
        .setServerConfig("max_replication_slots", "10")
        .setServerConfig("max_wal_senders", "10")
        .start();
  }

  @AfterAll
  static void stopPostgres() throws Exception {
    postgres.close();
  }

  /** What the oracle knows of a fence: its JTS shape, or null once deleted. */
  private final Map<String, Geometry> fences = new HashMap<>();
  /** The triggers the oracle expects: object, fence, kind, and event time or "delete". */
  private final Set<String> expected = new TreeSet<>();

  /**
   * The PostGIS server the PostGIS case runs against: {@code .ci/postgis.sh} starts one and CI sets
   * this variable. Without it the case fails, never skips.
   */
  static final String POSTGIS_URL = "GEOFENCE_POSTGIS_URL";

  private boolean postgis;
  private String password;

  @ParameterizedTest(name = "parallelism {0}, {1}, {2}")
  @CsvSource({"1, hashmap, wkb", "3, rocksdb, wkb", "2, hashmap, postgis"})
  void triggersPresenceAndDeadLettersMatchTheOracle(int parallelism, String stateBackend, String column) throws Exception {
    postgis = column.equals("postgis");
    String database = "geofence_" + column + "_p" + parallelism;
    String server;
    String password;
    if (postgis) {
      server = System.getenv(POSTGIS_URL);
      assertThat(server).as("%s must name a PostgreSQL with PostGIS and wal_level=logical, user postgres/postgres"
          + " (bash .ci/postgis.sh starts one: jdbc:postgresql://127.0.0.1:55432/postgres)", POSTGIS_URL).isNotBlank();
      password = "postgres";
    } else {
      server = "jdbc:postgresql://localhost:" + postgres.getPort() + "/postgres";
      password = "";
    }
    try (Connection admin = java.sql.DriverManager.getConnection(server, "postgres", password); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + database);
    }
    String url = server.substring(0, server.lastIndexOf('/') + 1) + database;
    this.password = password;
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", password)) {
      Migrations.applySource(db, postgis ? Migrations.GeometryColumn.POSTGIS : Migrations.GeometryColumn.WKB);
      Migrations.applyOutputs(db);
      SplittableRandom random = new SplittableRandom(parallelism);
      for (int i = 0; i < 40; i++) {
        upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
      }

      Path inbox = Files.createDirectories(temp.resolve("inbox"));
      JobClient job = start(url, "slot_" + column + "_p" + parallelism, inbox, parallelism, stateBackend);
      try {
        awaitStreaming(db, "slot_" + column + "_p" + parallelism, inbox);
        List<Location> all = new ArrayList<>();
        Map<String, Set<String>> inside = new HashMap<>();

        // Phase 1: objects move through the initial fences.
        all.addAll(moveObjects(db, inbox, random, 1, inside));
        // Phase 2: reshape some fences, delete some (objects inside must EXIT), add some, and
        // send bad input: a bad new fence, a bad reshape (the old shape stays), a bad location.
        awaitClockPast(db, all);
        for (int i = 0; i < 8; i++) {
          upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
        }
        for (int i = 8; i < 14; i++) {
          for (Map.Entry<String, Set<String>> e : inside.entrySet()) {
            if (e.getValue().remove("fence-" + i)) {
              expected.add(e.getKey() + " fence-" + i + " EXIT delete");
            }
          }
          deleteFence(db, "fence-" + i);
        }
        for (int i = 40; i < 46; i++) {
          upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble()));
        }
        List<String> expectedLetters = insertBadFences(db);
        writeLines(inbox, List.of("{\"object_id\": \"o-bad\", \"ts\": \"yesterday\", \"lon\": 1, \"lat\": 1}", "not json at all"));
        all.addAll(moveObjects(db, inbox, random, 2, inside));

        Set<String> actual = awaitTriggers(db, expected.size());
        assertThat(actual).containsExactlyInAnyOrderElementsOf(expected);
        assertThat(expected).as("the history exercises every kind of trigger")
            .anyMatch(t -> t.contains(" ENTER ")).anyMatch(t -> t.endsWith(" EXIT delete"))
            .anyMatch(t -> t.contains(" EXIT ") && !t.endsWith("delete"));
        inside.put("sentinel", Set.of("sentinel"));
        assertThat(presence(db)).isEqualTo(flatten(inside));
        expectedLetters.addAll(List.of("location o-bad ERROR BAD_TIMESTAMP", "location null ERROR MALFORMED_JSON"));
        assertThat(deadLetters(db, expectedLetters.size())).containsExactlyInAnyOrderElementsOf(expectedLetters);
      } finally {
        job.cancel().get();
      }
    }
  }

  // ---- the job ----------------------------------------------------------------------------------

  private JobClient start(String url, String slot, Path inbox, int parallelism, String stateBackend) throws Exception {
    Configuration config = new Configuration();
    config.set(StateBackendOptions.STATE_BACKEND, stateBackend);
    config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, temp.resolve("checkpoints").toUri().toString());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
    env.setParallelism(parallelism);
    env.enableCheckpointing(1000);
    FenceSourceOptions source = FenceSourceOptions.builder()
        .url(url).username("postgres").password(password).slotName(slot).heartbeatInterval(Duration.ofMillis(300)).build();
    JdbcConnectionOptions sink = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(url).withUsername("postgres").withPassword(password).withDriverName("org.postgresql.Driver").build();
    JdbcExecutionOptions batches = JdbcExecutionOptions.builder().withBatchSize(100).withBatchIntervalMs(200).build();
    GeofenceJob.build(env,
        new GeofenceJob.Endpoints(
            FenceSource.create(source),
            LocationSources.files(inbox.toString(), Duration.ofMillis(200)),
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.heartbeats(sink, FenceSource.heartbeatSql(FenceTableColumns.defaults())), Duration.ofMillis(300)),
        JobSettings.builder().locationIdleness(Duration.ofSeconds(2)).build());
    return env.executeAsync("geofence-it");
  }

  /**
   * Waits until the job evaluates locations against the streamed fences: a sentinel object enters
   * a sentinel fence. The fence clock moves only with stream records, which come after the initial
   * snapshot, so the ENTER proves the snapshot is loaded. (Locations older than the snapshot can
   * only be evaluated against it.)
   */
  private void awaitStreaming(Connection db, String slot, Path inbox) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (queryLong(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == 0) {
      if (System.currentTimeMillis() > deadline) {
        throw new AssertionError("the CDC source never created its slot");
      }
      Thread.sleep(200);
    }
    upsertFence(db, "sentinel", JTS.toGeometry(new org.locationtech.jts.geom.Envelope(100, 101, 50, 51)));
    long t = queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") + 50;
    writeLines(inbox, List.of(LocationJson.format(new Location("sentinel", t, 100.5, 50.5, null))));
    expected.add("sentinel sentinel ENTER " + t);
    while (queryLong(db, "SELECT count(*) FROM geofence_triggers WHERE object_id = 'sentinel'") == 0) {
      if (System.currentTimeMillis() > deadline) {
        throw new AssertionError("the job never evaluated the sentinel location");
      }
      Thread.sleep(200);
    }
  }

  // ---- history ------------------------------------------------------------------------------------

  /**
   * Twenty objects, ten steps each, timestamped after every fence edit so far has committed; the
   * oracle's membership map is advanced as the job's should be.
   */
  private List<Location> moveObjects(Connection db, Path inbox, SplittableRandom random, int phase, Map<String, Set<String>> inside)
      throws Exception {
    long start = queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") + 50;
    List<Location> locations = new ArrayList<>();
    List<String> lines = new ArrayList<>();
    for (int step = 0; step < 10; step++) {
      for (int o = 0; o < 20; o++) {
        Location l = new Location("object-" + o, start + step * 10 + o % 7, random.nextDouble(-0.5, 10.5), random.nextDouble(-0.5, 10.5), null);
        locations.add(l);
        lines.add(LocationJson.format(l));
      }
    }
    writeLines(inbox, lines);
    evaluate(locations, inside);
    return locations;
  }

  private void upsertFence(Connection db, String id, Geometry shape) throws Exception {
    try (PreparedStatement s = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, " + geometryParameter()
        + ") ON CONFLICT (id) DO UPDATE SET geom = excluded.geom")) {
      s.setString(1, id);
      s.setBytes(2, new WKBWriter().write(shape));
      s.execute();
    }
    fences.put(id, shape);
  }

  private void deleteFence(Connection db, String id) throws Exception {
    try (PreparedStatement s = db.prepareStatement("DELETE FROM fences WHERE id = ?")) {
      s.setString(1, id);
      s.execute();
    }
    fences.put(id, null);
  }

  private String geometryParameter() {
    return postgis ? "ST_GeomFromWKB(?, 4326)" : "?";
  }

  /** A bad geometry: WKT for PostGIS (which parses what it stores), raw bytes for bytea. */
  private void insertRaw(Connection db, String id, String wkt, byte[] wkb) throws Exception {
    try (PreparedStatement s = db.prepareStatement(
        "INSERT INTO fences (id, geom) VALUES (?, " + (postgis ? "ST_GeomFromText(?, 4326)" : "?") + ")")) {
      s.setString(1, id);
      if (postgis) {
        s.setString(2, wkt);
      } else {
        s.setBytes(2, wkb);
      }
      s.execute();
    }
  }

  private void updateRaw(Connection db, String id, String wkt, byte[] wkb) throws Exception {
    try (PreparedStatement s = db.prepareStatement(
        "UPDATE fences SET geom = " + (postgis ? "ST_GeomFromText(?, 4326)" : "?") + " WHERE id = ?")) {
      if (postgis) {
        s.setString(1, wkt);
      } else {
        s.setBytes(1, wkb);
      }
      s.setString(2, id);
      s.execute();
    }
  }

  private static void writeLines(Path inbox, List<String> lines) throws Exception {
    Path staged = Files.createTempFile(inbox.getParent(), "locations", ".jsonl");
    Files.write(staged, lines);
    Files.move(staged, inbox.resolve(staged.getFileName()), StandardCopyOption.ATOMIC_MOVE);
  }

  /** Waits until the database clock is past every location so far, so later edits come after them. */
  private static void awaitClockPast(Connection db, List<Location> locations) throws Exception {
    long last = locations.stream().mapToLong(l -> l.timestamp).max().orElse(0);
    while (queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") <= last + 10) {
      Thread.sleep(20);
    }
  }

  // ---- the oracle ---------------------------------------------------------------------------------

  /**
   * The oracle: evaluates locations in time order against the fences in force (JTS covers) and
   * keeps each object's membership, as DESIGN section 5 defines ENTER and EXIT.
   */
  private void evaluate(List<Location> locations, Map<String, Set<String>> inside) {
    Map<String, PreparedGeometry> prepared = new HashMap<>();
    fences.forEach((id, shape) -> {
      if (shape != null) {
        prepared.put(id, PreparedGeometryFactory.prepare(shape));
      }
    });
    List<Location> ordered = new ArrayList<>(locations);
    ordered.sort((a, b) -> Long.compare(a.timestamp, b.timestamp));
    for (Location l : ordered) {
      Set<String> now = new HashSet<>();
      prepared.forEach((id, fence) -> {
        if (fence.covers(JTS.createPoint(new Coordinate(l.lon, l.lat)))) {
          now.add(id);
        }
      });
      Set<String> before = inside.getOrDefault(l.objectId, Set.of());
      now.stream().filter(f -> !before.contains(f)).forEach(f -> expected.add(l.objectId + " " + f + " ENTER " + l.timestamp));
      before.stream().filter(f -> !now.contains(f)).forEach(f -> expected.add(l.objectId + " " + f + " EXIT " + l.timestamp));
      inside.put(l.objectId, now);
    }
  }

  private Set<String> awaitTriggers(Connection db, int count) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    Set<String> rows = new TreeSet<>();
    while (System.currentTimeMillis() < deadline) {
      rows.clear();
      try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
          "SELECT object_id, fence_id, kind, lon IS NULL, (extract(epoch FROM event_time) * 1000)::bigint FROM geofence_triggers")) {
        while (r.next()) {
          rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + (r.getBoolean(4) ? "delete" : r.getLong(5)));
        }
      }
      if (rows.size() >= count) {
        Thread.sleep(1000); // and no more than that
        return awaitStable(db, rows);
      }
      Thread.sleep(300);
    }
    return rows;
  }

  private Set<String> awaitStable(Connection db, Set<String> rows) throws Exception {
    Set<String> again = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT object_id, fence_id, kind, lon IS NULL, (extract(epoch FROM event_time) * 1000)::bigint FROM geofence_triggers")) {
      while (r.next()) {
        again.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + (r.getBoolean(4) ? "delete" : r.getLong(5)));
      }
    }
    return again;
  }

  private static Set<String> presence(Connection db) throws Exception {
    Set<String> rows = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT object_id, fence_id FROM geofence_presence")) {
      while (r.next()) {
        rows.add(r.getString(1) + " " + r.getString(2));
      }
    }
    return rows;
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

  private static Set<String> flatten(Map<String, Set<String>> inside) {
    Set<String> rows = new TreeSet<>();
    inside.forEach((object, fenceIds) -> fenceIds.forEach(f -> rows.add(object + " " + f)));
    return rows;
  }

  private static long queryLong(Connection db, String sql) throws Exception {
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  private static Geometry star(SplittableRandom random, double cx, double cy, double radius) {
    int n = 6 + random.nextInt(40);
    Coordinate[] ring = new Coordinate[n + 1];
    for (int i = 0; i < n; i++) {
      double angle = 2 * Math.PI * (i + 0.8 * random.nextDouble()) / n;
      double r = radius * (0.4 + 0.6 * random.nextDouble());
      ring[i] = new Coordinate(cx + r * Math.cos(angle), cy + r * Math.sin(angle));
    }
    ring[n] = ring[0].copy();
    return JTS.createPolygon(ring);
  }
}
