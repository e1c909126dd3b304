package dev.geofence.job.cli;

import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.sink.JdbcOutputs;
import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.JobSettings;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.geom.InvalidPolygonPolicy;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Set;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The command line: {@code run} submits the job (to a cluster with {@code flink run}, or on an
 * embedded MiniCluster with {@code java -jar}); {@code demo} runs everything on this machine;
 * {@code ready} tells a readiness probe whether the running job's fence index is ready. Options
 * are stable: scripts may rely on them. The fence database password comes from {@code
 * GEOFENCE_SOURCE_PASSWORD}, never from the command line, so it appears in no process list, log or
 * help text.
 */
public final class GeofenceCommand {

  /** The job's name unless {@code --job-name} says otherwise; other defaults derive from it. */
  public static final String DEFAULT_JOB_NAME = "geofence";

  /** How often an embedded cluster's REST API fetches metrics: how stale {@code ready} may be. */
  public static final Duration READY_FRESHNESS = Duration.ofSeconds(1);

  /** The environment variable the fence database's password is read from (never the command line). */
  public static final String PASSWORD_ENV = "GEOFENCE_SOURCE_PASSWORD";

  /** The options {@code run} accepts ("debezium." a prefix): checked against docker/compose.yaml. */
  public static final Set<String> RUN_OPTIONS = Set.of(
      "source-url", "source-user", "fences-table", "slot", "publication", "locations", "sink-url",
      "parallelism", "checkpoint-dir", "checkpoint-interval", "state-backend", "geometry-format",
      "invalid-polygons", "heartbeat-interval", "triggers-topic", "triggers-transactional-id", "hydration-retention", "startup", "from-savepoint", "savepoint-dir", "rest-port", "bind-address", "job-name", "locations-group",
      "debezium.");

  /** The help text, with each option's default: checked against docker/compose.yaml. */
  public static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar run [options]      (or: flink run geofence-job.jar run [options])",
      "       java -jar geofence-job.jar demo [options]     (everything on this machine; demo --help)",
      "       java -jar geofence-job.jar ready --rest-url URL [--job NAME] (exit 0 when the index is ready; for readiness probes)",
      "",
      "Runs the geofence job: fences from PostgreSQL through CDC, locations from Kafka, files or a",
      "generator, ENTER/EXIT triggers into PostgreSQL tables. The password of the fence database is",
      "read from the environment variable " + PASSWORD_ENV + ".",
      "",
      "Options of run:",
      "  --source-url URL            JDBC URL of the fence database, jdbc:postgresql://host:port/db (required)",
      "  --source-user USER          user of the fence database, with REPLICATION (required)",
      "  --fences-table NAME         table of fences (default fences)",
      "  --slot NAME                 replication slot of the CDC source (default geofence)",
      "  --publication NAME          publication the migration created (default geofence_publication)",
      "  --locations SPEC            kafka:BOOTSTRAP/TOPIC, file:PATH (a file or a watched directory)",
      "                              or generator:OBJECTS (required)",
      "  --locations-group GROUP     Kafka consumer group of kafka: locations (default: the job name)",
      "  --job-name NAME             the job's name in Flink and in hydration_history (default geofence)",
      "  --sink-url URL              JDBC URL for the output tables (default: the fence database)",
      "  --triggers-topic BOOTSTRAP/TOPIC",
      "                              also write the triggers to this Kafka topic, exactly once (transactions",
      "                              commit with each checkpoint; read it with isolation.level=read_committed)",
      "  --triggers-transactional-id PREFIX",
      "                              Kafka transactional id prefix, unique per job (default: the job name",
      "                              and -triggers)",
      "  --parallelism N             parallelism of the job (default: the cluster's)",
      "  --checkpoint-dir URI        durable checkpoint storage, e.g. file:///var/geofence/checkpoints",
      "  --checkpoint-interval D     checkpoint interval, e.g. 10s (default 10s)",
      "  --state-backend NAME        hashmap or rocksdb (default hashmap; rocksdb checkpoints incrementally)",
      "  --geometry-format NAME      wkb (PostGIS geometry or bytea), wkt or geojson (default wkb)",
      "  --invalid-polygons POLICY   repair (default) or reject",
      "  --heartbeat-interval D      how often the source's heartbeat advances the fence clock (default 1s)",
      "  --hydration-retention D     how long hydration_history keeps its rows (default 30d)",
      "  --startup snapshot|slot     without source state: read the table first (default), or stream from",
      "                              the slot only (restoring a savepoint that geofence-savepoints bootstrap wrote)",
      "  --from-savepoint PATH       restore from this savepoint (java -jar; on a cluster use flink run -s)",
      "  --savepoint-dir URI         default target of savepoints, e.g. file:///var/geofence/savepoints",
      "  --rest-port P               REST port of the embedded cluster under java -jar (default 8081), so",
      "                              it can be stopped with a savepoint through Flink's REST API",
      "  --bind-address ADDR         interface the embedded cluster's REST API and other ports listen on",
      "                              under java -jar (default 127.0.0.1; 0.0.0.0 for every interface)",
      "  --debezium.KEY VALUE        passed to Debezium as KEY",
      "",
      ReadinessProbe.OPTIONS_HELP,
      "",
      "Durations: 500ms, 10s, 5m, 1h, 30d.");

  private GeofenceCommand() {}

  public static void main(String[] args) throws Exception {
    int status = run(args, System.out, System.err);
    // The demo's embedded database and cluster leave threads behind, so its process ends here. A
    // successful run returns normally: in application mode this main runs inside the JobManager.
    if (status != 0 || (args.length > 0 && args[0].equals("demo"))) {
      System.exit(status);
    }
  }

  static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
    if (args.length == 0 || args[0].equals("--help") || args[0].equals("-h") || args[0].equals("help")) {
      out.println(HELP);
      return args.length == 0 ? 2 : 0;
    }
    try {
      switch (args[0]) {
        case "run":
          if (args.length > 1 && args[1].equals("--help")) {
            out.println(HELP);
            return 0;
          }
          prepare(Options.parse(args, 1, RUN_OPTIONS), System.getenv(PASSWORD_ENV), new Configuration()).execute();
          return 0;
        case "demo":
          if (args.length > 1 && args[1].equals("--help")) {
            out.println(Demo.HELP);
            return 0;
          }
          Demo.run(Options.parse(args, 1, Demo.OPTIONS), out);
          return 0;
        case "ready":
          return ReadinessProbe.command(args, out, err);
        default:
          throw new IllegalArgumentException("unknown command '" + args[0] + "'; the commands are run, demo and ready (see --help)");
      }
    } catch (IllegalArgumentException e) {
      err.println("geofence: " + e.getMessage());
      return 2;
    }
  }

  /** Parses {@code run}'s options, applies the output migration and builds the job in an environment. */
  static StreamExecutionEnvironment prepare(String[] runArgs, String password, Configuration base) throws Exception {
    return prepare(Options.parse(runArgs, 0, RUN_OPTIONS), password, base);
  }

  private static StreamExecutionEnvironment prepare(Options options, String password, Configuration base) throws Exception {
    FenceTableColumns columns = FenceTableColumns.builder().fencesTable(options.get("fences-table", "fences")).build();
    FenceSourceOptions.Builder source = FenceSourceOptions.builder()
        .url(options.required("source-url"))
        .username(options.required("source-user"))
        .password(password == null ? "" : password)
        .slotName(options.get("slot", "geofence"))
        .publicationName(options.get("publication", "geofence_publication"))
        .columns(columns)
        .heartbeatInterval(options.getDuration("heartbeat-interval", Duration.ofSeconds(1)));
    String startup = options.get("startup", "snapshot");
    if (!startup.equals("snapshot") && !startup.equals("slot")) {
      throw new IllegalArgumentException("option --startup must be snapshot or slot, got '" + startup + "'");
    }
    source.streamFromSlot(startup.equals("slot"));
    options.withPrefix("debezium.").forEach(source::debeziumProperty);
    FenceSourceOptions fences = source.build();
    String jobName = options.get("job-name", DEFAULT_JOB_NAME);
    if (jobName.isBlank()) {
      throw new IllegalArgumentException("option --job-name must not be blank");
    }
    Source<String, ?, ?> locations = locations(options.required("locations"), options.get("locations-group", jobName));
    String triggersTopicSpec = options.get("triggers-topic", null);
    Sink<GeofenceTrigger> triggersTopic = null;
    if (triggersTopicSpec != null) {
      String[] topic = kafkaTopic("--triggers-topic", triggersTopicSpec);
      triggersTopic = KafkaOutputs.triggers(topic[0], topic[1],
          options.get("triggers-transactional-id", jobName + "-triggers"), KafkaOutputs.DEFAULT_TRANSACTION_TIMEOUT);
    }
    String sinkUrl = options.get("sink-url", fences.jdbcUrl());
    JobSettings settings = JobSettings.builder()
        .geometryFormat(options.getEnum("geometry-format", GeometryFormat.class, GeometryFormat.WKB))
        .geometryOptions(GeometryReadOptions.builder()
            .invalidPolicy(options.getEnum("invalid-polygons", InvalidPolygonPolicy.class, InvalidPolygonPolicy.REPAIR))
            .build())
        .build();

    Configuration config = new Configuration(base);
    config.set(PipelineOptions.NAME, jobName);
    String backend = stateBackend(options.get("state-backend", "hashmap"));
    config.set(StateBackendOptions.STATE_BACKEND, backend);
    // RocksDB uploads only what changed since the last checkpoint: a few edits, not every fence.
    config.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, backend.equals("rocksdb"));
    String savepoint = options.get("from-savepoint", null);
    if (savepoint != null) {
      config.set(StateRecoveryOptions.SAVEPOINT_PATH, savepoint);
    }
    String savepointDir = options.get("savepoint-dir", null);
    if (savepointDir != null) {
      config.set(CheckpointingOptions.SAVEPOINT_DIRECTORY, savepointDir);
    }
    int restPort = options.getInt("rest-port", -1);
    if (restPort > 0) {
      config.set(RestOptions.PORT, restPort);
    }
    embeddedCluster(config, options.get("bind-address", "127.0.0.1"));
    String checkpointDir = options.get("checkpoint-dir", null);
    if (checkpointDir != null) {
      config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, checkpointDir);
    }
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(config);
    Duration checkpointInterval = options.getDuration("checkpoint-interval", Duration.ofSeconds(10));
    // The gap check compares the slot's confirmed position (three checkpoints old) with the
    // position the restored state had read; heartbeats must move the latter along in between.
    if (fences.heartbeatInterval().compareTo(checkpointInterval.multipliedBy(3)) >= 0) {
      throw new IllegalArgumentException("option --heartbeat-interval must be shorter than three checkpoint intervals ("
          + checkpointInterval.multipliedBy(3).toMillis() + " ms)");
    }
    env.enableCheckpointing(checkpointInterval.toMillis());
    int parallelism = options.getInt("parallelism", -1);
    if (parallelism > 0) {
      env.setParallelism(parallelism);
    } else if (parallelism == 0 || parallelism < -1) {
      throw new IllegalArgumentException("option --parallelism must be at least 1");
    }

    JdbcConnectionOptions sink = jdbc(sinkUrl, fences);
    JdbcExecutionOptions batches = JdbcExecutionOptions.builder().withBatchSize(500).withBatchIntervalMs(200).build();
    GeofenceJob.Endpoints endpoints =
        new GeofenceJob.Endpoints(FenceSource.create(fences), locations,
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.hydrationHistory(sink, JdbcExecutionOptions.builder().withBatchSize(1).withMaxRetries(3).build(),
                options.getDuration("hydration-retention", JdbcOutputs.DEFAULT_HYDRATION_RETENTION)),
            JdbcOutputs.heartbeats(jdbc(fences.jdbcUrl(), fences), FenceSource.heartbeatSql(columns)), fences.heartbeatInterval(),
            fences);
    if (triggersTopic != null) {
      endpoints = endpoints.withTriggersTopic(triggersTopic);
    }

    // The output tables come from the shipped migration, unless they exist (a least-privileged
    // role may not create them). Last, so that every option is checked before the database is.
    try (Connection outputs = DriverManager.getConnection(sinkUrl, fences.username(), fences.password())) {
      Migrations.ensureOutputs(outputs);
    } catch (SQLException e) {
      throw new IllegalArgumentException("cannot prepare the output tables at " + sinkUrl + ": " + e.getMessage());
    }
    GeofenceJob.build(env, endpoints, settings);
    return env;
  }

  /**
   * Settings of the embedded cluster that {@code java -jar} runs (a cluster that the job is
   * submitted to keeps its own): every port it opens listens on {@code bindAddress} only, so that
   * nobody else on the network can stop the job or have it write a savepoint; and Flink's REST API
   * fetches metrics every second, so that {@code ready} answers within about a second of the truth.
   */
  private static void embeddedCluster(Configuration config, String bindAddress) {
    config.set(RestOptions.BIND_ADDRESS, bindAddress);
    config.set(JobManagerOptions.BIND_HOST, bindAddress);
    config.set(TaskManagerOptions.BIND_HOST, bindAddress);
    if (!config.contains(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL)) {
      config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, READY_FRESHNESS);
    }
  }

  private static JdbcConnectionOptions jdbc(String url, FenceSourceOptions credentials) {
    return new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(url).withDriverName("org.postgresql.Driver")
        .withUsername(credentials.username()).withPassword(credentials.password()).build();
  }

  static Source<String, ?, ?> locations(String spec, String kafkaGroup) {
    if (spec.startsWith("file:")) {
      return LocationSources.files(spec.substring(5), Duration.ofSeconds(1));
    }
    if (spec.startsWith("kafka:")) {
      String[] topic = kafkaTopic("--locations kafka:", spec.substring(6));
      return LocationSources.kafka(topic[0], topic[1], kafkaGroup);
    }
    if (spec.startsWith("generator:")) {
      int objects;
      try {
        objects = Integer.parseInt(spec.substring(10));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("--locations generator: must be generator:OBJECTS, got '" + spec + "'");
      }
      // One location per object per second, timestamped in step with the wall clock.
      MovingObjects moving = new MovingObjects(objects, 0, 0, 10, 10, System.currentTimeMillis(), 1000);
      return LocationSources.generator(moving, objects);
    }
    throw new IllegalArgumentException("--locations must start with kafka:, file: or generator:, got '" + spec + "'");
  }

  /** BOOTSTRAP/TOPIC as {bootstrap servers, topic}. */
  private static String[] kafkaTopic(String option, String spec) {
    int slash = spec.lastIndexOf('/');
    if (slash <= 0 || slash == spec.length() - 1) {
      throw new IllegalArgumentException(option + " must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got '" + spec + "'");
    }
    return new String[] {spec.substring(0, slash), spec.substring(slash + 1)};
  }

  private static String stateBackend(String name) {
    if (!name.equals("hashmap") && !name.equals("rocksdb")) {
      throw new IllegalArgumentException("option --state-backend must be hashmap or rocksdb, got '" + name + "'");
    }
    return name;
  }
}
