package dev.geofence.job.testing;

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
import dev.geofence.job.GeneratedFences;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.JobSettings;
import dev.geofence.job.StateSettings;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.sql.Types;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.scheduler.stopwithsavepoint.StopWithSavepointStoppingException;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateChangelogOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
import org.locationtech.jts.io.WKBWriter;

/**
 * The one setup of the end-to-end cases: a Flink MiniCluster and a PostgreSQL with logical
 * replication (shared by a test class), and per test a database with the migrations, its fences,
 * an inbox of location files (or a Kafka topic of them), the job wired to them, and an oracle (JTS) that evaluates the same
 * history as docs/design.md#time-rules defines it. A test says what happens (place fences, start
 * the job, move objects, stop with a savepoint, ...) and asserts against the oracle; the fixture
 * keeps the history consistent: every fence edit waits until the database clock has passed every
 * location written so far, so the oracle's order is the job's.
 *
 * <p>Nothing waits on a clock. {@link #awaitEvaluated} writes a sentinel location after every
 * other and waits until each subtask of the fence index has evaluated it (it ENTERs a sentinel
 * fence each subtask owns, in both output tables): locations are evaluated in time order per
 * subtask, and the sinks write in order, so from then on the tables hold every trigger and
 * presence change of the locations before it, and nothing later can add one.
 */
public abstract class EndToEndFixture {

  private static final Logger LOG = LoggerFactory.getLogger(EndToEndFixture.class);

  /** How often Flink's REST API fetches the metrics it serves (metrics.fetcher.update-interval). */
  private static final Duration METRIC_FETCH_INTERVAL = Duration.ofMillis(500);

  @RegisterExtension
  public static final MiniClusterExtension FLINK = new MiniClusterExtension(
      new MiniClusterResourceConfiguration.Builder().setNumberTaskManagers(1).setNumberSlotsPerTaskManager(4)
          .setConfiguration(clusterConfiguration()).build());

  /** Far longer than any step takes, even on a loaded two-core machine: the deadline of every wait. */
  public static final Duration PATIENCE = Duration.ofMinutes(2);

  private static Configuration clusterConfiguration() {
    Configuration config = new Configuration();
    config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, METRIC_FETCH_INTERVAL);
    // A test may ask how a checkpoint ended well after it: after a held one, queued checkpoints follow within a second.
    config.set(WebOptions.CHECKPOINTS_HISTORY_SIZE, 1000);
    // The changelog's storage is the TaskManagers' choice: on files, as a cluster must be set up for it.
    config.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "filesystem");
    config.setString("state.changelog.dstl.dfs.base-path",
        Path.of(System.getProperty("java.io.tmpdir"), "geofence-it-changelog-" + UUID.randomUUID()).toUri().toString());
    return config;
  }

  public static EmbeddedPostgres postgres;
  public static final GeometryFactory JTS = new GeometryFactory();
  /** Where the sentinel fences lie, far from where the objects move. */
  private static final Envelope SENTINEL_AREA = new Envelope(100, 101, 50, 51);

  @TempDir public Path temp;

  @BeforeAll
  static void startPostgres() throws Exception {
    postgres = replicationServer().start();
  }

  /** The embedded PostgreSQL the job can stream from, as every case's server is configured. */
  public static EmbeddedPostgres.Builder replicationServer() {
    return EmbeddedPostgres.builder()
        .setServerConfig("wal_level", "logical")
        .setServerConfig("max_replication_slots", "10")
        .setServerConfig("max_wal_senders", "10")
        // So that a test can ask each edit's commit time, which is the time the job sees it at.
        .setServerConfig("track_commit_timestamp", "on");
  }

  /**
   * A server of a case's own, on a data directory {@code name} under the case's temporary
   * directory and a fixed free port: stopped and started again, it keeps its data and slots where
   * the job reaches it, as a real restart does.
   */
  public EmbeddedPostgres.Builder restartableServer(String name) throws IOException {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    return replicationServer().setDataDirectory(temp.resolve(name)).setCleanDataDirectory(false).setPort(port);
  }

  @AfterAll
  static void stopPostgres() throws Exception {
    postgres.close();
  }

  // ---- what a test may set before it starts the job -----------------------------------------------

  /** The database user and password the job runs with ("" for the embedded server's postgres). */
  public String user = "postgres";
  public String password = "";
  /** Where the triggers also go (a Kafka topic), or null. */
  public Sink<GeofenceTrigger> triggersTopic;
  /**
   * The Kafka topic the job reads its locations from, and the fixture writes them to, instead of
   * the inbox; or null. Give it one partition: the sentinel proves the locations before it were
   * read only if they are read in the order written.
   */
  public LocationsTopic locationsTopic;

  /** How a restored job catches up ({@code geofence.fences.catch-up}). */
  public CatchUp catchUp = CatchUp.AUTO;
  public long checkpointIntervalMs = 1000;
  /**
   * The changelog's materialization interval: every few checkpoints rather than every 10 min, so
   * that checkpoints, savepoints and failovers fall while RocksDB's files are being uploaded, and
   * restores read both parts.
   */
  public Duration materializationInterval = Duration.ofSeconds(2);
  /** Whether the next job started shares its outputs through {@code geofence_handover}, and starts as a standby. */
  public boolean handover;
  public boolean standby;
  /** Whether the next job started fails for good at its first error instead of restarting, as a job whose restarts ran out. */
  public boolean failForGood;
  /** The fences table and its column names, when not the migration's. */
  public FenceTableColumns columns = FenceTableColumns.defaults();
  /** The fence database as the job reaches it (a proxy in front of it), when not {@link #url}. */
  public String sourceUrl;
  /** Where the job writes its outputs, when not to {@link #url} (through a proxy that can cut it). */
  public String sinkUrl;
  /** The job's allowed lateness and maximum clock skew. */
  public LocationTimePolicy timePolicy = LocationTimePolicy.defaults();
  /** The job's loitering delay and presence timeout (off unless a test sets them). */
  public StayRules stayRules = StayRules.OFF;
  /**
   * How many locations a subtask of the fence index may hold before the location source pauses.
   * Far above any test's but the one of the bound: {@link #awaitEvaluated}'s sentinel proves that
   * every file written before it was read only while the source reads on (a paused reader's file
   * may be read after the sentinel's).
   */
  public int maxHeldLocations = 10_000_000;

  // ---- the test's database, inbox and history ---------------------------------------------------

  /** The test's database, for the job and for the test's connection {@link #db}. */
  public String url;
  public Connection db;
  public String slot;
  public Path inbox;
  public SplittableRandom random;
  /** Whether the fences table stores PostGIS geometry (else WKB in bytea). */
  public boolean postgis;
  private String adminPassword = "";

  /** What the oracle knows of a fence: its JTS shape, or null once deleted. */
  public final Map<String, Geometry> fences = new HashMap<>();
  /** The fences each object is inside, as the oracle has evaluated it. */
  public final Map<String, Set<String>> inside = new HashMap<>();
  /** The triggers the oracle expects: object, fence, kind, and event time or "delete". */
  public final Set<String> expected = new TreeSet<>();
  private final List<String> sentinelFences = new ArrayList<>();
  private final List<JobClient> jobs = new ArrayList<>();
  private long lastLocationTime;
  private KafkaProducer<String, String> locationsProducer;
  private final AtomicReference<Exception> failedSend = new AtomicReference<>();
  private int sentinels;
  private int parallelism = 1;

  /** The test's own database on the embedded server, with the migrations (WKB in bytea). */
  public void database(String name, long seed) throws Exception {
    database(embeddedServerUrl(), "", name, false, seed);
  }

  /** The test's own database on {@code server}, with the migrations; PostGIS geometry if {@code postgis}. */
  public void database(String server, String serverPassword, String name, boolean postgis, long seed) throws Exception {
    database(server, serverPassword, name, seed,
        db -> Migrations.applySource(db, postgis ? Migrations.GeometryColumn.POSTGIS : Migrations.GeometryColumn.WKB));
    this.postgis = postgis;
  }

  /** How a test's database gets its fences table and versioning. */
  public interface SourceSchema {
    void apply(Connection db) throws Exception;
  }

  /** The test's own database on {@code server}, its source tables made by {@code schema}, with the output tables. */
  public void database(String server, String serverPassword, String name, long seed, SourceSchema schema) throws Exception {
    try (Connection admin = DriverManager.getConnection(server, "postgres", serverPassword); Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + name);
    }
    adminPassword = serverPassword;
    url = server.substring(0, server.lastIndexOf('/') + 1) + name;
    db = DriverManager.getConnection(url, "postgres", serverPassword);
    schema.apply(db);
    Migrations.applyOutputs(db);
    slot = "slot_" + name;
    inbox = Files.createDirectories(temp.resolve("inbox"));
    random = new SplittableRandom(seed);
  }

  /** A Kafka topic of locations: {@code bootstrapServers}, {@code topic}. */
  public record LocationsTopic(String bootstrapServers, String topic) {}

  /**
   * Jobs a test left running are cancelled, and waited for until they have stopped, so that the
   * next test has the cluster's slots and no task of this one still writes to its temporary
   * directory or holds a connection of Flink CDC's pool when the next job opens its own.
   */
  @AfterEach
  public void cancelJobsAndDisconnect() throws Exception {
    cancelJobs();
    if (db != null) {
      db.close();
    }
    if (locationsProducer != null) {
      // The broker may be gone with its test: what is unsent is of no use now.
      locationsProducer.close(Duration.ZERO);
    }
  }

  /**
   * Cancels the jobs the test started and waits until they have stopped. A test whose job writes to
   * a broker it owns calls it before it closes the broker: a job cancelled after that waits a
   * minute for the broker in its Kafka writer's close.
   */
  public void cancelJobs() throws Exception {
    for (JobClient job : jobs) {
      if (!job.getJobStatus().get().isGloballyTerminalState()) {
        job.cancel().get();
      }
      Waiting.until("the cancelled job " + job.getJobID() + " to stop", PATIENCE,
          () -> job.getJobStatus().get().isGloballyTerminalState());
    }
    jobs.clear();
  }

  // ---- the job ----------------------------------------------------------------------------------

  public JobClient start(int parallelism, String stateBackend) throws Exception {
    return start(parallelism, stateBackend, null);
  }

  /**
   * Starts the job on {@code stateBackend} ({@code rocksdb} or {@code hashmap}, with {@code -plain}
   * for no changelog), restoring from {@code savepoint} unless it is null. A fresh job is waited for
   * until it streams ({@link #awaitEvaluated}): its first read of the table reads it as it finds it,
   * timeless, so an edit made while it reads would reach locations older than the edit.
   */
  public JobClient start(int parallelism, String stateBackend, String savepoint) throws Exception {
    JobClient job = launch(parallelism, stateBackend, savepoint);
    if (savepoint == null) {
      awaitEvaluated();
    }
    return job;
  }

  /** Starts the job, restoring from {@code savepoint} unless it is null, and waits for nothing. */
  public JobClient launch(int parallelism, String stateBackend, String savepoint) throws Exception {
    Configuration config = new Configuration();
    if (savepoint != null) {
      config.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
    }
    // As the job's command sets it up: by default under the changelog; "-plain" turns it off.
    config.set(GeofenceOptions.STATE_BACKEND, stateBackend.replace("-plain", ""));
    if (stateBackend.endsWith("-plain")) {
      config.set(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG, false);
    }
    config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, temp.resolve("checkpoints").toUri().toString());
    config.set(StateChangelogOptions.PERIODIC_MATERIALIZATION_INTERVAL, materializationInterval);
    // As --parallelism sets it: the state settings compare it with a savepoint's.
    config.set(GeofenceOptions.PARALLELISM, parallelism);
    // As the cluster's configuration says (clusterConfiguration): the changelog's storage is on files.
    config.set(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE, "filesystem");
    // As --handover sets it: the state settings keep a handover's checkpoints when the job fails.
    config.set(GeofenceOptions.HANDOVER, handover || standby);
    if (failForGood) {
      config.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
    }
    StateSettings.apply(config, config);
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
    env.setParallelism(parallelism);
    env.enableCheckpointing(checkpointIntervalMs);
    FenceSourceOptions source = FenceSourceOptions.builder()
        .url(sourceUrl == null ? url : sourceUrl).username(user).password(password).slotName(slot).columns(columns)
        .heartbeatInterval(Duration.ofMillis(300)).build();
    JdbcConnectionOptions sink = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(sinkUrl == null ? url : sinkUrl).withUsername(user).withPassword(password).withDriverName("org.postgresql.Driver").build();
    JdbcConnectionOptions sourceDatabase = new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(source.jdbcUrl()).withUsername(user).withPassword(password).withDriverName("org.postgresql.Driver").build();
    JdbcExecutionOptions batches = JdbcExecutionOptions.builder().withBatchSize(1000).withBatchIntervalMs(200).build();
    GeofenceJob.Endpoints endpoints =
        new GeofenceJob.Endpoints(
            FenceSource.create(source),
            locationsTopic == null ? LocationSources.files(inbox.toString(), Duration.ofMillis(200))
                : LocationSources.kafka(locationsTopic.bootstrapServers(), locationsTopic.topic(), "geofence-it"),
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.hydrationHistory(sink, JdbcExecutionOptions.builder().withBatchSize(1).build(),
                GeofenceOptions.HYDRATION_RETENTION.defaultValue()),
            JdbcOutputs.heartbeats(sourceDatabase, FenceSource.heartbeatSql(columns)), Duration.ofMillis(300),
            source);
    if (triggersTopic != null) {
      endpoints = endpoints.withTriggersTopic(triggersTopic);
    }
    if (handover || standby) {
      endpoints = endpoints.withHandover(new GeofenceJob.Handover(sink, standby));
    }
    // The fixture's locations come from files or Kafka, which resume from the savepoint's position.
    GeofenceJob.build(env, endpoints, JobSettings.builder().locationIdleness(Duration.ofSeconds(2)).timePolicy(timePolicy).stayRules(stayRules)
        .maxHeldLocations(maxHeldLocations).catchUp(catchUp, true).build());
    JobClient job = env.executeAsync("geofence-it");
    jobs.add(job);
    runsAt(parallelism);
    return job;
  }

  /** The parallelism of the job now running, so that every subtask gets its sentinel fence. */
  public void runsAt(int parallelism) {
    this.parallelism = parallelism;
  }

  /** A job that ran and was stopped with a savepoint. */
  public record StoppedRun(JobClient job, String savepoint) {}

  /**
   * The first run most cases begin with: the job started fresh, objects moved, its triggers the
   * oracle's, then stopped with a savepoint.
   */
  public StoppedRun runAndStopWithSavepoint(int parallelism, String stateBackend) throws Exception {
    JobClient job = start(parallelism, stateBackend);
    moveObjects();
    assertTriggersAsOracle();
    return new StoppedRun(job, stopWithSavepoint(job));
  }

  /**
   * Stops the job with a savepoint and waits until its CDC source has let go of the slot, so that
   * edits made next can only reach a restored job through its catch-up.
   */
  public String stopWithSavepoint(JobClient job) throws Exception {
    return stopWithSavepoint(job, SavepointFormatType.CANONICAL);
  }

  /** {@link #stopWithSavepoint(JobClient)} in {@code format}. */
  public String stopWithSavepoint(JobClient job, SavepointFormatType format) throws Exception {
    String savepoint;
    try {
      savepoint = job.stopWithSavepoint(false, temp.resolve("savepoints").toUri().toString(), format).get();
    } catch (ExecutionException e) {
      // Flink 1.20 may fail a job while it stops after its savepoint (the file source's coordinator
      // assigns a split to a reader that has just finished: "An OperatorEvent ... was lost"). The
      // savepoint is complete and consistent, as Flink says; the job restarts, and is cancelled.
      if (!(e.getCause() instanceof StopWithSavepointStoppingException stopping)) {
        throw e;
      }
      LOG.warn("the job failed while it stopped after its savepoint; the savepoint is used, the job cancelled", stopping);
      savepoint = stopping.getSavepointPath();
      if (!job.getJobStatus().get().isGloballyTerminalState()) {
        job.cancel().get();
      }
      Waiting.until("the job that failed while it stopped to end", PATIENCE, () -> job.getJobStatus().get().isGloballyTerminalState());
    }
    assertThat(Path.of(URI.create(savepoint))).exists();
    awaitSlotReleased();
    return savepoint;
  }

  public void awaitSlotReleased() throws Exception {
    Waiting.until("the stopped job to release the slot " + slot, PATIENCE,
        () -> queryLong("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND active") == 0);
  }

  /**
   * Writes a sentinel location, timed after every location so far, and waits until every subtask
   * of the fence index has evaluated it: it ENTERs each sentinel fence (one per subtask, made
   * here when missing), in {@code geofence_triggers} and in {@code geofence_presence}. A subtask
   * evaluates held locations in time order, and only against streamed fences, so this also proves
   * the job is streaming. It does not prove every earlier location evaluated: one already behind
   * the fence index's clock when it arrives (late, within the allowed lateness) is evaluated on
   * arrival, and the sentinel's file may be read before an earlier file, by another reader of the
   * location source (the CLI watches the inbox once a second, the database clock runs on). So
   * what is compared with the oracle after it is read until it agrees ({@link #eventually}).
   * Returns the sentinel object, which stays inside those fences.
   */
  public String awaitEvaluated() throws Exception {
    String object = writeSentinel();
    int count = sentinelFences.size();
    Waiting.until("every subtask to evaluate the locations up to " + object + ", which ENTERs " + sentinelFences, PATIENCE,
        () -> queryLong("SELECT count(*) FROM geofence_triggers WHERE object_id = '" + object + "'") == count
            && queryLong("SELECT count(*) FROM geofence_presence WHERE object_id = '" + object + "'") == count);
    return object;
  }

  /**
   * Waits until {@code subtasks} warm-ups of {@code job} are recorded as hydrated (ready): after a
   * catch-up that read or loaded, the locations written next are stamped after its read, so that
   * none is a BEFORE_READ dead letter.
   */
  public void awaitHydrated(JobClient job, int subtasks) throws Exception {
    Waiting.until(subtasks + " warm-ups of " + job.getJobID() + " hydrated", PATIENCE, () -> queryLong(
        "SELECT count(*) FROM hydration_history WHERE job_id = '" + job.getJobID() + "' AND hydrated_at IS NOT NULL") >= subtasks);
  }

  /**
   * Writes the next sentinel location, after every location so far, creating the sentinel fences it
   * is to enter first ({@link #placeSentinelFences}); returns its object. {@link #awaitEvaluated}
   * then waits for it; a history replayed without a job writes it alone.
   */
  public String writeSentinel() throws Exception {
    placeSentinelFences();
    String object = "sentinel-object-" + sentinels++;
    write(List.of(new Location(object, nextLocationTime(), SENTINEL_AREA.centre().x, SENTINEL_AREA.centre().y, null)));
    return object;
  }

  /**
   * Creates a sentinel fence for each subtask of the parallelism the job runs at that owns none
   * yet: the ids depend only on the parallelisms run at, so that a history replayed without a job
   * makes the same fences.
   */
  void placeSentinelFences() throws Exception {
    for (int subtask = 0; subtask < parallelism; subtask++) {
      final int owner = subtask;
      if (sentinelFences.stream().noneMatch(id -> subtaskOf(id) == owner)) {
        String id = "sentinel";
        for (int k = 0; sentinelFences.contains(id) || subtaskOf(id) != owner; k++) {
          id = "sentinel-" + k;
        }
        upsertFence(id, JTS.toGeometry(SENTINEL_AREA));
        sentinelFences.add(id);
      }
    }
  }

  /** The subtask of the fence index that owns a fence at the parallelism the job runs at. */
  public int subtaskOf(String fenceId) {
    return KeyGroupRangeAssignment.assignKeyToParallelOperator(new FenceKey(fenceId), GeofenceJob.DEFAULT_MAX_PARALLELISM, parallelism);
  }

  // ---- history ------------------------------------------------------------------------------------

  /**
   * Twenty objects, ten steps each, timed after every location so far and after every fence edit
   * so far has committed; the oracle evaluates them as the job should.
   */
  public List<Location> moveObjects() throws Exception {
    long start = nextLocationTime();
    List<Location> locations = new ArrayList<>();
    for (int step = 0; step < 10; step++) {
      for (int o = 0; o < 20; o++) {
        locations.add(new Location("object-" + o, start + step * 10 + o % 7, random.nextDouble(-0.5, 10.5), random.nextDouble(-0.5, 10.5), null));
      }
    }
    write(locations);
    return locations;
  }

  /** Writes locations into the inbox (one file, moved in whole) and has the oracle evaluate them. */
  public void write(List<Location> locations) throws Exception {
    writeLines(locations.stream().map(LocationJson::format).toList());
    evaluate(locations);
    lastLocationTime = Math.max(lastLocationTime, locations.stream().mapToLong(l -> l.timestamp).max().orElse(0));
  }

  /** A time after every location so far, and just ahead of the database's clock. */
  public long nextLocationTime() throws Exception {
    return Math.max(lastLocationTime + 1, databaseMillis() + 50);
  }

  public void upsertFence(String id, Geometry shape) throws Exception {
    awaitClockPastLocations();
    try (PreparedStatement s = db.prepareStatement("INSERT INTO " + columns.qualified(columns.fencesTable())
        + " (" + FenceTableColumns.quote(columns.id()) + ", " + FenceTableColumns.quote(columns.geometry()) + ") VALUES (?, "
        + geometryParameter() + ") ON CONFLICT (" + FenceTableColumns.quote(columns.id()) + ") DO UPDATE SET "
        + FenceTableColumns.quote(columns.geometry()) + " = excluded." + FenceTableColumns.quote(columns.geometry()))) {
      s.setString(1, id);
      s.setBytes(2, new WKBWriter().write(shape));
      s.execute();
    }
    fences.put(id, shape);
  }

  /**
   * Creates or re-creates the fence, or reshapes it, with its own dwell delay in milliseconds (null:
   * none, the job's holds) in the mapped column, in one statement: one edit.
   */
  public void upsertFence(String id, Geometry shape, Long dwellDelayMillis) throws Exception {
    awaitClockPastLocations();
    String delay = FenceTableColumns.quote(columns.dwellDelay());
    try (PreparedStatement s = db.prepareStatement("INSERT INTO " + columns.qualified(columns.fencesTable())
        + " (" + FenceTableColumns.quote(columns.id()) + ", " + FenceTableColumns.quote(columns.geometry()) + ", " + delay
        + ") VALUES (?, " + geometryParameter() + ", ? * interval '1 millisecond') ON CONFLICT (" + FenceTableColumns.quote(columns.id())
        + ") DO UPDATE SET " + FenceTableColumns.quote(columns.geometry()) + " = excluded." + FenceTableColumns.quote(columns.geometry())
        + ", " + delay + " = excluded." + delay)) {
      s.setString(1, id);
      s.setBytes(2, new WKBWriter().write(shape));
      s.setObject(3, dwellDelayMillis, Types.BIGINT);
      s.execute();
    }
    fences.put(id, shape);
  }

  public void deleteFence(String id) throws Exception {
    awaitClockPastLocations();
    try (PreparedStatement s = db.prepareStatement(
        "DELETE FROM " + columns.qualified(columns.fencesTable()) + " WHERE " + FenceTableColumns.quote(columns.id()) + " = ?")) {
      s.setString(1, id);
      s.execute();
    }
    fences.put(id, null);
  }

  String geometryParameter() {
    return postgis ? "ST_GeomFromWKB(?, 4326)" : "?";
  }

  /** A bad geometry: WKT for PostGIS (which parses what it stores), raw bytes for bytea. */
  public void insertRaw(String id, String wkt, byte[] wkb) throws Exception {
    awaitClockPastLocations();
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

  public void updateRaw(String id, String wkt, byte[] wkb) throws Exception {
    awaitClockPastLocations();
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

  /** Little-endian WKB of a one-ring polygon, written by hand so that it can be malformed. */
  public static byte[] polygonWkb(double... xy) {
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(13 + 8 * xy.length).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    b.put((byte) 1).putInt(3).putInt(1).putInt(xy.length / 2);
    for (double v : xy) {
      b.putDouble(v);
    }
    return b.array();
  }

  /**
   * Lines into the inbox: written elsewhere and moved in, so the source reads each file whole. Or
   * to the {@link #locationsTopic}: sent in order (the producer is idempotent), and buffered while
   * the broker is away; a send that failed fails the next write.
   */
  public void writeLines(List<String> lines) throws Exception {
    if (locationsTopic != null) {
      send(lines);
      return;
    }
    Path staged = Files.createTempFile(inbox.getParent(), "locations", ".jsonl");
    Files.write(staged, lines);
    Files.move(staged, inbox.resolve(staged.getFileName()), StandardCopyOption.ATOMIC_MOVE);
  }

  private void send(List<String> lines) {
    if (locationsProducer == null) {
      Properties config = new Properties();
      config.setProperty(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, locationsTopic.bootstrapServers());
      locationsProducer = new KafkaProducer<>(config, new StringSerializer(), new StringSerializer());
    }
    Exception failed = failedSend.get();
    if (failed != null) {
      throw new IllegalStateException("a location was not written to " + locationsTopic.topic(), failed);
    }
    for (String line : lines) {
      locationsProducer.send(new ProducerRecord<>(locationsTopic.topic(), line), (metadata, e) -> {
        if (e != null) {
          failedSend.compareAndSet(null, e);
        }
      });
    }
  }

  /**
   * Waits until the database clock is past every location so far, so that an edit made next
   * commits after them and the job, as the oracle, evaluates them without it.
   */
  public void awaitClockPastLocations() throws Exception {
    Waiting.until("the database clock to pass the last location's time", PATIENCE, () -> databaseMillis() > lastLocationTime + 10);
  }

  public long databaseMillis() throws Exception {
    return queryLong("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint");
  }

  /** Creates fences {@code from} to {@code to - 1}, or reshapes and moves them. */
  public void placeFences(int from, int to) throws Exception {
    for (int i = from; i < to; i++) {
      upsertFence("fence-" + i, star(random.nextDouble(10), random.nextDouble(10), 0.5 + random.nextDouble(1.5)));
    }
  }

  /** Deletes fences {@code from} to {@code to - 1}; objects inside them are expected to EXIT. */
  public void deleteFences(int from, int to) throws Exception {
    for (int i = from; i < to; i++) {
      for (Map.Entry<String, Set<String>> e : inside.entrySet()) {
        if (e.getValue().remove("fence-" + i)) {
          expected.add(e.getKey() + " fence-" + i + " EXIT delete");
        }
      }
      deleteFence("fence-" + i);
    }
  }

  /** Creates fences {@code from} to {@code to - 1}, or re-creates them after a delete. */
  public void createFences(int from, int to) throws Exception {
    for (int i = from; i < to; i++) {
      upsertFence("fence-" + i, star(random.nextDouble(10), random.nextDouble(10), 1 + random.nextDouble()));
    }
  }

  private Geometry star(double cx, double cy, double radius) {
    return GeneratedFences.star(random, cx, cy, radius, 6 + random.nextInt(40));
  }

  // ---- the oracle and the comparisons ---------------------------------------------------------------

  /**
   * The oracle: evaluates locations in time order against the fences in force (JTS covers) and
   * keeps each object's membership, as docs/design.md#enter-and-exit defines ENTER and EXIT.
   */
  private void evaluate(List<Location> locations) {
    Map<String, PreparedGeometry> prepared = prepared();
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

  private Map<String, PreparedGeometry> prepared() {
    Map<String, PreparedGeometry> prepared = new HashMap<>();
    fences.forEach((id, shape) -> {
      if (shape != null) {
        prepared.put(id, PreparedGeometryFactory.prepare(shape));
      }
    });
    return prepared;
  }

  /** Every trigger written so far: object, fence, kind, and event time or "delete". */
  public Set<String> writtenTriggers() throws Exception {
    Set<String> rows = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT object_id, fence_id, kind, lon IS NULL, (extract(epoch FROM event_time) * 1000)::bigint FROM geofence_triggers")) {
      while (r.next()) {
        rows.add(r.getString(1) + " " + r.getString(2) + " " + r.getString(3) + " " + (r.getBoolean(4) ? "delete" : r.getLong(5)));
      }
    }
    return rows;
  }

  /** The triggers are the oracle's, each written once (ids are deterministic: a replay rewrites, never adds). */
  public void assertTriggersAsOracle() throws Exception {
    awaitEvaluated();
    assertThat(eventually(this::writtenTriggers, expected)).containsExactlyInAnyOrderElementsOf(expected);
    assertThat(queryLong("SELECT count(*) FROM geofence_triggers")).as("no trigger written twice").isEqualTo(expected.size());
  }

  /** The id of every trigger in {@code geofence_triggers}. */
  public Set<String> triggerIds() throws Exception {
    Set<String> ids = new TreeSet<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT trigger_id FROM geofence_triggers")) {
      while (r.next()) {
        ids.add(r.getString(1));
      }
    }
    return ids;
  }

  /**
   * Each trigger id among the triggers topic's record {@code values} (as a {@code read_committed}
   * reader sees them), with how many times it is there. (Values, not the broker: the savepoint
   * tools' tests extend this fixture without Kafka's test kit on their class path.)
   */
  public static Map<String, Integer> triggerIdsIn(List<String> values) throws Exception {
    ObjectMapper json = new ObjectMapper();
    Map<String, Integer> ids = new TreeMap<>();
    for (String value : values) {
      ids.merge(json.readTree(value).get("trigger_id").asText(), 1, Integer::sum);
    }
    return ids;
  }

  /**
   * How a case ends once every location is written: triggers (rows counted, not only distinct
   * ones) and presence as the oracle's, and the three-way check over 20,000 query points.
   */
  public void assertEndsAsOracle(String tag) throws Exception {
    assertTriggersAsOracle();
    assertPresenceAsOracle();
    threeWayCheck(tag, 20_000);
  }

  /** {@code geofence_presence} is who the oracle has inside which fence (the query points aside). */
  public void assertPresenceAsOracle() throws Exception {
    awaitEvaluated();
    Set<String> oracle = new TreeSet<>();
    inside.forEach((object, fenceIds) -> fenceIds.forEach(f -> oracle.add(object + " " + f)));
    assertThat(eventually(() -> {
      Set<String> rows = new TreeSet<>();
      try (Statement s = db.createStatement();
          ResultSet r = s.executeQuery("SELECT object_id, fence_id FROM geofence_presence WHERE object_id NOT LIKE 'q-%'")) {
        while (r.next()) {
          rows.add(r.getString(1) + " " + r.getString(2));
        }
      }
      return rows;
    }, oracle)).isEqualTo(oracle);
  }

  /**
   * Reads {@code rows} until they equal the {@code oracle}'s, or for {@link #PATIENCE}, and returns
   * the last read, for the assertion to show how it differs. Called after {@link #awaitEvaluated}:
   * usually the first read agrees, and the wait only covers a late location's file read after the
   * sentinel's. A row too many never goes away, so it still fails.
   */
  public static <T> T eventually(Waiting.Probe<T> rows, T oracle) throws Exception {
    return Waiting.last(PATIENCE, rows, oracle::equals);
  }

  /**
   * Checks the job's index three ways over {@code points} random query points: each point is a new
   * object, so the job ENTERs every fence its index says covers it; those sets must equal both a
   * fresh rebuild (the fences read from the database now, indexed anew) and the oracle (JTS covers
   * over the shapes this test wrote). Run after the job has caught up with every edit.
   */
  public void threeWayCheck(String tag, int points) throws Exception {
    long t = nextLocationTime();
    SplittableRandom queries = new SplittableRandom(tag.hashCode());
    List<Location> locations = new ArrayList<>(points);
    for (int i = 0; i < points; i++) {
      locations.add(new Location("q-" + tag + "-" + i, t, queries.nextDouble(-1, 11), queries.nextDouble(-1, 11), null));
    }
    writeLines(locations.stream().map(LocationJson::format).toList());
    lastLocationTime = t;

    FenceIndex rebuilt = new FenceIndex();
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    try (Connection read = DriverManager.getConnection(url, "postgres", adminPassword)) {
      BucketRead.read(read, columns, 1, 0, 0, change -> {
        if (change.kind == FenceChange.Kind.FENCE && !change.delete) {
          try {
            rebuilt.upsert(change.fenceId, change.tenant, StayRules.NO_FENCE_DELAY, reader.readWkb(change.geometryBytes).geometry());
          } catch (Exception e) {
            throw new AssertionError("fence " + change.fenceId + " does not decode", e);
          }
        }
      });
    }
    Map<String, PreparedGeometry> prepared = prepared();
    Set<String> oracle = new TreeSet<>();
    Set<String> fresh = new TreeSet<>();
    for (Location q : locations) {
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
    awaitEvaluated();
    Set<String> job = eventually(() -> {
      Set<String> rows = new TreeSet<>();
      try (PreparedStatement s = db.prepareStatement("SELECT object_id, fence_id FROM geofence_triggers WHERE object_id LIKE ? AND kind = 'ENTER'")) {
        s.setString(1, "q-" + tag + "-%");
        try (ResultSet r = s.executeQuery()) {
          while (r.next()) {
            rows.add(r.getString(1) + " " + r.getString(2));
          }
        }
      }
      return rows;
    }, oracle);
    assertThat(job).as("the job's index answers " + points + " query points as the oracle does").isEqualTo(oracle);
  }

  // ---- hydration history and metrics ------------------------------------------------------------------

  /** One hydration_history row, as the assertions need it; times in epoch millis, 0 for none. */
  public record Episode(String jobId, int subtask, int attempt, String startMode, String gapCheck, String gapReason,
      long installedAt, long restoredAt, long indexedAt, long hydratedAt, long fencesLoaded, long editsReplayed,
      Boolean checksumMatch, long peakHeap, long bucketsReread, String rereadReason, Long catchupBacklog, String catchupPath) {

    @Override
    public String toString() {
      return "#" + subtask + "/" + attempt + " " + startMode + " " + gapCheck + " (" + gapReason + ") loaded " + fencesLoaded
          + ", backlog " + catchupBacklog + ", " + catchupPath + ", replayed " + editsReplayed + ", hydrated " + (hydratedAt == 0 ? "no" : (hydratedAt - installedAt) + " ms");
    }
  }

  /** Every row of {@code hydration_history}, in the order the warm-ups began. */
  List<Episode> episodes() throws Exception {
    List<Episode> rows = new ArrayList<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
        "SELECT job_id, subtask, attempt, start_mode, gap_check, gap_reason, " + millis("installed_at") + ", " + millis("restored_at") + ", "
            + millis("indexed_at") + ", " + millis("hydrated_at") + ", fences_loaded, edits_replayed, checksum_match, peak_heap_bytes,"
            + " buckets_reread, reread_reason, catchup_backlog, catchup_path FROM hydration_history ORDER BY installed_at, subtask")) {
      while (r.next()) {
        rows.add(new Episode(r.getString(1), r.getInt(2), r.getInt(3), r.getString(4), r.getString(5), r.getString(6), r.getLong(7),
            r.getLong(8), r.getLong(9), r.getLong(10), r.getLong(11), r.getLong(12), (Boolean) r.getObject(13), r.getLong(14),
            r.getLong(15), r.getString(16), (Long) r.getObject(17), r.getString(18)));
      }
    }
    return rows;
  }

  /** The rows of one job's warm-ups. */
  public List<Episode> episodes(JobClient job) throws Exception {
    return episodes().stream().filter(e -> e.jobId().equals(job.getJobID().toString())).toList();
  }

  private static String millis(String column) {
    return "coalesce((extract(epoch FROM " + column + ") * 1000)::bigint, 0)";
  }

  /** Checks a finished episode's timings are in order and plausible, and that it ended ready. */
  public static void assertHydrated(Episode e) {
    assertThat(e.hydratedAt()).as("hydrated: %s", e).isPositive();
    assertThat(e.checksumMatch()).as("checksum match: %s", e).isTrue();
    assertThat(e.hydratedAt() - e.installedAt()).as("hydration time: %s", e).isBetween(0L, 120_000L);
    if (e.restoredAt() != 0) {
      assertThat(e.installedAt()).isLessThanOrEqualTo(e.restoredAt());
      assertThat(e.restoredAt()).isLessThanOrEqualTo(e.indexedAt());
      assertThat(e.indexedAt()).isLessThanOrEqualTo(e.hydratedAt());
    }
    assertThat(e.peakHeap()).as("peak heap: %s", e).isPositive();
  }

  /**
   * The warm-ups of a job, finished or not (the rebuilds of a running index aside): for every
   * subtask one row per attempt that opened the index (a replay rewrites a row, never adds one;
   * an attempt failed before it opened has none); the first attempt's of {@code startMode}; a
   * later one's, after a failover (the MiniCluster's, or the CDC source's own), restored from the
   * latest checkpoint or, when there was none yet, as the first; the last attempt of every subtask
   * hydrated. Returns those last attempts' rows, by subtask.
   */
  public List<Episode> assertWarmUps(String jobId, int parallelism, String startMode) throws Exception {
    List<Episode> rows = episodes().stream().filter(e -> e.jobId().equals(jobId) && !e.startMode().equals("rebuild")).toList();
    Map<Integer, java.util.TreeMap<Integer, Episode>> attempts = new java.util.TreeMap<>();
    for (Episode e : rows) {
      assertThat(attempts.computeIfAbsent(e.subtask(), s -> new java.util.TreeMap<>()).put(e.attempt(), e))
          .as("one row for subtask %d, attempt %d: %s", e.subtask(), e.attempt(), rows).isNull();
    }
    assertThat(attempts.keySet()).as("the subtasks that warmed up: %s", rows)
        .containsExactlyElementsOf(java.util.stream.IntStream.range(0, parallelism).boxed().toList());
    List<Episode> last = new ArrayList<>();
    attempts.forEach((subtask, tried) -> {
      if (tried.containsKey(0)) {
        assertThat(tried.get(0).startMode()).as("start mode of %s", tried.get(0)).isEqualTo(startMode);
      }
      tried.values().forEach(e -> assertThat(e.startMode()).as("start mode of %s", e).isIn(startMode, "checkpoint"));
      assertHydrated(tried.lastEntry().getValue());
      last.add(tried.lastEntry().getValue());
    });
    return last;
  }

  public List<Episode> assertWarmUps(JobClient job, int parallelism, String startMode) throws Exception {
    return assertWarmUps(job.getJobID().toString(), parallelism, startMode);
  }

  /**
   * The sum over the fence index's subtasks of one of its metrics, through Flink's REST API, as
   * fetched after this call. The API answers from metrics it fetched up to an interval before, and
   * fetches anew only when asked after that interval: the answer to a question right after what it
   * checks could predate it (a counter read as 0 just after the rebuild that counted). Asked twice,
   * an interval apart, it has fetched since the call.
   */
  public static long metricSum(JobClient job, String metric) throws Exception {
    for (int i = 0; i < 2; i++) {
      fetchMetricSum(job, metric);
      Thread.sleep(METRIC_FETCH_INTERVAL.toMillis() + 100);
    }
    return Waiting.until("Flink's REST API to report the fence index's " + metric, PATIENCE, () -> fetchMetricSum(job, metric), v -> v >= 0);
  }

  /** The sum, or -1 while the REST API has none (the job is restarting, or Flink has not fetched it yet). */
  public static long fetchMetricSum(JobClient job, String metric) throws Exception {
    return fetchMetric(job, GeofenceJob.FENCE_INDEX_NAME, metric, "sum");
  }

  /**
   * One of {@code sum}, {@code max}, {@code min} or {@code avg} over the subtasks of a metric of
   * the vertex whose name contains {@code vertexName}, or -1 while the REST API has none: the
   * task's metric of that name (e.g. {@code backPressuredTimeMsPerSecond}), else the first
   * operator's of the chain that has one.
   */
  public static long fetchMetric(JobClient job, String vertexName, String metric, String aggregation) throws Exception {
    Configuration client = FLINK.getClientConfiguration();
    String base = "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT) + "/jobs/" + job.getJobID();
    HttpClient http = HttpClient.newHttpClient();
    ObjectMapper json = new ObjectMapper();
    for (JsonNode vertex : json.readTree(get(http, base)).path("vertices")) {
      if (vertex.get("name").asText().contains(vertexName)) {
        String metrics = base + "/vertices/" + vertex.get("id").asText() + "/subtasks/metrics";
        List<String> ids = new ArrayList<>();
        json.readTree(get(http, metrics)).forEach(m -> ids.add(m.get("id").asText()));
        String id = ids.contains(metric) ? metric : ids.stream().filter(i -> i.endsWith("." + metric)).findFirst().orElse(null);
        if (id != null) {
          JsonNode values = json.readTree(get(http, metrics + "?get=" + id + "&agg=" + aggregation));
          return values.size() == 0 ? -1 : values.get(0).get(aggregation).asLong();
        }
      }
    }
    return -1;
  }

  /** The job's checkpoint counts (completed, failed, ...) as Flink's REST API reports them. */
  public static JsonNode checkpointCounts(JobClient job) throws Exception {
    return checkpoints(job).path("counts");
  }

  /** The job's checkpoint statistics (counts, history, ...) as Flink's REST API reports them. */
  public static JsonNode checkpoints(JobClient job) throws Exception {
    Configuration client = FLINK.getClientConfiguration();
    String url = "http://" + client.get(RestOptions.ADDRESS) + ":" + client.get(RestOptions.PORT) + "/jobs/" + job.getJobID() + "/checkpoints";
    return new ObjectMapper().readTree(get(HttpClient.newHttpClient(), url));
  }

  public static String get(HttpClient http, String url) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString()).body();
  }

  // ---- the database ---------------------------------------------------------------------------------

  public long queryLong(String sql) throws Exception {
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  /** The first column of every row {@code sql} returns, as text. */
  public List<String> queryStrings(String sql) throws Exception {
    List<String> values = new ArrayList<>();
    try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(sql)) {
      while (r.next()) {
        values.add(r.getString(1));
      }
    }
    return values;
  }

  public static String embeddedServerUrl() {
    return "jdbc:postgresql://localhost:" + postgres.getPort() + "/postgres";
  }
}
