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
 * What the end-to-end cases share: a Flink MiniCluster, a PostgreSQL with logical replication, the
 * job wired to them, a fence and location history written through SQL and files, and an oracle
 * (JTS) that evaluates the same history as DESIGN section 5 defines it.
 */
abstract class EndToEndFixture {

  @RegisterExtension
  static final MiniClusterExtension FLINK = new MiniClusterExtension(
      new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4).build());

  static EmbeddedPostgres postgres;
  static final GeometryFactory JTS = new GeometryFactory();

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
  final Map<String, Geometry> fences = new HashMap<>();
  private int sentinels;

  /** Whether the fences table stores PostGIS geometry (else WKB in bytea). */
  boolean postgis;
  /** The database password ("" for the embedded server). */
  String password = "";

  /** The triggers the oracle expects: object, fence, kind, and event time or "delete". */
  final Set<String> expected = new TreeSet<>();

  // ---- the job ----------------------------------------------------------------------------------

  JobClient start(String url, String slot, Path inbox, int parallelism, String stateBackend) throws Exception {
    return start(url, slot, inbox, parallelism, stateBackend, null);
  }

  /** Starts the job, restoring from {@code savepoint} unless it is null. */
  JobClient start(String url, String slot, Path inbox, int parallelism, String stateBackend, String savepoint) throws Exception {
    Configuration config = new Configuration();
    if (savepoint != null) {
      config.set(org.apache.flink.configuration.StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
    }
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
            JdbcOutputs.heartbeats(sink, FenceSource.heartbeatSql(FenceTableColumns.defaults())), Duration.ofMillis(300),
            source),
        JobSettings.builder().locationIdleness(Duration.ofSeconds(2)).build());
    return env.executeAsync("geofence-it");
  }

  /**
   * Waits until the job evaluates locations against the streamed fences: a new sentinel object
   * enters a sentinel fence; the object stays inside it. The fence clock moves only with stream
   * records, which come after the initial snapshot, so the ENTER proves the snapshot is loaded.
   * (Locations older than the snapshot can only be evaluated against it.)
   */
  String awaitStreaming(Connection db, String slot, Path inbox) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (queryLong(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'") == 0) {
      if (System.currentTimeMillis() > deadline) {
        throw new AssertionError("the CDC source never created its slot");
      }
      Thread.sleep(200);
    }
    if (!fences.containsKey("sentinel")) {
      upsertFence(db, "sentinel", JTS.toGeometry(new org.locationtech.jts.geom.Envelope(100, 101, 50, 51)));
    }
    String object = "sentinel-" + sentinels++;
    long t = queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") + 50;
    writeLines(inbox, List.of(LocationJson.format(new Location(object, t, 100.5, 50.5, null))));
    expected.add(object + " sentinel ENTER " + t);
    while (queryLong(db, "SELECT count(*) FROM geofence_triggers WHERE object_id = '" + object + "'") == 0) {
      if (System.currentTimeMillis() > deadline) {
        throw new AssertionError("the job never evaluated the sentinel location");
      }
      Thread.sleep(200);
    }
    return object;
  }

  // ---- history ------------------------------------------------------------------------------------

  /**
   * Twenty objects, ten steps each, timestamped after every fence edit so far has committed; the
   * oracle's membership map is advanced as the job's should be.
   */
  List<Location> moveObjects(Connection db, Path inbox, SplittableRandom random, int phase, Map<String, Set<String>> inside)
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

  void upsertFence(Connection db, String id, Geometry shape) throws Exception {
    try (PreparedStatement s = db.prepareStatement("INSERT INTO fences (id, geom) VALUES (?, " + geometryParameter()
        + ") ON CONFLICT (id) DO UPDATE SET geom = excluded.geom")) {
      s.setString(1, id);
      s.setBytes(2, new WKBWriter().write(shape));
      s.execute();
    }
    fences.put(id, shape);
  }

  void deleteFence(Connection db, String id) throws Exception {
    try (PreparedStatement s = db.prepareStatement("DELETE FROM fences WHERE id = ?")) {
      s.setString(1, id);
      s.execute();
    }
    fences.put(id, null);
  }

  String geometryParameter() {
    return postgis ? "ST_GeomFromWKB(?, 4326)" : "?";
  }

  /** A bad geometry: WKT for PostGIS (which parses what it stores), raw bytes for bytea. */
  void insertRaw(Connection db, String id, String wkt, byte[] wkb) throws Exception {
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

  void updateRaw(Connection db, String id, String wkt, byte[] wkb) throws Exception {
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

  static void writeLines(Path inbox, List<String> lines) throws Exception {
    Path staged = Files.createTempFile(inbox.getParent(), "locations", ".jsonl");
    Files.write(staged, lines);
    Files.move(staged, inbox.resolve(staged.getFileName()), StandardCopyOption.ATOMIC_MOVE);
  }

  /** Waits until the database clock is past every location so far, so later edits come after them. */
  static void awaitClockPast(Connection db, List<Location> locations) throws Exception {
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
  void evaluate(List<Location> locations, Map<String, Set<String>> inside) {
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

  Set<String> awaitTriggers(Connection db, int count) throws Exception {
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

  Set<String> awaitStable(Connection db, Set<String> rows) throws Exception {
    Set<String> again = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT object_id, fence_id, kind, lon IS NULL, (extract(epoch FROM event_time) * 1000)::bigint FROM geofence_triggers")) {
      while (r.next()) {
        again.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + (r.getBoolean(4) ? "delete" : r.getLong(5)));
      }
    }
    return again;
  }

  static Set<String> presence(Connection db) throws Exception {
    Set<String> rows = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT object_id, fence_id FROM geofence_presence")) {
      while (r.next()) {
        rows.add(r.getString(1) + " " + r.getString(2));
      }
    }
    return rows;
  }

  static Set<String> flatten(Map<String, Set<String>> inside) {
    Set<String> rows = new TreeSet<>();
    inside.forEach((object, fenceIds) -> fenceIds.forEach(f -> rows.add(object + " " + f)));
    return rows;
  }

  static long queryLong(Connection db, String sql) throws Exception {
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  static Geometry star(SplittableRandom random, double cx, double cy, double radius) {
    return GeneratedFences.star(random, cx, cy, radius, 6 + random.nextInt(40));
  }

  /** Creates fences {@code from} to {@code to - 1}, or reshapes and moves them. */
  void placeFences(Connection db, SplittableRandom random, int from, int to) throws Exception {
    for (int i = from; i < to; i++) {
      upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
    }
  }

  /** Deletes fences {@code from} to {@code to - 1}; objects inside them are expected to EXIT. */
  void deleteFences(Connection db, int from, int to, Map<String, Set<String>> inside) throws Exception {
    for (int i = from; i < to; i++) {
      for (Map.Entry<String, Set<String>> e : inside.entrySet()) {
        if (e.getValue().remove("fence-" + i)) {
          expected.add(e.getKey() + " fence-" + i + " EXIT delete");
        }
      }
      deleteFence(db, "fence-" + i);
    }
  }

  /** Creates fences {@code from} to {@code to - 1}, or re-creates them after a delete. */
  void createFences(Connection db, SplittableRandom random, int from, int to) throws Exception {
    for (int i = from; i < to; i++) {
      upsertFence(db, "fence-" + i, star(random, random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble()));
    }
  }

  /** A fresh database named {@code name} on the server, with the source and output migrations. */
  static String createDatabase(String serverUrl, String password, String name, boolean postgis) throws Exception {
    try (Connection admin = java.sql.DriverManager.getConnection(serverUrl, "postgres", password); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + name);
    }
    String url = serverUrl.substring(0, serverUrl.lastIndexOf('/') + 1) + name;
    try (Connection db = java.sql.DriverManager.getConnection(url, "postgres", password)) {
      Migrations.applySource(db, postgis ? Migrations.GeometryColumn.POSTGIS : Migrations.GeometryColumn.WKB);
      Migrations.applyOutputs(db);
    }
    return url;
  }

  static String embeddedServerUrl() {
    return "jdbc:postgresql://localhost:" + postgres.getPort() + "/postgres";
  }
}
