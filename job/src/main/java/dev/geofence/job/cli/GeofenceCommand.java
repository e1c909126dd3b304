package dev.geofence.job.cli;

import dev.geofence.job.operator.Uids;
import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.config.CommandLine;
import dev.geofence.connectors.config.Flag;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.config.SourceFlags;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.connectors.location.Fleet;
import dev.geofence.connectors.location.LocationSources;
import dev.geofence.connectors.location.MovingObjects;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.sink.Handover;
import dev.geofence.connectors.sink.JdbcOutputs;
import dev.geofence.connectors.sink.KafkaOutputs;
import dev.geofence.connectors.source.Migrations;
import dev.geofence.connectors.source.ReplicationSlots;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.job.GeofenceJob;
import dev.geofence.job.JobSettings;
import dev.geofence.job.handover.HandoverGate;
import dev.geofence.job.handover.SavepointSlots;
import dev.geofence.job.operator.SavepointFiles;
import dev.geofence.job.StateSettings;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.geom.InvalidPolygonPolicy;
import java.io.IOException;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.JobListener;
import org.apache.flink.core.io.SimpleVersionedSerialization;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.TimeUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The command line: {@code run} submits the job (to a cluster with {@code flink run}, or on an
 * embedded MiniCluster with {@code java -jar}); {@code demo} runs everything on this machine;
 * {@code ready} tells a readiness probe whether the running job's fence index is ready. Options
 * are stable: scripts may rely on them. Each flag of {@code run} sets one {@link GeofenceOptions}
 * key, which may as well come as {@code -Dkey=value} (before the jar on Flink's CLI, or after
 * {@code run}) or from the cluster's {@code config.yaml}; the command line wins. The fence
 * database password comes from {@value GeofenceOptions#PASSWORD_ENV}, never from the command line
 * or a configuration file, so it appears in no process list, log or help text.
 */
public final class GeofenceCommand {

  private static final Logger LOG = LoggerFactory.getLogger(GeofenceCommand.class);

  /** How often an embedded cluster's REST API fetches metrics: how stale {@code ready} may be. */
  public static final Duration READY_FRESHNESS = Duration.ofSeconds(1);

  /** Managed memory of the embedded cluster's TaskManager unless configured (RocksDB's, off the heap). */
  public static final MemorySize EMBEDDED_MANAGED_MEMORY = MemorySize.ofMebiBytes(1024);

  /** The flags of {@code run}, in the order of the help text and of docs/configuration.md's table. */
  public static final CommandLine RUN = new CommandLine(List.of(
      SourceFlags.SOURCE_URL,
      SourceFlags.SOURCE_USER,
      SourceFlags.FENCES_TABLE,
      SourceFlags.ID_COLUMN,
      SourceFlags.GEOMETRY_COLUMN,
      SourceFlags.TENANT_COLUMN,
      SourceFlags.DWELL_DELAY_COLUMN,
      SourceFlags.GEOMETRY_FORMAT,
      Flag.choice("invalid-polygons", GeofenceOptions.INVALID_POLYGONS, InvalidPolygonPolicy.class),
      Flag.number("evaluation-batch-size", "N", GeofenceOptions.EVALUATION_BATCH_SIZE),
      Flag.choice("catch-up", GeofenceOptions.CATCH_UP, CatchUp.class),
      SourceFlags.SLOT,
      Flag.text("publication", "NAME", GeofenceOptions.PUBLICATION),
      Flag.duration("heartbeat-interval", GeofenceOptions.HEARTBEAT_INTERVAL),
      Flag.choice("startup", GeofenceOptions.STARTUP, GeofenceOptions.Startup.class),
      Flag.text("locations", "SPEC", GeofenceOptions.LOCATIONS).asRequired(),
      Flag.text("locations-group", "GROUP", GeofenceOptions.LOCATIONS_GROUP).defaultingTo("the job name"),
      Flag.duration("allowed-lateness", GeofenceOptions.ALLOWED_LATENESS),
      Flag.duration("max-clock-skew", GeofenceOptions.MAX_CLOCK_SKEW),
      Flag.duration("location-out-of-orderness", GeofenceOptions.LOCATION_OUT_OF_ORDERNESS),
      Flag.number("max-held-locations", "N", GeofenceOptions.MAX_HELD_LOCATIONS),
      Flag.duration("dwell-delay", GeofenceOptions.DWELL_DELAY),
      Flag.duration("presence-timeout", GeofenceOptions.PRESENCE_TIMEOUT),
      Flag.text("job-name", "NAME", GeofenceOptions.JOB_NAME),
      Flag.text("sink-url", "URL", GeofenceOptions.SINK_URL).defaultingTo("the fence database"),
      Flag.number("sink-batch-size", "N", GeofenceOptions.SINK_BATCH_SIZE),
      Flag.duration("sink-batch-interval", GeofenceOptions.SINK_BATCH_INTERVAL),
      Flag.text("triggers-topic", "BOOTSTRAP/TOPIC", GeofenceOptions.TRIGGERS_TOPIC),
      Flag.text("triggers-transactional-id", "PREFIX", GeofenceOptions.TRIGGERS_TRANSACTIONAL_ID)
          .defaultingTo("the job name and -triggers (a standby's: and the time it started, or with --savepoint-slots the savepoint's checkpoint id)"),
      Flag.duration("hydration-retention", GeofenceOptions.HYDRATION_RETENTION),
      Flag.toggle("handover", GeofenceOptions.HANDOVER),
      Flag.toggle("standby", GeofenceOptions.STANDBY),
      Flag.text("resume-writer", "JOB_ID", GeofenceOptions.RESUME_WRITER),
      Flag.toggle("savepoint-slots", GeofenceOptions.SAVEPOINT_SLOTS),
      Flag.duration("savepoint-slot-retention", GeofenceOptions.SAVEPOINT_SLOT_RETENTION),
      Flag.duration("savepoint-slot-unread-timeout", GeofenceOptions.SAVEPOINT_SLOT_UNREAD_TIMEOUT),
      Flag.number("parallelism", "N", GeofenceOptions.PARALLELISM).defaultingTo("the cluster's"),
      Flag.text("checkpoint-dir", "URI", GeofenceOptions.CHECKPOINT_DIR),
      Flag.duration("checkpoint-interval", GeofenceOptions.CHECKPOINT_INTERVAL),
      Flag.choice("state-backend", GeofenceOptions.STATE_BACKEND, "hashmap", "rocksdb"),
      Flag.text("from-savepoint", "PATH", GeofenceOptions.FROM_SAVEPOINT),
      Flag.text("savepoint-dir", "URI", GeofenceOptions.SAVEPOINT_DIR),
      Flag.number("rest-port", "P", GeofenceOptions.REST_PORT),
      Flag.text("bind-address", "ADDR", GeofenceOptions.BIND_ADDRESS),
      Flag.family("debezium.", GeofenceOptions.DEBEZIUM_PREFIX, "Passed to Debezium as KEY.")));

  /** The help text, generated from the flags of {@code run} and {@code ready}. */
  public static final String HELP = String.join("\n",
      "Usage: java -jar geofence-job.jar run [options]      (or: flink run geofence-job.jar run [options])",
      "       java -jar geofence-job.jar demo [options]     (everything on this machine; demo --help)",
      "       java -jar geofence-job.jar ready --rest-url URL [--job NAME] (exit 0 when the index is ready; for readiness probes)",
      "       java -jar geofence-job.jar deploy --rest-url URL --from-job ID --new-slot NAME [options of run] (blue/green; deploy --help)",
      "",
      "Runs the geofence job: fences from PostgreSQL through CDC, locations from Kafka, files or a",
      "generator, ENTER/EXIT triggers into PostgreSQL tables. The password of the fence database is",
      "read from the environment variable " + GeofenceOptions.PASSWORD_ENV + ".",
      "",
      "Options of run. Each sets the configuration key below it, which may as well be given as",
      "-Dkey=value (here, or to flink run before the jar) or in the cluster's config.yaml; the job's",
      "command line wins:",
      RUN.help(),
      "",
      ReadinessProbe.OPTIONS_HELP,
      "",
      "Durations as Flink writes them: 500 ms, 10 s, 5 min, 1 h, 30 d (or 500ms, 10s, 5m).");

  private GeofenceCommand() {}

  public static void main(String[] args) throws Exception {
    int status = run(args, System.out, System.err);
    // The demo's embedded database and cluster leave threads behind, so its process ends here. A
    // successful run returns normally: in application mode this main runs inside the JobManager.
    if (status != 0 || (args.length > 0 && args[0].equals("demo"))) {
      System.exit(status);
    }
  }

  /** Runs a command as {@code main} does, printing to {@code out} and {@code err}; returns the exit status. */
  public static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
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
          prepare(RUN.parse(args, 1), System.getenv(GeofenceOptions.PASSWORD_ENV)).execute();
          return 0;
        case "demo":
          if (args.length > 1 && args[1].equals("--help")) {
            out.println(Demo.HELP);
            return 0;
          }
          Demo.run(Demo.OPTIONS.parse(args, 1), out);
          return 0;
        case "ready":
          return ReadinessProbe.command(args, out, err);
        case "deploy":
          return Deploy.run(args, out, err);
        default:
          throw new IllegalArgumentException("unknown command '" + args[0] + "'; the commands are run, demo, ready and deploy"
              + " (see --help)");
      }
    } catch (IllegalArgumentException e) {
      err.println("geofence: " + e.getMessage());
      return 2;
    }
  }

  /**
   * Builds the job in an environment from {@code given} (what the command line set) over the
   * configuration of the cluster the job is submitted to, and applies the output migration.
   */
  static StreamExecutionEnvironment prepare(Configuration given, String password) throws Exception {
    Configuration options = clusterConfiguration();
    options.addAll(given);
    RUN.checkKnown(options);
    if (options.contains(GeofenceOptions.STARTUP)) {
      // Read to refuse a bad value, as before; the value itself changes nothing any more.
      LOG.warn("option {} is deprecated and changes nothing ({}): a start without source state always streams from the slot",
          RUN.describe(GeofenceOptions.STARTUP.key()), RUN.get(options, GeofenceOptions.STARTUP).name().toLowerCase(Locale.ROOT));
    }
    FenceTableColumns columns = FenceTableColumns.from(options);
    // A damaged savepoint is refused here, in one sentence: Flink would fail its restore at every attempt.
    String savepoint = RUN.get(options, GeofenceOptions.FROM_SAVEPOINT);
    CheckpointMetadata restored = savepoint == null ? null : SavepointFiles.check(savepoint);
    String slot = RUN.get(options, GeofenceOptions.SLOT);
    boolean savepointSlots = RUN.get(options, GeofenceOptions.SAVEPOINT_SLOTS);
    SavepointSlots.Start start = savepointSlots ? SavepointSlots.start(slot, restored) : null;
    FenceSourceOptions.Builder source = FenceSourceOptions.builder()
        .url(RUN.required(options, GeofenceOptions.SOURCE_URL))
        .username(RUN.required(options, GeofenceOptions.SOURCE_USER))
        .password(password == null ? "" : password)
        .slotName(start == null ? slot : start.slot())
        .publicationName(RUN.get(options, GeofenceOptions.PUBLICATION))
        .columns(columns)
        .heartbeatInterval(RUN.get(options, GeofenceOptions.HEARTBEAT_INTERVAL));
    CommandLine.withPrefix(options, GeofenceOptions.DEBEZIUM_PREFIX).forEach(source::debeziumProperty);
    FenceSourceOptions fences = source.build();
    String jobName = RUN.get(options, GeofenceOptions.JOB_NAME);
    if (jobName.isBlank()) {
      throw new IllegalArgumentException("option " + RUN.describe(GeofenceOptions.JOB_NAME.key()) + " must not be blank");
    }
    String group = RUN.get(options, GeofenceOptions.LOCATIONS_GROUP);
    Source<String, ?, ?> locations = locations(RUN.required(options, GeofenceOptions.LOCATIONS), group == null ? jobName : group,
        restored);
    boolean standby = RUN.get(options, GeofenceOptions.STANDBY);
    String resumes = RUN.get(options, GeofenceOptions.RESUME_WRITER);
    if (standby && resumes != null) {
      throw new IllegalArgumentException("options " + RUN.describe(GeofenceOptions.STANDBY.key()) + " and "
          + RUN.describe(GeofenceOptions.RESUME_WRITER.key()) + " exclude each other: a job starts as a standby or in a writer's seat");
    }
    // Read to refuse a bad value in one sentence; StateSettings and the endpoints read it again.
    RUN.get(options, GeofenceOptions.HANDOVER);
    String sinkUrl = RUN.get(options, GeofenceOptions.SINK_URL);
    sinkUrl = sinkUrl == null ? fences.jdbcUrl() : sinkUrl;
    if (start != null) {
      if (standby || resumes != null) {
        throw new IllegalArgumentException("option " + RUN.describe(GeofenceOptions.SAVEPOINT_SLOTS.key()) + " decides from the"
            + " savepoint whether the job starts as a standby: not with " + RUN.describe(GeofenceOptions.STANDBY.key()) + " or "
            + RUN.describe(GeofenceOptions.RESUME_WRITER.key()));
      }
      standby = startsBesideWriter(start, fences, sinkUrl, jobName, restored);
    }
    String triggersTopicSpec = RUN.get(options, GeofenceOptions.TRIGGERS_TOPIC);
    Sink<GeofenceTrigger> triggersTopic = null;
    if (triggersTopicSpec != null) {
      String[] topic = kafkaTopic("--triggers-topic", triggersTopicSpec);
      String transactionalId = RUN.get(options, GeofenceOptions.TRIGGERS_TRANSACTIONAL_ID);
      // A standby writes beside the running instance, whose transactions it must not fence: a
      // prefix of its own, by default the job's with the time it was started, or with slots per
      // savepoint the savepoint's checkpoint id (the same again when application mode runs main
      // again after a JobManager failover).
      String defaultId = jobName + "-triggers" + (!standby ? "" : start != null ? "-" + restored.getCheckpointId()
          : "-" + System.currentTimeMillis());
      triggersTopic = KafkaOutputs.triggers(topic[0], topic[1], transactionalId == null ? defaultId : transactionalId,
          KafkaOutputs.DEFAULT_TRANSACTION_TIMEOUT);
      if (standby) {
        triggersTopic = KafkaOutputs.forStandby(triggersTopic);
      }
    }
    JobSettings settings = JobSettings.builder()
        .geometryFormat(RUN.get(options, GeofenceOptions.GEOMETRY_FORMAT))
        .geometryOptions(GeometryReadOptions.builder()
            .invalidPolicy(RUN.get(options, GeofenceOptions.INVALID_POLYGONS))
            .build())
        .timePolicy(new LocationTimePolicy(
            RUN.get(options, GeofenceOptions.ALLOWED_LATENESS), RUN.get(options, GeofenceOptions.MAX_CLOCK_SKEW)))
        .stayRules(new StayRules(RUN.get(options, GeofenceOptions.DWELL_DELAY), RUN.get(options, GeofenceOptions.PRESENCE_TIMEOUT)))
        .locationOutOfOrderness(RUN.get(options, GeofenceOptions.LOCATION_OUT_OF_ORDERNESS))
        .maxHeldLocations(RUN.get(options, GeofenceOptions.MAX_HELD_LOCATIONS))
        .evaluationBatchSize(RUN.get(options, GeofenceOptions.EVALUATION_BATCH_SIZE))
        .catchUp(RUN.get(options, GeofenceOptions.CATCH_UP), replaysDowntime(RUN.required(options, GeofenceOptions.LOCATIONS)))
        .build();

    Duration checkpointInterval = RUN.get(options, GeofenceOptions.CHECKPOINT_INTERVAL);
    // The gap check compares the slot's confirmed position (three checkpoints old) with the
    // position the restored state had read; heartbeats must move the latter along in between.
    if (fences.heartbeatInterval().compareTo(checkpointInterval.multipliedBy(3)) >= 0) {
      throw new IllegalArgumentException("option " + RUN.describe(GeofenceOptions.HEARTBEAT_INTERVAL.key())
          + " must be shorter than three checkpoint intervals (" + checkpointInterval.multipliedBy(3).toMillis() + " ms)");
    }
    Integer parallelism = RUN.get(options, GeofenceOptions.PARALLELISM);
    if (parallelism != null && parallelism < 1) {
      throw new IllegalArgumentException("option " + RUN.describe(GeofenceOptions.PARALLELISM.key()) + " must be at least 1");
    }
    // Read to refuse a bad value in one sentence; StateSettings reads it again.
    RUN.get(options, GeofenceOptions.STATE_BACKEND);
    // Flink reads the port from the key the flag set; read here so that a bad one fails in one sentence.
    RUN.get(options, GeofenceOptions.REST_PORT);

    // What the command line set goes to Flink as it is (its -D keys of Flink's too), with what the
    // job derives from it; the cluster's own configuration lies beneath, as Flink merges it.
    Configuration config = new Configuration(given);
    config.set(PipelineOptions.NAME, jobName);
    StateSettings.apply(config, options);
    embeddedCluster(config, options, RUN.get(options, GeofenceOptions.BIND_ADDRESS));
    // deploy submits to a session cluster from here; run lets Flink's context (or java -jar's) decide.
    StreamExecutionEnvironment env = "remote".equals(config.get(DeploymentOptions.TARGET))
        ? new StreamExecutionEnvironment(config) : StreamExecutionEnvironment.getExecutionEnvironment(config);
    env.enableCheckpointing(checkpointInterval.toMillis());
    if (parallelism != null) {
      env.setParallelism(parallelism);
    }

    JdbcConnectionOptions sink = jdbc(JdbcOutputs.withBatchedInserts(sinkUrl), fences);
    JdbcExecutionOptions batches = JdbcOutputs.batches(
        RUN.get(options, GeofenceOptions.SINK_BATCH_SIZE), RUN.get(options, GeofenceOptions.SINK_BATCH_INTERVAL));
    GeofenceJob.Endpoints endpoints =
        new GeofenceJob.Endpoints(FenceSource.create(fences), locations,
            JdbcOutputs.triggers(sink, batches), JdbcOutputs.presence(sink, batches), JdbcOutputs.deadLetters(sink, batches),
            JdbcOutputs.hydrationHistory(sink, JdbcExecutionOptions.builder().withBatchSize(1).withMaxRetries(3).build(),
                RUN.get(options, GeofenceOptions.HYDRATION_RETENTION)),
            JdbcOutputs.heartbeats(jdbc(fences.jdbcUrl(), fences), FenceSource.heartbeatSql(columns)), fences.heartbeatInterval(),
            fences);
    if (triggersTopic != null) {
      endpoints = endpoints.withTriggersTopic(triggersTopic);
    }
    if (GeofenceOptions.handsOverOutputs(options)) {
      endpoints = endpoints.withHandover(new GeofenceJob.Handover(sink, standby, resumes, start == null ? null
          : new SavepointSlots(fences, slot, RUN.get(options, GeofenceOptions.SAVEPOINT_SLOT_RETENTION),
              RUN.get(options, GeofenceOptions.SAVEPOINT_SLOT_UNREAD_TIMEOUT), start.replaces())));
    }

    // The output tables come from the shipped migration, unless they exist (a least-privileged
    // role may not create them). Last, so that every option is checked before the database is.
    try (Connection outputs = DriverManager.getConnection(sinkUrl, fences.username(), fences.password())) {
      Migrations.ensureOutputs(outputs);
    } catch (SQLException e) {
      throw new IllegalArgumentException("cannot prepare the output tables at " + FenceSourceOptions.redact(sinkUrl) + ": " + e.getMessage());
    }
    GeofenceJob.build(env, endpoints, settings);
    // The job's id names its directory under the checkpoint directory, and savepoints in-use asks
    // for it; flink run prints it, java -jar's embedded cluster did not.
    String checkpoints = options.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY);
    env.registerJobListener(new JobListener() {
      @Override
      public void onJobSubmitted(JobClient client, Throwable failure) {
        if (client != null) {
          LOG.info("Job {} submitted as {}{}", jobName, client.getJobID(), checkpoints == null ? "" : ", its checkpoints under " + checkpoints);
        }
      }

      @Override
      public void onJobExecuted(JobExecutionResult result, Throwable failure) {}
    });
    return env;
  }

  /**
   * Whether an instance with slots per savepoint starts as the standby of the running writer: when
   * restored from a savepoint taken without a stop while a writer runs (it said so within {@link
   * HandoverGate#SILENT_WRITER_MS}). Warns of a slot another instance reads.
   */
  private static boolean startsBesideWriter(SavepointSlots.Start start, FenceSourceOptions fences, String sinkUrl, String jobName,
      CheckpointMetadata restored) {
    if (!start.besideRunningOne()) {
      LOG.info("Slots per savepoint: the job reads the replication slot {}", start.slot());
      return false;
    }
    try (Connection db = SourceOfTruth.connect(fences, "geofence start")) {
      // Not refused: in application mode main runs again after a JobManager failover, while the
      // tasks of this same job may still hold the slot for a moment.
      if (ReplicationSlots.isRead(db, start.slot()).orElse(false)) {
        LOG.warn("The replication slot {}, copied at savepoint {}, is read already: this job's source fails until that reader"
            + " lets go (an earlier attempt of this job does soon; another instance restored from the same savepoint does not:"
            + " restore from a newer savepoint)", start.slot(), restored.getCheckpointId());
      }
    } catch (SQLException e) {
      throw new IllegalArgumentException("cannot read the replication slots at " + fences.jdbcUrl() + ": " + e.getMessage());
    }
    Optional<Handover.Row> row;
    try (Connection db = DriverManager.getConnection(sinkUrl, fences.username(), fences.password())) {
      Migrations.ensureOutputs(db);
      row = Handover.read(db, jobName);
    } catch (SQLException e) {
      throw new IllegalArgumentException("cannot read geofence_handover at " + FenceSourceOptions.redact(sinkUrl) + ": " + e.getMessage());
    }
    boolean writerRuns = row.isPresent() && row.get().writerSilentMillis() < HandoverGate.SILENT_WRITER_MS;
    LOG.info("Slots per savepoint: restored from savepoint {}, taken without a stop, the job reads the replication slot {}"
        + " copied then; {}; it drops the slot {} of the instance it replaces once it writes the outputs and that one is gone",
        restored.getCheckpointId(), start.slot(), writerRuns ? "it starts as the standby of the running writer " + row.get().writer()
            : "no writer runs, so it takes the outputs over", start.replaces());
    return writerRuns;
  }

  /**
   * The configuration of the cluster the job goes to, as Flink hands it to a program's {@code
   * main}: under {@code flink run} (or in application mode) the client's {@code config.yaml} with
   * Flink's own command-line options ({@code -D}, {@code -p}, {@code -s}) applied; under {@code java
   * -jar}, that of the embedded cluster, which reads no file.
   */
  private static Configuration clusterConfiguration() {
    return Configuration.fromMap(StreamExecutionEnvironment.getExecutionEnvironment().getConfiguration().toMap());
  }

  /**
   * Settings of the embedded cluster that {@code java -jar} runs (a cluster that the job is
   * submitted to keeps its own): every port it opens listens on {@code bindAddress} only, so that
   * nobody else on the network can stop the job or have it write a savepoint; and Flink's REST API
   * fetches metrics every second, so that {@code ready} answers within about a second of the truth.
   * Its managed memory, which RocksDB's write buffers and block cache share, is {@link
   * #EMBEDDED_MANAGED_MEMORY} unless configured: Flink's 128 MB for a local cluster left RocksDB
   * flushing tiny memtables and stalling its writes, and a catch-up of 2,400 edits at 1.2 M fences
   * took 41 to 80 s instead of 14.
   */
  private static void embeddedCluster(Configuration config, ReadableConfig options, String bindAddress) {
    config.set(RestOptions.BIND_ADDRESS, bindAddress);
    config.set(JobManagerOptions.BIND_HOST, bindAddress);
    config.set(TaskManagerOptions.BIND_HOST, bindAddress);
    if (options.getOptional(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL).isEmpty()) {
      config.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, READY_FRESHNESS);
    }
    if (options.getOptional(TaskManagerOptions.MANAGED_MEMORY_SIZE).isEmpty()) {
      config.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, EMBEDDED_MANAGED_MEMORY);
    }
  }

  private static JdbcConnectionOptions jdbc(String url, FenceSourceOptions credentials) {
    return new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .withUrl(url).withDriverName("org.postgresql.Driver")
        .withUsername(credentials.username()).withPassword(credentials.password()).build();
  }

  /**
   * The location source a {@code --locations} spec names; {@code restored} is the savepoint the job
   * restores from, or null.
   */
  /**
   * Whether the location source of {@code spec} resumes from its restored position and so brings
   * the locations of a downtime after a restore: Kafka and files do; the generator and the fleet
   * stamp their locations now.
   */
  static boolean replaysDowntime(String spec) {
    return spec.startsWith("kafka:") || spec.startsWith("file:");
  }

  static Source<String, ?, ?> locations(String spec, String kafkaGroup, CheckpointMetadata restored) {
    if (spec.startsWith("file:")) {
      return LocationSources.files(spec.substring(5), Duration.ofSeconds(1));
    }
    if (spec.startsWith("kafka:")) {
      String[] topic = kafkaTopic("--locations kafka:", spec.substring(6));
      return LocationSources.kafka(topic[0], topic[1], kafkaGroup);
    }
    if (spec.startsWith("generator:")) {
      long restoredAt = restored == null ? -1 : generatorPosition(SavepointFiles.readerSplits(restored, Uids.LOCATION_SOURCE));
      MovingObjects.Lines lines = generator(spec.substring(10), System.currentTimeMillis(), restoredAt);
      LOG.info("The generator's timeline starts at {} (start={}){}", Instant.ofEpochMilli(lines.objects().startMillis()),
          lines.objects().startMillis(), restoredAt < 0 ? "" : ", so that location " + restoredAt + ", where the savepoint left it,"
              + " is stamped now");
      return LocationSources.generator(lines);
    }
    if (spec.startsWith("fleet:")) {
      return LocationSources.fleet(fleet(spec.substring(6), System.currentTimeMillis()));
    }
    throw new IllegalArgumentException("--locations must start with kafka:, file:, generator: or fleet:, got '" + spec + "'");
  }

  /**
   * The lines of {@code generator:OBJECTS[,start=T]}: OBJECTS objects circling in the box
   * 0/0/10/10, one location each a second, on a timeline fixed for the whole job, so that the replay
   * of a failover emits what the first attempt did. It starts at {@code start=T} (epoch
   * milliseconds or an ISO-8601 instant) if given; else at {@code now} for a fresh start, or, for a
   * run restored from a savepoint whose generator had reached location {@code restoredAt}, so that
   * that location is stamped {@code now}: the objects go on where they were, their timeline moved
   * on by the time the job was stopped (without the move, a restored run would stamp its locations
   * ahead by as long as the runs before it lasted).
   *
   * @param restoredAt the sequence number the restored generator resumes from, or -1
   */
  static MovingObjects.Lines generator(String spec, long now, long restoredAt) {
    String usage = "--locations generator: must be generator:OBJECTS[,start=T], got 'generator:" + spec + "'";
    String[] parts = spec.split(",", -1);
    try {
      int objects = Integer.parseInt(parts[0]);
      boolean fixed = parts.length == 2 && parts[1].startsWith("start=");
      if (parts.length > 1 && !fixed) {
        throw new IllegalArgumentException(usage);
      }
      long start = fixed ? instant(parts[1].substring(6)) : restoredAt < 0 ? now : now - restoredAt / objects * GENERATOR_STEP_MS;
      return new MovingObjects.Lines(new MovingObjects(objects, 0, 0, 10, 10, start, GENERATOR_STEP_MS));
    } catch (NumberFormatException | DateTimeParseException e) {
      throw new IllegalArgumentException(usage);
    } catch (IllegalArgumentException e) {
      throw e.getMessage() != null && e.getMessage().startsWith("the generator") ? e : new IllegalArgumentException(usage);
    }
  }

  /** How far apart a generator object's locations are. */
  private static final long GENERATOR_STEP_MS = 1000;

  /** The next sequence number of a generator whose readers held these splits, or -1 if none. */
  static long generatorPosition(List<byte[]> splits) {
    SimpleVersionedSerializer<NumberSequenceSource.NumberSequenceSplit> serializer = new NumberSequenceSource(0, 0).getSplitSerializer();
    long position = -1;
    for (byte[] split : splits) {
      try {
        position = Math.max(position, SimpleVersionedSerialization.readVersionAndDeSerialize(serializer, split).from());
      } catch (IOException e) {
        throw new IllegalArgumentException("the savepoint's location source is not a generator's (" + e.getMessage()
            + "): restore it with the --locations it was taken with");
      }
    }
    return position;
  }

  /** T of {@code start=T}: epoch milliseconds or an ISO-8601 instant. */
  private static long instant(String t) {
    return t.chars().allMatch(Character::isDigit) ? Long.parseLong(t) : Instant.parse(t).toEpochMilli();
  }

  /**
   * The fleet of {@code fleet:OBJECTS[,every=D][,speed=M/S][,box=MINLON/MINLAT/MAXLON/MAXLAT][,start=T]}:
   * OBJECTS vehicles reporting every D (default 1 s) at about M/S metres per second (default 13),
   * in the box (default 0/0/10/10), from T on (epoch milliseconds or an ISO-8601 instant; default
   * {@code startMillis}). A restored fleet goes on from the location number its savepoint holds, so
   * its timeline must start where the first run's did: with a later start it would wait, emitting
   * nothing, for as long as the runs before it had lasted.
   */
  static Fleet fleet(String spec, long startMillis) {
    String usage = "--locations fleet: must be fleet:OBJECTS[,every=D][,speed=M/S][,box=MINLON/MINLAT/MAXLON/MAXLAT][,start=T],"
        + " got 'fleet:" + spec + "'";
    String[] parts = spec.split(",");
    Duration every = Duration.ofSeconds(1);
    double speed = 13;
    double[] box = {0, 0, 10, 10};
    long start = startMillis;
    try {
      int objects = Integer.parseInt(parts[0]);
      for (int i = 1; i < parts.length; i++) {
        String[] kv = parts[i].split("=", 2);
        if (kv.length != 2) {
          throw new IllegalArgumentException(usage);
        }
        switch (kv[0]) {
          case "every" -> every = TimeUtils.parseDuration(kv[1]);
          case "speed" -> speed = Double.parseDouble(kv[1]);
          case "box" -> {
            String[] corners = kv[1].split("/");
            if (corners.length != 4) {
              throw new IllegalArgumentException(usage);
            }
            for (int c = 0; c < 4; c++) {
              box[c] = Double.parseDouble(corners[c]);
            }
          }
          case "start" -> start = instant(kv[1]);
          default -> throw new IllegalArgumentException(usage);
        }
      }
      return new Fleet(objects, box[0], box[1], box[2], box[3], start, every.toMillis(), speed);
    } catch (NumberFormatException | DateTimeParseException e) {
      throw new IllegalArgumentException(usage);
    } catch (IllegalArgumentException e) {
      throw e.getMessage() != null && e.getMessage().startsWith("the fleet") ? e : new IllegalArgumentException(usage);
    }
  }

  /** BOOTSTRAP/TOPIC as {bootstrap servers, topic}. */
  private static String[] kafkaTopic(String option, String spec) {
    int slash = spec.lastIndexOf('/');
    if (slash <= 0 || slash == spec.length() - 1) {
      throw new IllegalArgumentException(option + " must be BOOTSTRAP/TOPIC (e.g. kafka:9092/geofence-triggers), got '" + spec + "'");
    }
    return new String[] {spec.substring(0, slash), spec.substring(slash + 1)};
  }
}
