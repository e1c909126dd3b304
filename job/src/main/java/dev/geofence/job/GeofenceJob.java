package dev.geofence.job;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.handover.HandoverGate;
import dev.geofence.job.handover.SavepointSlots;
import dev.geofence.job.hold.GatedFenceSource;
import dev.geofence.job.hold.GatedLocationSource;
import dev.geofence.job.index.FenceIndexOperator;
import dev.geofence.job.operator.Uids;
import dev.geofence.job.index.FenceIndexOperatorFactory;
import dev.geofence.job.operator.FenceKey;
import java.time.Duration;
import java.util.UUID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSource;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

/**
 * The job's data flow, given its sources and sinks: fence changes from CDC, keyed by fence id;
 * locations parsed and broadcast to every subtask; the fence index operator between them; triggers,
 * presence and dead letters out. {@code main} lives in {@link dev.geofence.job.cli.GeofenceCommand};
 * tests wire their own sources and sinks here.
 *
 * <p>Every operator has a constant uid ({@link Uids}), which the savepoint tools share.
 */
public final class GeofenceJob {


  /** The fence index operator's name, which Flink's REST API lists its vertex under (the ready probe finds it so). */
  public static final String FENCE_INDEX_NAME = "Fence index";

  /** The handover operator's name, which the ready probe finds its vertex by. */
  public static final String HANDOVER_NAME = "Handover";

  /**
   * What the job reads and writes.
   *
   * @param hydrationHistory receives a row per warm-up of each subtask's index, updated as it goes
   * @param heartbeats writes the source's heartbeat row once per tick; the job ticks every {@code
   *     heartbeatInterval}
   * @param sourceOfTruth where the fence database is, for the gap check on restore
   * @param triggersTopic where the triggers also go (a topic, exactly once), or null
   * @param handover how this instance shares the outputs with another one, or null to write them
   *     all without a handover row
   */
  public record Endpoints(
      Source<FenceChange, ?, ?> fences, Source<String, ?, ?> locations, Sink<GeofenceTrigger> triggers,
      Sink<GeofenceTrigger> presence, Sink<DeadLetter> deadLetters, Sink<HydrationEpisode> hydrationHistory,
      Sink<Long> heartbeats, Duration heartbeatInterval, FenceSourceOptions sourceOfTruth,
      Sink<GeofenceTrigger> triggersTopic, Handover handover) {

    /** Endpoints without a triggers topic. */
    public Endpoints(
        Source<FenceChange, ?, ?> fences, Source<String, ?, ?> locations, Sink<GeofenceTrigger> triggers,
        Sink<GeofenceTrigger> presence, Sink<DeadLetter> deadLetters, Sink<HydrationEpisode> hydrationHistory,
        Sink<Long> heartbeats, Duration heartbeatInterval, FenceSourceOptions sourceOfTruth) {
      this(fences, locations, triggers, presence, deadLetters, hydrationHistory, heartbeats, heartbeatInterval, sourceOfTruth,
          null, null);
    }

    /** These endpoints, the triggers also going to {@code sink} (a topic, exactly once). */
    public Endpoints withTriggersTopic(Sink<GeofenceTrigger> sink) {
      return new Endpoints(fences, locations, triggers, presence, deadLetters, hydrationHistory, heartbeats,
          heartbeatInterval, sourceOfTruth, sink, handover);
    }

    /** These endpoints, the outputs written as {@code handover} shares them. */
    public Endpoints withHandover(Handover handover) {
      return new Endpoints(fences, locations, triggers, presence, deadLetters, hydrationHistory, heartbeats,
          heartbeatInterval, sourceOfTruth, triggersTopic, handover);
    }
  }

  /**
   * How an instance shares the outputs with another while both run (a blue/green deploy): through
   * the {@code geofence_handover} row in the output database ({@link HandoverGate}).
   *
   * @param outputs the output database, which holds the row
   * @param standby whether this instance starts as the standby of the running one, writing nothing
   *     until that one hands over; otherwise it takes the outputs over at once
   * @param resumes the writer, a job that ended, whose seat this instance takes (restored from its
   *     last checkpoint, it goes on with the handover under way), or null
   * @param slots the replication slots per savepoint, with which savepoints alone make blue/green
   *     deploys, or null
   */
  public record Handover(JdbcConnectionOptions outputs, boolean standby, String resumes, SavepointSlots slots) {
    public Handover {
      if (standby && resumes != null) {
        throw new IllegalArgumentException("an instance starts as a standby or in a writer's seat, not both");
      }
    }

    public Handover(JdbcConnectionOptions outputs, boolean standby) {
      this(outputs, standby, null, null);
    }
  }

  /** Max parallelism when the environment sets none; it must divide the 4096 fence buckets. */
  public static final int DEFAULT_MAX_PARALLELISM = 128;

  private GeofenceJob() {}

  private static <S extends SourceSplit, E> Source<String, S, E> gated(Source<String, S, E> locations, String token) {
    return new GatedLocationSource<>(locations, token);
  }

  /**
   * Event time of the locations: their own timestamps, a watermark that trails the newest by the
   * out-of-orderness (what a location waits at least before it is evaluated, and how much disorder
   * within an object's locations is sorted out before the order rule refuses the older), and that
   * stops holding the clock back after the idleness.
   */
  static WatermarkStrategy<Location> locationTime(JobSettings settings) {
    return WatermarkStrategy.<Location>forBoundedOutOfOrderness(settings.locationOutOfOrderness())
        .withTimestampAssigner((l, ts) -> l.timestamp)
        .withIdleness(settings.locationIdleness());
  }

  /** Adds the job's data flow to {@code env}. */
  public static void build(StreamExecutionEnvironment env, Endpoints endpoints, JobSettings settings) {
    // Fence changes carry their commit time; heartbeats advance it while fences are idle. The CDC
    // stream is read by one reader, so one source subtask keeps its watermark simple.
    // The fence index pauses the location source while its hold is full, and holds the change
    // stream until every subtask knows where it needs it from (its coordinator and the sources'
    // enumerators meet by this token, one per built job).
    String holdToken = UUID.randomUUID().toString();
    DataStream<FenceChange> changes = env
        .fromSource(
            new GatedFenceSource<>(endpoints.fences(), holdToken),
            WatermarkStrategy.<FenceChange>forMonotonousTimestamps().withTimestampAssigner((c, ts) -> c.commitTime),
            "Fence changes (CDC)", TypeInformation.of(FenceChange.class))
        .uid(Uids.FENCE_SOURCE)
        .setParallelism(1);
    // Every subtask must know how far the stream has got (for the gap check on restore), so each
    // heartbeat goes to every key group, as a copy keyed like bucket g (key group g).
    if (env.getMaxParallelism() <= 0) {
      env.setMaxParallelism(DEFAULT_MAX_PARALLELISM);
    }
    int keyGroups = env.getMaxParallelism();
    DataStream<FenceChange> edits = changes
        .flatMap((FenceChange c, Collector<FenceChange> out) -> {
          if (c.kind == FenceChange.Kind.HEARTBEAT) {
            for (int g = 0; g < keyGroups; g++) {
              out.collect(c.copyForKeyGroup(g));
            }
          } else {
            out.collect(c);
          }
        })
        .returns(FenceChange.class)
        .name("Fence edits, bucket fingerprints, stream position")
        .setParallelism(1);

    DataStreamSource<String> lines = env
        .fromSource(gated(endpoints.locations(), holdToken), WatermarkStrategy.noWatermarks(), "Location lines", Types.STRING);
    if (endpoints.locations() instanceof DataGeneratorSource) {
      // A generator numbers its locations in one sequence, which is also its timeline: split over
      // readers, all but the first would start far in the future.
      lines.setParallelism(1);
    }
    SingleOutputStreamOperator<Location> locations = lines
        .uid(Uids.LOCATION_SOURCE)
        .process(new ParseLocations(settings.timePolicy()))
        .uid(Uids.PARSE_LOCATIONS)
        .name("Parse locations");
    DataStream<Location> timed = locations.assignTimestampsAndWatermarks(locationTime(settings)).name("Location event time");

    SingleOutputStreamOperator<GeofenceTrigger> triggers = edits
        .keyBy(FenceKey::of, TypeInformation.of(FenceKey.class))
        .connect(timed.broadcast())
        .transform(FENCE_INDEX_NAME, TypeInformation.of(GeofenceTrigger.class),
            new FenceIndexOperatorFactory(
                new FenceIndexOperator(settings.geometryOptions(), settings.geometryFormat(), endpoints.sourceOfTruth(),
                    env.getConfiguration().get(StateRecoveryOptions.SAVEPOINT_PATH), settings.timePolicy())
                    .maxHeldLocations(settings.maxHeldLocations())
                    .evaluatingInBatchesOf(settings.evaluationBatchSize())
                    .catchingUp(settings.catchUp(), settings.locationsReplayDowntime())
                    .withStays(settings.stayRules()),
                holdToken, endpoints.sourceOfTruth()))
        .uid(Uids.FENCE_INDEX);

    // The heartbeat: a row written at the source every interval, read back by the CDC source.
    env.fromSource(
            new DataGeneratorSource<>(n -> n, Long.MAX_VALUE,
                RateLimiterStrategy.perSecond(1000.0 / endpoints.heartbeatInterval().toMillis()), Types.LONG),
            WatermarkStrategy.noWatermarks(), "Heartbeat ticks")
        .uid(Uids.HEARTBEAT_TICKS)
        .setParallelism(1)
        .sinkTo(endpoints.heartbeats())
        .uid(Uids.HEARTBEAT_SINK)
        .name("fence_heartbeat")
        .setParallelism(1);

    DataStream<GeofenceTrigger> written = triggers;
    DataStream<GeofenceTrigger> presence = triggers;
    if (endpoints.handover() != null) {
      SingleOutputStreamOperator<GeofenceTrigger> share = triggers
          .transform(HANDOVER_NAME, TypeInformation.of(GeofenceTrigger.class), new HandoverGate(endpoints.handover().outputs(),
              endpoints.handover().standby(), endpoints.handover().resumes(), settings.timePolicy().allowedLateness().toMillis(),
              endpoints.handover().slots()))
          .uid(Uids.HANDOVER);
      written = share;
      presence = share.getSideOutput(HandoverGate.PRESENCE);
    }
    written.sinkTo(endpoints.triggers()).uid(Uids.TRIGGERS_SINK).name("geofence_triggers");
    presence.sinkTo(endpoints.presence()).uid(Uids.PRESENCE_SINK).name("geofence_presence");
    if (endpoints.triggersTopic() != null) {
      written.sinkTo(endpoints.triggersTopic()).uid(Uids.TRIGGERS_TOPIC_SINK).name("Triggers topic");
    }
    triggers.getSideOutput(FenceIndexOperator.DEAD_LETTERS)
        .union(locations.getSideOutput(ParseLocations.DEAD_LETTERS))
        .sinkTo(endpoints.deadLetters())
        .uid(Uids.DEAD_LETTERS_SINK)
        .name("geofence_dead_letters");
    triggers.getSideOutput(FenceIndexOperator.HYDRATION_EPISODES)
        .sinkTo(endpoints.hydrationHistory())
        .uid(Uids.HYDRATION_SINK)
        .name("hydration_history");
  }
}
