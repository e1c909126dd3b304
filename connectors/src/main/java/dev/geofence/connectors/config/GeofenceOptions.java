package dev.geofence.connectors.config;

import static org.apache.flink.configuration.ConfigOptions.key;

import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.geom.InvalidPolygonPolicy;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Duration;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;

/**
 * Every option of the geofence job and of the savepoint tools' shared ones, declared once as a
 * Flink {@link ConfigOption}: key, type, default, description. The same key works in the cluster's
 * {@code config.yaml}, as {@code -Dkey=value} (on Flink's CLI before the jar, or on the job's own
 * command line), and as the command-line flag that names it ({@code --source-url} sets {@code
 * geofence.source.url}); durations and sizes parse as Flink parses them ({@code 500 ms}, {@code
 * 10s}, {@code 5 min}). Where the job sets a Flink setting, the option is Flink's own key with the
 * job's default ({@link #CHECKPOINT_INTERVAL} is {@code execution.checkpointing.interval},
 * defaulting to 10 s), so a cluster's value of that key is honoured too.
 *
 * <p>The fence database's password is never an option: it is read from {@value #PASSWORD_ENV}
 * only, so that it appears in no process list, log, help text or configuration file.
 */
public final class GeofenceOptions {

  /** The environment variable the fence database's password is read from (never a flag or key). */
  public static final String PASSWORD_ENV = "GEOFENCE_SOURCE_PASSWORD";

  // ---- the fence database (docs/source-contract.md) ---------------------------------------------

  public static final ConfigOption<String> SOURCE_URL = key("geofence.source.url").stringType().noDefaultValue()
      .withDescription("JDBC URL of the fence database, jdbc:postgresql://host:port/database.");

  public static final ConfigOption<String> SOURCE_USER = key("geofence.source.user").stringType().noDefaultValue()
      .withDescription("User of the fence database, with REPLICATION; its password is read from " + PASSWORD_ENV + ".");

  public static final ConfigOption<String> FENCES_TABLE = key("geofence.source.fences-table").stringType().defaultValue("fences")
      .withDescription("Table of fences, with the triggers of fence-versioning.sql.");

  public static final ConfigOption<String> ID_COLUMN = key("geofence.source.id-column").stringType().defaultValue("id")
      .withDescription("The fences table's id column (its primary key, text).");

  public static final ConfigOption<String> GEOMETRY_COLUMN = key("geofence.source.geometry-column").stringType().defaultValue("geom")
      .withDescription("The fences table's geometry column.");

  public static final ConfigOption<String> TENANT_COLUMN = key("geofence.source.tenant-column").stringType().defaultValue("tenant")
      .withDescription("The fences table's tenant column; a table without it has no tenants.");

  public static final ConfigOption<String> DWELL_DELAY_COLUMN = key("geofence.source.dwell-delay-column").stringType()
      .defaultValue("dwell_delay")
      .withDescription("The fences table's column of each fence's own dwell delay, an interval, read in whole milliseconds:"
          + " where set, it holds for that fence instead of geofence.triggers.dwell-delay (0: the fence never DWELLs; a negative"
          + " one is taken as 0, with a dead letter); where null, and for every fence of a table without the column, the job's"
          + " holds. A column of that name of another type fails the job at start: name another column.");

  public static final ConfigOption<GeometryFormat> GEOMETRY_FORMAT = key("geofence.source.geometry-format")
      .enumType(GeometryFormat.class).defaultValue(GeometryFormat.WKB)
      .withDescription("How the geometry column arrives: wkb (PostGIS geometry or bytea), wkt or geojson (text).");

  public static final ConfigOption<String> SLOT = key("geofence.source.slot").stringType().defaultValue("geofence")
      .withDescription("Replication slot of the CDC source.");

  public static final ConfigOption<String> PUBLICATION = key("geofence.source.publication").stringType()
      .defaultValue("geofence_publication")
      .withDescription("Publication the migration created.");

  public static final ConfigOption<Duration> HEARTBEAT_INTERVAL = key("geofence.source.heartbeat-interval").durationType()
      .defaultValue(Duration.ofSeconds(1))
      .withDescription("How often the job writes fence_heartbeat, which advances the fence clock while fences are idle;"
          + " shorter than three checkpoint intervals.");

  /**
   * The values {@link #STARTUP} once chose between. Both now mean what every start without source
   * state does: stream from the slot (a fresh index reads its own buckets of the table once the slot
   * exists; a bootstrapped savepoint holds the fences already).
   */
  public enum Startup {
    SNAPSHOT,
    SLOT
  }

  /**
   * Deprecated, and read by nothing: accepted, with its old values, so that the scripts that pass it
   * keep working.
   */
  public static final ConfigOption<Startup> STARTUP = key("geofence.source.startup").enumType(Startup.class)
      .defaultValue(Startup.SNAPSHOT)
      .withDescription("Deprecated, changes nothing (accepted for scripts' sake): a start without source state always"
          + " streams from the slot, and a fresh index reads its own buckets of the fences table once the slot exists.");

  /** Keys under this prefix are passed to Debezium, the prefix removed. */
  public static final String DEBEZIUM_PREFIX = "geofence.source.debezium.";

  public static final ConfigOption<InvalidPolygonPolicy> INVALID_POLYGONS = key("geofence.fences.invalid-polygons")
      .enumType(InvalidPolygonPolicy.class).defaultValue(InvalidPolygonPolicy.REPAIR)
      .withDescription("Policy for invalid polygons: repair (JTS GeometryFixer, reported as a warning) or reject.");

  public static final ConfigOption<Integer> EVALUATION_BATCH_SIZE = key("geofence.fences.evaluation-batch-size").intType()
      .defaultValue(64)
      .withDescription("Locations released together by the fence clock are checked against the index this many at a time"
          + " (1: one by one); larger batches trade a little latency for throughput.");

  public static final ConfigOption<CatchUp> CATCH_UP = key("geofence.fences.catch-up").enumType(CatchUp.class)
      .defaultValue(CatchUp.AUTO)
      .withDescription("How a restored index whose gap check passed catches up with the edits made since its snapshot:"
          + " REPLAY every edit from the change stream; READ the fences whose seq changed (a key-only pass over the subtask's"
          + " fences, then those rows whole); LOAD every fence of the subtask's buckets anew, as a fresh start does, the"
          + " restored fences set aside first (their members kept); or AUTO, the cheapest by the job's estimates, but READ or"
          + " LOAD only when the location source starts at the present (not kafka: or file:, which resume from the savepoint"
          + " and bring the downtime's locations). A LOAD, forced or seen to be the cheapest before the restore reads the"
          + " fences, reads from the restored state only the fences with members. After a READ or a LOAD, locations stamped"
          + " before it are BEFORE_READ dead"
          + " letters on that subtask. When every subtask reads or loads, the change stream starts where they read, and the"
          + " edits they hold are not streamed again.");

  // ---- locations ----------------------------------------------------------------------------------

  public static final ConfigOption<String> LOCATIONS = key("geofence.locations.source").stringType().noDefaultValue()
      .withDescription("Where locations come from: kafka:BOOTSTRAP/TOPIC, file:PATH (a file, or a directory watched"
          + " for new files), generator:OBJECTS[,start=T], or fleet:OBJECTS[,every=D][,speed=M/S][,box=MINLON/MINLAT/MAXLON/MAXLAT][,start=T]"
          + " (vehicles reporting in real time, for benchmarks).");

  public static final ConfigOption<String> LOCATIONS_GROUP = key("geofence.locations.kafka-group").stringType().noDefaultValue()
      .withDescription("Kafka consumer group of kafka: locations; two jobs on one topic each need their own.");

  public static final ConfigOption<Duration> ALLOWED_LATENESS = key("geofence.locations.allowed-lateness").durationType()
      .defaultValue(LocationTimePolicy.DEFAULT_ALLOWED_LATENESS)
      .withDescription("A location up to this far behind the fence clock is evaluated against the fences as they were at"
          + " its time (superseded fence versions are kept this long); a later one is a LATE dead letter.");

  public static final ConfigOption<Duration> LOCATION_OUT_OF_ORDERNESS = key("geofence.locations.out-of-orderness").durationType()
      .defaultValue(Duration.ofSeconds(1))
      .withDescription("How far the location stream's watermark trails its newest location: how much disorder within an"
          + " object's locations is put back in order before they are evaluated, and the least delay from a location to its"
          + " trigger.");

  public static final ConfigOption<Duration> DWELL_DELAY = key("geofence.triggers.dwell-delay").durationType()
      .defaultValue(Duration.ZERO)
      .withDescription("The loitering delay of every fence without a dwell delay of its own (geofence.source.dwell-delay-column):"
          + " an object inside such a fence continuously for this long in event time gets one DWELL trigger for that stay, at"
          + " its ENTER's time plus the delay: decided by its first location at or after that time, or by the fence clock once"
          + " it is past that time by the allowed lateness. 0: those fences never DWELL.");

  public static final ConfigOption<Duration> PRESENCE_TIMEOUT = key("geofence.triggers.presence-timeout").durationType()
      .defaultValue(Duration.ZERO)
      .withDescription("An object with no location for this long in event time while inside fences EXITs each of them, at its"
          + " last location's time plus the timeout, with the cause 'silence' (decided by its next location, or by the fence"
          + " clock once it is past that time by the allowed lateness); its next location starts a fresh stay."
          + " 0 turns it off: a silent object's presence then lasts until its next location.");

  public static final ConfigOption<Integer> MAX_HELD_LOCATIONS = key("geofence.locations.max-held").intType()
      .defaultValue(1_000_000)
      .withDescription("Locations a subtask of the fence index may hold while it cannot evaluate them (the index not ready,"
          + " or the fence clock behind); when full, the location sources pause until it has room for half as many.");

  public static final ConfigOption<Duration> MAX_CLOCK_SKEW = key("geofence.locations.max-clock-skew").durationType()
      .defaultValue(LocationTimePolicy.DEFAULT_MAX_CLOCK_SKEW)
      .withDescription("A location stamped more than this far ahead of the clock is a FUTURE_TIMESTAMP dead letter and"
          + " moves no watermark.");

  // ---- outputs ------------------------------------------------------------------------------------

  public static final ConfigOption<String> SINK_URL = key("geofence.sink.url").stringType().noDefaultValue()
      .withDescription("JDBC URL of the output tables.");

  public static final ConfigOption<Integer> SINK_BATCH_SIZE = key("geofence.sink.batch-size").intType().defaultValue(2000)
      .withDescription("Rows per write of each output table's sink (triggers, presence, dead letters): a write goes when"
          + " this many rows wait, when the batch interval has passed, or at a checkpoint.");

  public static final ConfigOption<Duration> SINK_BATCH_INTERVAL = key("geofence.sink.batch-interval").durationType()
      .defaultValue(Duration.ofMillis(200))
      .withDescription("The longest a row waits in a sink before it is written; 0 ms waits for a full batch or a checkpoint.");

  public static final ConfigOption<String> TRIGGERS_TOPIC = key("geofence.sink.triggers-topic").stringType().noDefaultValue()
      .withDescription("Also write the triggers to this Kafka topic, BOOTSTRAP/TOPIC, exactly once (transactions commit"
          + " with each checkpoint; read it with isolation.level=read_committed).");

  public static final ConfigOption<String> TRIGGERS_TRANSACTIONAL_ID = key("geofence.sink.triggers-transactional-id").stringType()
      .noDefaultValue()
      .withDescription("Kafka transactional id prefix of the triggers topic, unique per job and the same across restores.");

  public static final ConfigOption<Duration> HYDRATION_RETENTION = key("geofence.sink.hydration-retention").durationType()
      .defaultValue(Duration.ofDays(30))
      .withDescription("How long hydration_history keeps its rows.");

  public static final ConfigOption<Boolean> HANDOVER = key("geofence.handover.enabled").booleanType().defaultValue(false)
      .withDescription("Share the outputs through the geofence_handover row, so that a later deploy can start the next"
          + " instance beside this one and hand the outputs over without a pause (docs/deployment.md, blue/green).");

  public static final ConfigOption<Boolean> STANDBY = key("geofence.handover.standby").booleanType().defaultValue(false)
      .withDescription("Start as the standby of the running instance of the same job name: evaluate everything, write"
          + " nothing until that one hands the outputs over (the deploy command asks it to). Implies the handover.");

  public static final ConfigOption<String> RESUME_WRITER = key("geofence.handover.resume-writer").stringType().noDefaultValue()
      .withDescription("Start in the seat of this writer, a job id that ended during a handover, restored from its last"
          + " checkpoint: keep the handover under way (T and the next writer) instead of taking the outputs over. The deploy"
          + " command does this when the running job ends before it has handed over.");

  public static final ConfigOption<Boolean> SAVEPOINT_SLOTS = key("geofence.handover.savepoint-slots").booleanType()
      .defaultValue(false)
      .withDescription("Blue/green by savepoints alone, as the Flink Kubernetes Operator's FlinkBlueGreenDeployment runs it:"
          + " at each savepoint taken without stopping the job, copy its replication slot for the instance that will be"
          + " restored from it (SLOT_CHECKPOINTID); an instance restored from such a savepoint runs on that copy and starts"
          + " as the standby of the running one (or takes the outputs over if no writer runs), and drops the slot of the"
          + " instance it replaced once that one is gone. Implies the handover (docs/deployment.md, Kubernetes).");

  public static final ConfigOption<Duration> SAVEPOINT_SLOT_RETENTION = key("geofence.handover.savepoint-slot-retention")
      .durationType().defaultValue(Duration.ofHours(1))
      .withDescription("How long a slot copied at a savepoint waits for an instance restored from that savepoint before"
          + " the job drops it (a slot nobody reads keeps WAL); a later restore from that savepoint then goes through the"
          + " gap check on a new slot.");

  public static final ConfigOption<Duration> SAVEPOINT_SLOT_UNREAD_TIMEOUT = key("geofence.handover.savepoint-slot-unread-timeout")
      .durationType().defaultValue(Duration.ofMinutes(2))
      .withDescription("With slots per savepoint: how long a slot must stay unread before the job takes it for no one's and"
          + " drops it (a copy past its retention, the slot of the instance this one replaced); longer than a restart of"
          + " an instance takes, TaskManager included.");

  // ---- the job: Flink's own keys, with the job's defaults -------------------------------------------

  public static final ConfigOption<String> JOB_NAME = key(PipelineOptions.NAME.key()).stringType().defaultValue("geofence")
      .withDescription("The job's name in Flink and in hydration_history; the Kafka consumer group and transactional id derive from it.");

  public static final ConfigOption<Integer> PARALLELISM = key(CoreOptions.DEFAULT_PARALLELISM.key()).intType().noDefaultValue()
      .withDescription("Parallelism of the job.");

  public static final ConfigOption<Integer> MAX_PARALLELISM = key(PipelineOptions.MAX_PARALLELISM.key()).intType().defaultValue(128)
      .withDescription("The job's max parallelism: the key groups fences are spread over; it must divide the 4096 fence buckets"
          + " and stay the same across restores.");

  public static final ConfigOption<Duration> CHECKPOINT_INTERVAL = key(CheckpointingOptions.CHECKPOINTING_INTERVAL.key())
      .durationType().defaultValue(Duration.ofSeconds(10))
      .withDescription("Checkpoint interval.");

  public static final ConfigOption<String> CHECKPOINT_DIR = key(CheckpointingOptions.CHECKPOINTS_DIRECTORY.key()).stringType()
      .noDefaultValue()
      .withDescription("Durable checkpoint storage, e.g. file:///var/geofence/checkpoints.");

  public static final ConfigOption<String> STATE_BACKEND = key(StateBackendOptions.STATE_BACKEND.key()).stringType()
      .defaultValue("rocksdb")
      .withDescription("State backend: rocksdb (incremental checkpoints, under the changelog state backend when there is a"
          + " checkpoint directory) or hashmap (all state on the heap: for small fence sets).");

  public static final ConfigOption<String> FROM_SAVEPOINT = key(StateRecoveryOptions.SAVEPOINT_PATH.key()).stringType()
      .noDefaultValue()
      // The key Flink 1.20 still reads, and that the Kubernetes operator sets.
      .withDeprecatedKeys("execution.savepoint.path")
      .withDescription("Restore from this savepoint (under java -jar; on a cluster, flink run -s).");

  public static final ConfigOption<String> SAVEPOINT_DIR = key(CheckpointingOptions.SAVEPOINT_DIRECTORY.key()).stringType()
      .noDefaultValue()
      .withDescription("Default target of savepoints, e.g. file:///var/geofence/savepoints.");

  // ---- the embedded cluster of java -jar ---------------------------------------------------------------

  public static final ConfigOption<Integer> REST_PORT = key(RestOptions.PORT.key()).intType().defaultValue(RestOptions.PORT.defaultValue())
      .withDescription("REST port of the embedded cluster under java -jar, so that it can be stopped with a savepoint"
          + " through Flink's REST API.");

  public static final ConfigOption<String> BIND_ADDRESS = key("geofence.embedded.bind-address").stringType().defaultValue("127.0.0.1")
      .withDescription("Interface the embedded cluster's REST API and its other ports listen on under java -jar"
          + " (0.0.0.0 for every interface).");

  private GeofenceOptions() {}

  /**
   * Whether a job with {@code options} shares its outputs through the handover row: with
   * {@link #HANDOVER}, or started as a standby, in an ended writer's seat or with slots per savepoint, which imply it.
   */
  public static boolean handsOverOutputs(ReadableConfig options) {
    return options.get(HANDOVER) || options.get(STANDBY) || options.getOptional(RESUME_WRITER).isPresent()
        || options.get(SAVEPOINT_SLOTS);
  }
}
