package dev.geofence.job;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.sink.JdbcOutputs;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
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
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
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
      new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4)
          .setConfiguration(metricsEverySecond()).build());

  private static Configuration metricsEverySecond() {
    Configuration config = new Configuration();
    config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
    return config;
  }

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
  /** The database user and password the job runs with ("" for the embedded server's postgres). */
  String user = "postgres";
  String password = "";
  /** Start without a CDC snapshot, streaming from the slot (restoring a bootstrapped savepoint). */
  boolean streamFromSlot;
  /** Where the triggers also go (a Kafka topic), or null. */
  Sink<GeofenceTrigger> triggersTopic;
  long checkpointIntervalMs = 1000;

  /** The triggers the oracle expects: object, fence, kind, and event time or "delete". */
  final Set<String> expected = new TreeSet<>();

  // ---- the job ----------------------------------------------------------------------------------

  JobClient start(String url, String slot, Path inbox, int parallelism, String stateBackend) throws Exception {
    return start(url, slot, inbox, parallelism, stateBackend, null);
  }

  /** Starts the job, restoring from {@code savepoint} unless it is null. */
  JobClient start(String url, String slot, Path inbox, int parallelism, String stateBackend, String savepoint) throws Exception {
    return start(url, url, slot, inbox, parallelism, stateBackend, savepoint);
  }

  /** Starts the job reading fences from {@code sourceUrl} and writing its tables to {@code url}. */
  JobClient start(String url, String sourceUrl, String slot, Path inbox, int parallelism, String stateBackend, String savepoint)
      throws Exception {
    Configuration config = new Configuration();
    if (savepoint != null) {
      config.set(org.apache.flink.configuration.StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
    }
    config.set(StateBackendOptions.STATE_BACKEND, stateBackend);
    config.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, stateBackend.equals("rocksdb"));
    config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, temp.resolve("checkpoints").toUri().toString());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
    env.setParallelism(parallelism);
    env.enableCheckpointing(checkpointIntervalMs);
    FenceSourceOptions source = FenceSourceOptions.builder()
        .url(sourceUrl).username(user).password(password).slotName(slot).heartbeatInterval(Duration.ofMillis(300))
        .streamFromSlot(streamFromSlot).build();
    JdbcConnectionOptions sink = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(url).withUsername(user).withPassword(password).withDriverName("org.postgresql.Driver").build();
    JdbcExecutionOptions batches = JdbcExecutionOptions.builder().withBatchSize(1000).withBatchIntervalMs(200).build();
    GeofenceJob.Endpoints endpoints =
        new GeofenceJob.Endpoints(
            FenceSource.create(source),
            LocationSources.files(inbox.toString(), Duration.ofMillis(200)),
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.hydrationHistory(sink, JdbcExecutionOptions.builder().withBatchSize(1).build(), GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
            JdbcOutputs.heartbeats(sink, FenceSource.heartbeatSql(FenceTableColumns.defaults())), Duration.ofMillis(300),
            source);
    if (triggersTopic != null) {
      endpoints = endpoints.withTriggersTopic(triggersTopic);
    }
    GeofenceJob.build(env, endpoints, JobSettings.builder().locationIdleness(Duration.ofSeconds(2)).build());
    return env.executeAsync("geofence-it");
  }

  /**
   * Stops the job with a savepoint and waits until its CDC source has let go of the slot, so that
   * edits made next can only reach a restored job through its catch-up.
   */
  String stopWithSavepoint(JobClient job) throws Exception {
    String savepoint = job.stopWithSavepoint(false, temp.resolve("savepoints").toUri().toString()).get();
    assertThat(Path.of(java.net.URI.create(savepoint))).exists();
    long deadline = System.currentTimeMillis() + 30_000;
    try (Connection db = java.sql.DriverManager.getConnection(embeddedServerUrl(), "postgres", password)) {
      while (queryLong(db, "SELECT count(*) FROM pg_replication_slots WHERE active") > 0) {
        assertThat(System.currentTimeMillis()).as("the stopped job never released its slot").isLessThan(deadline);
        Thread.sleep(100);
      }
    }
    return savepoint;
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

  // ---- the three-way comparison ---------------------------------------------------------------------

  /**
   * Checks the job's index three ways over {@code points} random query points: each point is a new
   * object, so the job ENTERs every fence its index says covers it; those sets must equal both a
   * fresh rebuild (the fences read from the database now, indexed anew) and the oracle (JTS covers
   * over the shapes this test wrote). Run after the job has caught up with every edit.
   */
  void threeWayCheck(Connection db, Path inbox, String tag, int points) throws Exception {
    long t = queryLong(db, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") + 50;
    SplittableRandom random = new SplittableRandom(tag.hashCode());
    List<Location> queries = new ArrayList<>(points);
    List<String> lines = new ArrayList<>(points);
    for (int i = 0; i < points; i++) {
      Location l = new Location("q-" + tag + "-" + i, t, random.nextDouble(-1, 11), random.nextDouble(-1, 11), null);
      queries.add(l);
      lines.add(LocationJson.format(l));
    }
    writeLines(inbox, lines);

    FenceIndex rebuilt = new FenceIndex();
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    try (Connection read = java.sql.DriverManager.getConnection(db.getMetaData().getURL(), "postgres", password)) {
      BucketRead.read(read, FenceTableColumns.defaults(), 1, 0, 0, change -> {
        if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
          try {
            rebuilt.upsert(change.fenceId, change.tenant, reader.readWkb(change.geometryBytes).geometry());
          } catch (Exception e) {
            throw new AssertionError("fence " + change.fenceId + " does not decode", e);
          }
        }
      });
    }
    Map<String, PreparedGeometry> prepared = new HashMap<>();
    fences.forEach((id, shape) -> {
      if (shape != null) {
        prepared.put(id, PreparedGeometryFactory.prepare(shape));
      }
    });
    Set<String> oracle = new TreeSet<>();
    Set<String> fresh = new TreeSet<>();
    for (Location q : queries) {
      org.locationtech.jts.geom.Point point = JTS.createPoint(new Coordinate(q.lon, q.lat));
      prepared.forEach((id, fence) -> {
        if (fence.covers(point)) {
          oracle.add(q.objectId + " " + id);
          expected.add(q.objectId + " " + id + " ENTER " + t);
        }
      });
      rebuilt.covering(q.lon, q.lat, null).forEach(id -> fresh.add(q.objectId + " " + id));
    }
    assertThat(fresh).as("a fresh rebuild from the database agrees with the oracle").isEqualTo(oracle);
    Set<String> job = new TreeSet<>();
    long deadline = System.currentTimeMillis() + 120_000;
    while (job.size() < oracle.size() && System.currentTimeMillis() < deadline) {
      Thread.sleep(500);
      job.clear();
      try (PreparedStatement s = db.prepareStatement("SELECT object_id, fence_id FROM geofence_triggers WHERE object_id LIKE ? AND kind = 'ENTER'")) {
        s.setString(1, "q-" + tag + "-%");
        try (ResultSet r = s.executeQuery()) {
          while (r.next()) {
            job.add(r.getString(1) + " " + r.getString(2));
          }
        }
      }
    }
    assertThat(job).as("the job's index answers " + points + " query points as the oracle does").isEqualTo(oracle);
  }

  // ---- hydration history and metrics ------------------------------------------------------------------

  /** One hydration_history row, as the assertions need it. */
  static final class Episode {
    String jobId;
    int subtask;
    int attempt;
    String startMode;
    String gapCheck;
    String gapReason;
    long installedAt;
    long restoredAt;
    long indexedAt;
    long hydratedAt;
    long fencesLoaded;
    long editsReplayed;
    Boolean checksumMatch;
    long peakHeap;

    @Override
    public String toString() {
      return "#" + subtask + "/" + attempt + " " + startMode + " " + gapCheck + " (" + gapReason + ") loaded " + fencesLoaded
          + ", hydrated " + (hydratedAt == 0 ? "no" : (hydratedAt - installedAt) + " ms");
    }
  }

  static List<Episode> episodes(Connection db) throws Exception {
    List<Episode> rows = new ArrayList<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT job_id, subtask, attempt, start_mode, gap_check, gap_reason, " + millis("installed_at") + ", " + millis("restored_at") + ", "
            + millis("indexed_at") + ", " + millis("hydrated_at") + ", fences_loaded, edits_replayed, checksum_match, peak_heap_bytes"
            + " FROM hydration_history ORDER BY installed_at, subtask")) {
      while (r.next()) {
        Episode e = new Episode();
        e.jobId = r.getString(1);
        e.subtask = r.getInt(2);
        e.attempt = r.getInt(3);
        e.startMode = r.getString(4);
        e.gapCheck = r.getString(5);
        e.gapReason = r.getString(6);
        e.installedAt = r.getLong(7);
        e.restoredAt = r.getLong(8);
        e.indexedAt = r.getLong(9);
        e.hydratedAt = r.getLong(10);
        e.fencesLoaded = r.getLong(11);
        e.editsReplayed = r.getLong(12);
        e.checksumMatch = (Boolean) r.getObject(13);
        e.peakHeap = r.getLong(14);
        rows.add(e);
      }
    }
    return rows;
  }

  private static String millis(String column) {
    return "coalesce((extract(epoch FROM " + column + ") * 1000)::bigint, 0)";
  }

  /** Checks a finished episode's timings are in order and plausible, and that it ended ready. */
  static void assertHydrated(Episode e) {
    assertThat(e.hydratedAt).as("hydrated: %s", e).isPositive();
    assertThat(e.checksumMatch).as("checksum match: %s", e).isTrue();
    assertThat(e.hydratedAt - e.installedAt).as("hydration time: %s", e).isBetween(0L, 120_000L);
    if (e.restoredAt != 0) {
      assertThat(e.installedAt).isLessThanOrEqualTo(e.restoredAt);
      assertThat(e.restoredAt).isLessThanOrEqualTo(e.indexedAt);
      assertThat(e.indexedAt).isLessThanOrEqualTo(e.hydratedAt);
    }
    assertThat(e.peakHeap).as("peak heap: %s", e).isPositive();
  }

  /**
   * The sum over the fence index's subtasks of one of its metrics, through Flink's REST API, once
   * Flink has fetched it (-1 if it never does).
   */
  static long metricSum(JobClient job, String metric) throws Exception {
    long deadline = System.currentTimeMillis() + 20_000;
    long sum = fetchMetricSum(job, metric);
    while (sum < 0 && System.currentTimeMillis() < deadline) {
      Thread.sleep(500);
      sum = fetchMetricSum(job, metric);
    }
    return sum;
  }

  private static long fetchMetricSum(JobClient job, String metric) throws Exception {
    Configuration client = FLINK.getClientConfiguration();
    String base = "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT) + "/jobs/" + job.getJobID();
    HttpClient http = HttpClient.newHttpClient();
    ObjectMapper json = new ObjectMapper();
    for (JsonNode vertex : json.readTree(get(http, base)).get("vertices")) {
      if (vertex.get("name").asText().contains("Fence index")) {
        String metrics = base + "/vertices/" + vertex.get("id").asText() + "/subtasks/metrics";
        for (JsonNode m : json.readTree(get(http, metrics))) {
          if (m.get("id").asText().endsWith("." + metric)) {
            JsonNode values = json.readTree(get(http, metrics + "?get=" + m.get("id").asText() + "&agg=sum"));
            return values.size() == 0 ? -1 : values.get(0).get("sum").asLong();
          }
        }
      }
    }
    return -1;
  }

  private static String get(HttpClient http, String url) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body();
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
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT object_id, fence_id FROM geofence_presence WHERE object_id NOT LIKE 'q-%'")) {
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
