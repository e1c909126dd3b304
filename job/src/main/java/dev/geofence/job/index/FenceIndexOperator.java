package dev.geofence.job.index;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceDecoder;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.source.SourceOfTruth;
import dev.geofence.job.hold.HoldReport;
import dev.geofence.job.hold.ReadingEvent;
import dev.geofence.job.hold.SlotReadyEvent;
import dev.geofence.job.hold.StreamStartEvent;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceIndexUnionState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.Schedule;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.readiness.CatchUp;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.util.Objects;
import org.apache.flink.api.common.operators.MailboxExecutor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.operators.coordination.OperatorEvent;
import org.apache.flink.runtime.operators.coordination.OperatorEventGateway;
import org.apache.flink.runtime.operators.coordination.OperatorEventHandler;
import org.apache.flink.runtime.state.CheckpointStreamFactory;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.OperatorSnapshotFutures;
import org.apache.flink.streaming.api.operators.StreamTaskStateInitializer;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.tasks.mailbox.TaskMailbox;
import org.apache.flink.util.OutputTag;

/**
 * The fence index operator: holds this subtask's fences (input 1, keyed by fence id) and evaluates
 * every location (input 2, broadcast to all subtasks) against them, emitting ENTER and EXIT. It is
 * the Flink wiring of parts that each own one concern, as Flink's {@code WindowOperator} is:
 *
 * <ul>
 *   <li>{@link FenceLedger} applies the edits (sequence-checked, coalesced, with their history and
 *       the buckets' fingerprints) and keeps what waits for the clock in its {@link Schedule},
 *       written through {@link FenceIndexState}, the keyed state's layout; {@link EditDecoder}
 *       turns the stream's records into its edits, bad geometries into dead letters;
 *   <li>{@link LocationPath} takes each location through the parts of its path: {@link EventClock},
 *       the event-time clock, which holds the locations that wait for it; {@link Admission}, which
 *       refuses those the time rules refuse; {@link Evaluation}, which turns the rest into triggers;
 *   <li>{@link Readiness} decides when the index is provably complete and says when it becomes so;
 *       {@link WarmUp} takes the steps to get there against the source of truth, through {@link
 *       SourceOfTruth}, whose outcomes come back through the task's mailbox; {@link
 *       HydrationRecorder} keeps the warm-up's history;
 *   <li>{@link FenceIndexUnionState} keeps what every subtask shares across a rescale; {@link
 *       HoldReport} tells the coordinator when the hold of locations is full.
 * </ul>
 *
 * <p>Everything it decides depends only on elements and watermarks, never on wall-clock time, so
 * a replay after a restore emits the same triggers, with the same deterministic ids.
 */
public final class FenceIndexOperator extends AbstractStreamOperator<GeofenceTrigger>
    implements TwoInputStreamOperator<FenceChange, Location, GeofenceTrigger>, Triggerable<FenceKey, VoidNamespace>,
    OperatorEventHandler {

  private static final long serialVersionUID = 1L;

  /** One row per warm-up of this subtask's index, for {@code hydration_history}. */
  public static final OutputTag<HydrationEpisode> HYDRATION_EPISODES =
      new OutputTag<>("hydration-episodes", TypeInformation.of(HydrationEpisode.class));

  /** Dead letters of fence edits this operator could not use as they were, and of locations time refused. */
  public static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("fence-dead-letters", TypeInformation.of(DeadLetter.class));

  /** Why state checkpointed during a fresh start's read is not trusted when restored. */
  static final String INCOMPLETE_LOAD = "the state was checkpointed while the fresh start's read of the source was under way";

  /** Why state checkpointed during a catch-up's load, its restored fences set aside, is not trusted when restored. */
  static final String INCOMPLETE_CATCH_UP_LOAD = "the state was checkpointed while a catch-up's load of the source was under way,"
      + " the restored fences set aside";

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  /** The source of truth, for the gap check on restore and rebuilds; null in tests that have none. */
  private final FenceSourceOptions source;
  /** The savepoint the job was submitted to restore from, or null: for the hydration history. */
  private final String savepointPath;
  private final LocationTimePolicy timePolicy;
  private StayRules stayRules = StayRules.OFF;
  private int maxHeldLocations = GeofenceOptions.MAX_HELD_LOCATIONS.defaultValue();
  private int evaluationBatch = GeofenceOptions.EVALUATION_BATCH_SIZE.defaultValue();
  private CatchUp catchUp = CatchUp.AUTO;
  /** Whether the location source resumes from its restored position (then the downtime's locations come). */
  private boolean locationsReplayDowntime = true;
  /** How keyed state is written: the current layout, except in tests of what another release wrote. */
  private FenceIndexState.Writing writing = FenceIndexState.Writing.CURRENT;

  private transient FenceIndexState keyed;
  /** Whether the snapshot being taken is a savepoint. */
  private transient boolean savepoint;
  private transient FenceIndexUnionState union;
  private transient FenceLedger ledger;
  private transient EditDecoder decoder;
  private transient Readiness readiness;
  private transient LocationPath locations;
  private transient WarmUp warmUp;
  private transient HydrationRecorder recorder;
  private transient HoldReport hold;
  /** What the source says a catch-up would face, asked for as a restore begins; null on a fresh start or without a source. */
  private transient CatchUpProbe probe;
  /** The coordinator, or null without one (tests). */
  private transient OperatorEventGateway coordinator;
  private transient long installedAt;
  /** The last watermark passed on. */
  private transient long emittedWatermark;

  public FenceIndexOperator(GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) {
    this(geometryOptions, geometryFormat, null, null);
  }

  /**
   * @param source the source of truth, for the gap check and rebuilds
   * @param savepointPath the savepoint the job is submitted to restore from, or null
   */
  public FenceIndexOperator(
      GeometryReadOptions geometryOptions, GeometryFormat geometryFormat, FenceSourceOptions source, String savepointPath) {
    this(geometryOptions, geometryFormat, source, savepointPath, LocationTimePolicy.defaults());
  }

  /** @param timePolicy the allowed lateness of locations, and how long fence history is kept for it */
  public FenceIndexOperator(
      GeometryReadOptions geometryOptions, GeometryFormat geometryFormat, FenceSourceOptions source, String savepointPath,
      LocationTimePolicy timePolicy) {
    this.geometryOptions = geometryOptions;
    this.geometryFormat = geometryFormat;
    this.source = source;
    this.savepointPath = savepointPath;
    this.timePolicy = timePolicy;
  }

  /**
   * Locations the clock releases together are evaluated in batches of {@code size} (1: one query
   * of the index per location); larger batches trade a little latency for throughput.
   */
  public FenceIndexOperator evaluatingInBatchesOf(int size) {
    if (size < 1) {
      throw new IllegalArgumentException("the evaluation batch size must be at least 1, got " + size);
    }
    evaluationBatch = size;
    return this;
  }

  /** At most this many locations held (the sources pause at it and resume at half of it). */
  public FenceIndexOperator maxHeldLocations(int max) {
    if (max < 1) {
      throw new IllegalArgumentException("the maximum of held locations must be positive, got " + max);
    }
    this.maxHeldLocations = max;
    return this;
  }

  /**
   * How a restore the gap check found covered catches up ({@link CatchUp}); {@code
   * locationsReplayDowntime}: whether the location source resumes from its restored position, so
   * that {@link CatchUp#AUTO} never makes the locations of the downtime dead letters.
   */
  public FenceIndexOperator catchingUp(CatchUp catchUp, boolean locationsReplayDowntime) {
    this.catchUp = Objects.requireNonNull(catchUp);
    this.locationsReplayDowntime = locationsReplayDowntime;
    return this;
  }

  /** Stays DWELL after the loitering delay, and end when their object falls silent, as the rules say. */
  public FenceIndexOperator withStays(StayRules stayRules) {
    this.stayRules = Objects.requireNonNull(stayRules);
    return this;
  }

  /**
   * Set by the operator's factory: the gateway to the coordinator that pauses the location sources
   * and holds the change stream until every subtask is ready for it.
   */
  void reportTo(OperatorEventGateway gateway) {
    hold = new HoldReport(gateway, maxHeldLocations);
    coordinator = gateway;
  }

  /** Tells the coordinator where this subtask needs the change stream from (0: where it resumes); once. */
  private void streamFrom(long position) {
    if (coordinator != null) {
      coordinator.sendEventToCoordinator(new StreamStartEvent(position));
    }
  }

  /** Tells the coordinator that this subtask reads or loads, and waits for the slot. */
  private void reading() {
    if (coordinator != null) {
      coordinator.sendEventToCoordinator(new ReadingEvent());
    }
  }

  /** From the coordinator: the job's slot is ready for this subtask's read ({@link SlotReadyEvent}). */
  @Override
  public void handleOperatorEvent(OperatorEvent event) {
    if (event instanceof SlotReadyEvent) {
      try {
        warmUp.slotReady();
      } catch (Exception e) {
        throw new IllegalStateException("The read of the source after the slot was ready could not begin", e);
      }
    }
  }

  // ---- start and restore ---------------------------------------------------------------------------

  /**
   * Notes when this subtask began to warm up, and asks the source what a catch-up would face
   * ({@link CatchUpProbe}) while the state backend restores its state, before the next call.
   */
  @Override
  public void initializeState(StreamTaskStateInitializer initializer) throws Exception {
    emittedWatermark = Long.MIN_VALUE;
    installedAt = System.currentTimeMillis();
    int maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
    int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    // Only a restore has fences to leave unread: a fresh start asks the source nothing here. Flink
    // restores this operator's state if and only if the prioritized state it is handed says so.
    boolean restoring = getContainingTask().getEnvironment().getTaskStateManager().prioritizedOperatorState(getOperatorID()).isRestored();
    probe = source == null || !restoring ? null : CatchUpProbe.ask(source, catchUp, parallelism, locationsReplayDowntime, maxParallelism,
        KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(maxParallelism, parallelism, subtask),
        "fence-catch-up-probe-" + subtask);
    super.initializeState(initializer);
  }

  @Override
  public void initializeState(StateInitializationContext context) throws Exception {
    super.initializeState(context);
    int maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    KeyGroupRange own = ownKeyGroups();
    keyed = new FenceIndexState(context.getKeyedStateStore(), getKeyedStateBackend(), writing);
    union = new FenceIndexUnionState(context.getOperatorStateStore(), writing.previousLayout());
    Schedule schedule = new Schedule();
    EventClock clock = new EventClock(schedule, timePolicy);
    BucketFingerprints fingerprints = new BucketFingerprints(maxParallelism, own.getStartKeyGroup(), own.getEndKeyGroup());
    FenceSet fences = new FenceSet(new FenceIndex());
    ledger = new FenceLedger(fences, fingerprints, schedule, keyed, clock, new LedgerListener());
    readiness = new Readiness(fingerprints, new ReadinessListener());
    decoder = new EditDecoder(new FenceDecoder(geometryOptions, geometryFormat), fences, this::deadLetter);
    Admission admission = new Admission(timePolicy, this::deadLetter);
    Evaluation evaluation = new Evaluation(fences, ledger.history(), keyed, this::emit, admission, schedule::hasExit, maxParallelism,
        own.getStartKeyGroup(), own.getEndKeyGroup(), evaluationBatch, stayRules, timePolicy.allowedLateness().toMillis());
    recorder = new HydrationRecorder(HydrationRecorder.start(installedAt, getRuntimeContext(), own, context, savepointPath),
        readiness, fences, episode -> output.collect(HYDRATION_EPISODES, new StreamRecord<>(episode)));
    if (hold == null) {
      hold = new HoldReport(null, maxHeldLocations);
    }
    locations = new LocationPath(clock, readiness, admission, evaluation, ledger, hold, recorder::update,
        own.getStartKeyGroup(), own.getEndKeyGroup());
    warmUp = new WarmUp(readiness, recorder, ledger, decoder, getProcessingTimeService(),
        source == null ? GeofenceOptions.HEARTBEAT_INTERVAL.defaultValue() : source.heartbeatInterval(), locations::releaseIfDue,
        new WarmUp.CatchUpRule(catchUp, locationsReplayDowntime, getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks(),
            admission::readAt, this::reading, this::streamFrom, coordinator != null));
    // Starting fresh and restoring share this path: on a fresh start there is nothing to read.
    new StateRestore(keyed, ledger, readiness, clock, evaluation, warmUp, recorder, decoder, admission, probe)
        .read(context.isRestored(), maxParallelism, own, union);
    // A fresh start reads its buckets from the source itself, the CDC source streaming from the
    // slot; without a source (tests), the stream alone feeds it and there is nothing to prove.
    if (source == null) {
      readiness.nothingToProve();
    } else if (!context.isRestored()) {
      readiness.loadFromSource();
    }
    recorder.restored(context.isRestored());
    FenceIndexGauges.register(getMetricGroup(), ledger, keyed, readiness, clock, admission, warmUp, recorder, locations);
  }

  @Override
  public void open() throws Exception {
    super.open();
    // The timers an earlier release set per fence to prune its history: restored so that they fire and are gone.
    getInternalTimerService(FenceIndexState.HISTORY_STATE, VoidNamespaceSerializer.INSTANCE, this);
    MailboxExecutor mailbox = getContainingTask().getMailboxExecutorFactory().createExecutor(TaskMailbox.MIN_PRIORITY);
    int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    KeyGroupRange own = ownKeyGroups();
    warmUp.open(source == null ? null : new SourceOfTruth(source, new FenceDecoder(geometryOptions, geometryFormat),
        getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks(), own.getStartKeyGroup(), own.getEndKeyGroup(),
        (action, what) -> mailbox.execute(action::run, what), warmUp, "fence-warm-up-" + subtask),
        source == null ? null : source.jdbcUrl(), readiness.streamLsn());
    // The episode's first row, so that a slow warm-up shows as it goes; a restore's comes with
    // the gap check's verdict.
    if (recorder.phase() != LoadPhase.GAP_CHECK) {
      recorder.record();
    }
    recorder.update();
    // A restored hold may be full already.
    locations.reportHold();
  }

  /** Notes whether this snapshot is a savepoint, which the state-only call below is not told. */
  @Override
  public OperatorSnapshotFutures snapshotState(long checkpointId, long timestamp, CheckpointOptions checkpointOptions,
      CheckpointStreamFactory factory) throws Exception {
    savepoint = checkpointOptions.getCheckpointType().isSavepoint();
    return super.snapshotState(checkpointId, timestamp, checkpointOptions, factory);
  }

  @Override
  public void snapshotState(StateSnapshotContext context) throws Exception {
    super.snapshotState(context);
    ledger.checkpoint();
    // Segments are rewritten only once the index is ready: a rebuild's overlays grow bucket by
    // bucket until then, and each would be rewritten many times over (a load writes the buckets
    // it reads as segments at once, FenceIndexState.flush). A savepoint holds
    // the whole state anyway, and the restore that reads it should find segments: it rewrites
    // every bucket due, a checkpoint only a budget of them.
    if (readiness.ready()) {
      keyed.rewriteSegments(!savepoint);
    }
    // A checkpoint in the middle of a fresh start's read holds only part of the fences, which no
    // stream will bring again: restored, it is read again, as a rebuild.
    String untrusted = readiness.distrust() != null ? readiness.distrust() : readiness.loading() ? INCOMPLETE_LOAD
        : warmUp.loadUnderWay() ? INCOMPLETE_CATCH_UP_LOAD : null;
    locations.checkpoint(union, untrusted, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
        getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks());
  }

  @Override
  public void close() throws Exception {
    // Null if the state could not be restored: closed all the same.
    if (warmUp != null) {
      warmUp.close();
    }
    super.close();
  }

  // ---- input 1: fence changes, keyed by fence id -------------------------------------------------

  @Override
  public void processElement1(StreamRecord<FenceChange> record) throws Exception {
    FenceChange change = record.getValue();
    if (change.kind == FenceChange.Kind.BUCKET_STATS) {
      if (change.snapshot) {
        readiness.versionKnown(change.bucket, change.seq);
      } else {
        readiness.versionStreamed(change.bucket, change.seq);
      }
    }
    if (!change.snapshot) {
      readiness.streamed(change.lsn, change.commitTime);
      warmUp.streamed(change);
    }
    readiness.proveVersionsOnceCaughtUp();
    if (change.kind == FenceChange.Kind.HEARTBEAT) {
      // Keyed like key group change.bucket: this subtask's record of how far the stream has got.
      keyed.position(change.bucket, FenceIndexState.positionOf(change));
    } else {
      if (change.kind == FenceChange.Kind.FENCE && !change.snapshot) {
        recorder.editReceived();
      }
      Queued queued = decoder.decode(change);
      if (change.snapshot) {
        ledger.read(queued);
      } else {
        ledger.receive(queued);
      }
    }
    recorder.update();
    locations.releaseIfDue();
  }

  // ---- input 2: locations, broadcast ---------------------------------------------------------------

  @Override
  public void processElement2(StreamRecord<Location> record) throws Exception {
    locations.location(record.getValue());
  }

  // ---- the clock -----------------------------------------------------------------------------------

  @Override
  public void processWatermark(Watermark mark) throws Exception {
    // Called with the combined watermark of both inputs (idle inputs excluded).
    if (locations.advanceTo(mark.getTimestamp())) {
      warmUp.maybeReread(locations.time());
    }
    // The watermark it passes on says every trigger before it has been emitted (the handover's
    // old writer knows its share is whole by it): none while the index is not ready, and never
    // past a location it still holds.
    long emitted = locations.emittedUpTo();
    if (emitted > emittedWatermark) {
      emittedWatermark = emitted;
      super.processWatermark(new Watermark(emitted));
    }
  }

  @Override
  public void processWatermark2(Watermark mark) throws Exception {
    locations.locationWatermark(mark.getTimestamp());
    super.processWatermark2(mark);
  }

  /**
   * A timer of an earlier release, which pruned each fence's history by timers, restored from its
   * savepoint: the versions it was for are pruned with the rest, so it has nothing left to do.
   */
  @Override
  public void onEventTime(InternalTimer<FenceKey, VoidNamespace> timer) {}

  @Override
  public void onProcessingTime(InternalTimer<FenceKey, VoidNamespace> timer) {
    throw new IllegalStateException("the fence index sets no processing-time timers on keys");
  }

  private KeyGroupRange ownKeyGroups() {
    return ((CheckpointableKeyedStateBackend<?>) getKeyedStateBackend()).getKeyGroupRange();
  }

  private void emit(GeofenceTrigger trigger) {
    output.collect(new StreamRecord<>(trigger, trigger.eventTime));
  }

  private void deadLetter(DeadLetter letter) {
    output.collect(DEAD_LETTERS, new StreamRecord<>(letter));
  }

  /** What the ledger tells the operator: a gap distrusts the index; a delete EXITs the members of the versions before it. */
  private final class LedgerListener implements FenceLedger.Listener {
    @Override
    public void gap(String reason) {
      readiness.distrust(reason);
    }

    @Override
    public void exitMembers(String fenceId, long deletedAt, long seq) throws Exception {
      locations.deleted(fenceId, keyed.takeMembersBefore(fenceId, seq), deletedAt, seq);
    }
  }

  /** What readiness tells the operator: held locations are due; an untrusted index is rebuilt. */
  private final class ReadinessListener implements Readiness.Listener {
    @Override
    public void becameReady() {
      locations.becameReady();
    }

    @Override
    public void distrusted(String reason) {
      try {
        warmUp.distrusted(reason);
      } catch (Exception e) {
        throw new IllegalStateException("could not start the rebuild after: " + reason, e);
      }
    }
  }

  // ---- a view for tests ----------------------------------------------------------------------------

  /** How this operator writes keyed state: as another release would, in tests of restoring it. */
  FenceIndexOperator writing(FenceIndexState.Writing writing) {
    this.writing = writing;
    return this;
  }

  /** What tests may see of a running operator, as it is now. */
  View view() {
    Admission admission = locations.admission();
    return new View(recorder.phase(), ledger.fences(), warmUp.running(), ledger.history().versions(), admission.lateCount(),
        admission.tooLateCount(), admission.outOfOrderCount(), keyed.movedFromPerFenceLayout(), keyed.segmentsRewrittenCount(),
        locations.objects());
  }

  /**
   * @param recovering whether a gap check or a read of the source is under way
   * @param movedFromPerFenceLayout how many fences the restore moved from the per-fence layout into the bucket maps
   * @param segmentsRewritten how many buckets' segments the snapshots of this subtask wrote
   */
  record View(LoadPhase phase, FenceSet fences, boolean recovering, long historyVersions, long lateLocations,
      long tooLateLocations, long outOfOrderLocations, int movedFromPerFenceLayout, long segmentsRewritten, int objects) {}
}
