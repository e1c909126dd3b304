package dev.geofence.job.index;

import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.job.operator.PendingLocation;
import dev.geofence.job.operator.StoredFence;
import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.job.operator.StoredFingerprint;
import dev.geofence.job.operator.StoredPosition;
import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.hold.HeldLocationsEvent;
import dev.geofence.state.edit.CoalescedEdit;
import dev.geofence.state.edit.EditCoalescer;
import dev.geofence.state.edit.EditKind;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.EditOutcome;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.readiness.LoadPhase;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.time.FenceHistory;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.operators.coordination.OperatorEventGateway;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.InternalTimer;
import org.apache.flink.streaming.api.operators.StreamTaskStateInitializer;
import org.apache.flink.streaming.api.operators.Triggerable;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.OutputTag;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fence index operator: holds this subtask's fences (input 1, keyed by fence id) and evaluates
 * every location (input 2, broadcast to all subtasks) against them, emitting ENTER and EXIT. It is
 * the Flink wiring of parts that each own one concern: {@link FenceIndexState} lays out its keyed
 * state, {@link Readiness} decides when the index is provably complete, {@link RecoverySteps} takes the
 * steps to a trusted index (gap check, load, rebuild, re-read, retry), {@link Recovery} doing their
 * work against the source of truth off the task thread, {@link
 * HydrationRecorder} keeps the warm-up's history, {@link EventClock} orders edits and locations in
 * event time, and {@link Evaluation} turns locations into triggers.
 *
 * <p><b>State.</b> Keyed by {@link FenceKey}, so a subtask owns whole buckets of fences: each
 * bucket's fences ({@link StoredFence}) and fingerprint, each fence's objects, queued edits and
 * versions ({@link FenceIndexState}, which also moves the layouts of earlier releases). In memory,
 * rebuilt from keyed state on every start: the {@link FenceSet} (versions, spatial index,
 * checksum), the readiness and the object-to-fences map. Locations not yet evaluated, and the
 * clock, are kept in union operator state: every subtask holds the same at a checkpoint barrier,
 * each entry with the key groups it is owed to.
 *
 * <p><b>Time.</b> A location with event time t is evaluated against the fences holding exactly the
 * edits committed at or before t ({@link EventClock}). Snapshot reads, which carry no commit time,
 * are applied on arrival. A location older than the clock when it arrives is evaluated at once,
 * against the fence versions of its time ({@link FenceHistory}, kept for the allowed lateness, in
 * keyed state as each checkpoint finds it), or, beyond the lateness, is a {@code LATE} dead
 * letter ({@link LocationTimePolicy}); one older than its object's newest is {@code OUT_OF_ORDER}
 * ({@link Evaluation}). Everything depends only on elements and watermarks, never on wall-clock
 * time, so a replay after a restore emits the same triggers, with the same deterministic ids.
 *
 * <p><b>Hold.</b> Locations wait in state while the index is not ready or the clock is behind them;
 * at {@code maxHeldLocations} the subtask tells its coordinator, which pauses the location source
 * until the hold is down to half ({@link dev.geofence.job.hold.HoldCoordinator}).
 *
 * <p><b>Bad input.</b> A fence geometry that does not decode goes to the dead-letter side output
 * with its reason; the edit still consumes its seq and the previous geometry stays in force. A
 * repaired geometry is used and reported as a warning.
 */
public final class FenceIndexOperator extends AbstractStreamOperator<GeofenceTrigger>
    implements TwoInputStreamOperator<FenceChange, Location, GeofenceTrigger>, Triggerable<FenceKey, VoidNamespace> {

  private static final long serialVersionUID = 1L;

  /** One row per warm-up of this subtask's index, for {@code hydration_history}. */
  public static final OutputTag<HydrationEpisode> HYDRATION_EPISODES =
      new OutputTag<>("hydration-episodes", TypeInformation.of(HydrationEpisode.class));

  /** Dead letters of fence edits this operator could not use as they were, and of locations time refused. */
  public static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("fence-dead-letters", TypeInformation.of(DeadLetter.class));

  /** Why state checkpointed during a fresh start's read is not trusted when restored. */
  static final String INCOMPLETE_LOAD = "the state was checkpointed while the fresh start's read of the source was under way";

  /**
   * The default of {@code --max-held-locations}. A ready index holds every location until the fence
   * clock passes its time, about two seconds of locations at the default lags (the clock steps a
   * heartbeat at a time, and trails it by the stream's latency): 400,000 at the 200,000 a second a
   * fleet of that many vehicles reports each second. Below that the source pauses again and again
   * and the job falls behind a fleet it could keep up with (100,000 did at 100,000 a second:
   * docs/performance/journal.md, "2026-12-01: the whole job with a fleet").
   */
  public static final int DEFAULT_MAX_HELD_LOCATIONS = GeofenceOptions.MAX_HELD_LOCATIONS.defaultValue();

  /**
   * Locations per query of the index when the clock releases many: 64 points give nearly all of
   * the batch query's gain over single points at 1.2 M fences (docs/performance/journal.md, "2026-12-01: the index alone after issue 18"), and add
   * about 33 µs of evaluation before the first answer.
   */
  public static final int DEFAULT_EVALUATION_BATCH_SIZE = GeofenceOptions.EVALUATION_BATCH_SIZE.defaultValue();

  /** Objects' newest times are pruned only beyond this many, so that a small fleet costs no pruning. */
  private static final int MIN_OBJECTS_KEPT = 1024;

  /** This operator's own logger (hiding AbstractStreamOperator's), so its phases can be followed. */
  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  /** The source of truth, for the gap check on restore and rebuilds; null in tests that have none. */
  private final FenceSourceOptions source;
  /** The savepoint the job was submitted to restore from, or null: for the hydration history. */
  private final String savepointPath;
  private final LocationTimePolicy timePolicy;
  /** How many locations a subtask holds before it asks for the location sources to pause. */
  private int maxHeldLocations = DEFAULT_MAX_HELD_LOCATIONS;
  /** Where this subtask says its hold is full, or null when it runs without a coordinator (tests). */
  private transient OperatorEventGateway holdGateway;
  private transient boolean holdFull;
  /** Locations the clock releases together go to the index in batches of this many. */
  private int evaluationBatch = DEFAULT_EVALUATION_BATCH_SIZE;
  /** Writes the current format, except in tests of state an other release wrote. */
  private StoredFenceSerializer fenceSerializer = StoredFenceSerializer.INSTANCE;
  /** See {@link #writingPreviousLayout()}. */
  private boolean previousLayout;

  private transient FenceIndexState state;
  private transient ListState<PendingLocation> pendingLocationsState;
  private transient ListState<Long> clockState;
  private transient ListState<String> untrustedState;
  private transient ListState<Tuple2<String, Long>> objectTimesState;

  private transient FenceSet fences;
  private transient FenceHistory history;
  private transient FenceDecoder decoder;
  private transient Readiness readiness;
  private transient HydrationRecorder recorder;
  private transient EventClock clock;
  private transient Evaluation evaluation;
  private transient RecoverySteps recoverySteps;
  private transient int maxParallelism;
  private transient KeyGroupRange ownKeyGroups;
  private transient long installedAt;
  private transient long lateLocations;
  private transient long tooLateLocations;
  private transient long outOfOrderLocations;
  /** When the objects' newest times are next pruned (see {@link #processWatermark}). */
  private transient int forgetObjectsAbove = MIN_OBJECTS_KEPT;
  /** Fence edits received from the stream, applied or still queued. */
  private transient long editsReceived;
  private transient long restoredLsn;
  private transient long restoredTime;
  /** Whether the index has been ready in this attempt: until then it warms up, and edits go ahead of held locations. */
  private transient boolean everReady;

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

  // ---- start and restore ---------------------------------------------------------------------------

  /**
   * Notes when this subtask began to warm up: the state backend restores its state (a heap
   * backend reads all of it, RocksDB its files) before {@link #initializeState(StateInitializationContext)}.
   */
  @Override
  public void initializeState(StreamTaskStateInitializer initializer) throws Exception {
    installedAt = System.currentTimeMillis();
    super.initializeState(initializer);
  }

  @Override
  public void initializeState(StateInitializationContext context) throws Exception {
    super.initializeState(context);
    state = new FenceIndexState(context.getKeyedStateStore(), getKeyedStateBackend(), fenceSerializer, previousLayout);
    pendingLocationsState = context.getOperatorStateStore().getUnionListState(
        new ListStateDescriptor<>("pending-locations", TypeInformation.of(PendingLocation.class)));
    clockState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));
    untrustedState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("untrusted", Types.STRING));
    objectTimesState = context.getOperatorStateStore().getUnionListState(
        new ListStateDescriptor<>("object-times", Types.TUPLE(Types.STRING, Types.LONG)));

    maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    ownKeyGroups = ((CheckpointableKeyedStateBackend<?>) getKeyedStateBackend()).getKeyGroupRange();
    decoder = new FenceDecoder(geometryOptions, geometryFormat);
    fences = new FenceSet(new FenceIndex());
    history = new FenceHistory();
    readiness = new Readiness(maxParallelism, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
    clock = new EventClock();
    evaluation = new Evaluation(fences, history, state.membership(), this::emit, this::outOfOrder, clock::exitPending,
        maxParallelism, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup(), evaluationBatch);
    recorder = new HydrationRecorder(describeStart(context), readiness, fences, () -> editsReceived,
        episode -> output.collect(HYDRATION_EPISODES, new StreamRecord<>(episode)));
    recoverySteps = new RecoverySteps(source, readiness, recorder, fences, getProcessingTimeService(), new ReadInto());

    // Starting fresh and restoring share this path: on a fresh start there is nothing to read.
    restoreFromKeyedState(context.isRestored());
    // Each old subtask wrote what it still owed; take what is owed to key groups now ours.
    for (PendingLocation owed : pendingLocationsState.get()) {
      int start = Math.max(owed.keyGroupStart, ownKeyGroups.getStartKeyGroup());
      int end = Math.min(owed.keyGroupEnd, ownKeyGroups.getEndKeyGroup());
      if (start <= end) {
        clock.hold(owed.location, start, end);
      }
    }
    for (Long restored : clockState.get()) {
      clock.advanceTo(restored);
    }
    for (Tuple2<String, Long> newest : objectTimesState.get()) {
      evaluation.restoreNewest(newest.f0, newest.f1);
    }
    restoredLsn = readiness.streamLsn();
    restoredTime = readiness.streamTime();
    // Distrust outlives restarts: state restored across a gap stays untrusted until rebuilt, even
    // if a later checkpoint of it would pass the check.
    for (String reason : untrustedState.get()) {
      readiness.distrust(reason);
    }
    if (recoverySteps.unreadableCount() > 0) {
      String reason = recoverySteps.unreadableCount() + " restored fences are of a state format this release cannot read (it reads "
          + StoredFenceSerializer.FORMAT_VERSION + ")";
      readiness.distrust(reason);
      LOG.warn("{}; the index is rebuilt from the source", reason);
    }
    // A fresh start reads its buckets from the source itself, the CDC source streaming from the
    // slot; without a source (tests), the stream alone feeds it and there is nothing to prove.
    if (source == null) {
      readiness.nothingToProve();
    } else if (!context.isRestored()) {
      readiness.loadFromSource();
    }
    HydrationEpisode episode = recorder.episode();
    if (context.isRestored()) {
      episode.restoredLsn = Lsn.format(restoredLsn);
      episode.restoredCommitTime = restoredTime;
      episode.gapCheck = readiness.distrust() == null ? "not-needed" : "gap";
      episode.gapReason = readiness.distrust();
    }
    recorder.countFromHere();
  }

  private HydrationEpisode describeStart(StateInitializationContext context) {
    HydrationEpisode episode = new HydrationEpisode();
    episode.installedAt = installedAt;
    episode.jobName = getRuntimeContext().getJobInfo().getJobName();
    episode.jobId = getRuntimeContext().getJobInfo().getJobId().toString();
    episode.subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    episode.attempt = getRuntimeContext().getTaskInfo().getAttemptNumber();
    episode.keyGroupStart = ownKeyGroups.getStartKeyGroup();
    episode.keyGroupEnd = ownKeyGroups.getEndKeyGroup();
    if (!context.isRestored()) {
      episode.startMode = "fresh";
      episode.gapCheck = "not-needed";
    } else if (savepointPath != null && episode.attempt == 0) {
      episode.startMode = "savepoint";
      episode.restoredFrom = savepointPath;
    } else {
      episode.startMode = "checkpoint";
      episode.restoredFrom = context.getRestoredCheckpointId().isPresent()
          ? "checkpoint " + context.getRestoredCheckpointId().getAsLong() : null;
    }
    return episode;
  }

  private void restoreFromKeyedState(boolean restored) throws Exception {
    List<FenceEdit> stored = new ArrayList<>();
    if (restored) {
      recorder.enter(LoadPhase.RESTORING);
    }
    // Each fence counts in the fingerprint of the bucket it is stored in, which the read knows:
    // hashing its id again would cost an MD5 per fence, and where it is stored is what this
    // subtask answers for.
    state.readFences(maxParallelism, ownKeyGroups, (bucket, id, fence) -> {
      if (fence == StoredFence.UNREADABLE) {
        recoverySteps.unreadable(id);
      } else {
        stored.add(fence.asSnapshotEdit(id));
        if (!fence.deleted()) {
          readiness.fingerprints().add(bucket, id, fence.seq());
        }
      }
    });
    if (restored) {
      recorder.episode().restoredAt = System.currentTimeMillis();
      recorder.enter(LoadPhase.INDEXING);
    }
    for (FenceEdit edit : stored) {
      readiness.streamed(edit.commitLsn(), edit.commitTimeMillis());
      fences.apply(edit);
    }
    // Packed now, while the CDC source restarts, not by the first query once ready: that repack
    // of every fence held the first locations after a restore (a fifth of the restoring
    // threads' CPU in a profile: docs/performance/journal.md, "2026-12-03: the index packed by the restore").
    fences.index().prepareForQuery();
    List<Integer> readFingerprints = new ArrayList<>();
    state.readTheRest(new FenceIndexState.Restored() {
      @Override
      public void fingerprint(StoredFingerprint stats) {
        readiness.fingerprints().expect(stats.bucket(), stats.fenceCount(), stats.checksum(), stats.version());
        readiness.versions().known(stats.bucket(), stats.version());
        readiness.streamed(stats.lsn(), stats.commitTime());
        if (stats.commitTime() > 0) {
          recoverySteps.fingerprint(stats.bucket(), stats.commitTime());
        } else {
          readFingerprints.add(stats.bucket());
        }
      }

      @Override
      public void position(StoredPosition position) {
        readiness.streamed(position.lsn(), position.commitTime());
      }

      @Override
      public void member(String fenceId, String objectId) {
        evaluation.restoreMember(fenceId, objectId);
      }

      @Override
      public void version(String fenceId, long until, StoredFence version) {
        history.restored(fenceId, new FenceHistory.Version(version.seq(), version.geometry(), version.tenant(), until));
      }

      @Override
      public void pendingEdit(String key, FenceChange change) {
        clock.queueEdit(change.commitTime, key);
        if (change.kind == FenceChange.Kind.BUCKET_STATS) {
          readiness.versions().known(change.bucket, change.seq);
        }
      }

      @Override
      public void pendingExit(String fenceId, long time) {
        clock.queueExit(time, fenceId);
      }
    });
    // A restored bucket that stays mismatched is healed like any other: a fingerprint a read took
    // carries no commit time, and is as old as the newest the state had streamed, which every
    // restored pending edit is no newer than.
    for (int bucket : readFingerprints) {
      recoverySteps.fingerprint(bucket, readiness.streamTime());
    }
    if (restored) {
      recorder.episode().indexedAt = System.currentTimeMillis();
    }
  }

  @Override
  public void open() throws Exception {
    super.open();
    // The timers an earlier release set per fence to prune its history: restored so that they fire and are gone.
    getInternalTimerService(FenceIndexState.HISTORY_STATE, VoidNamespaceSerializer.INSTANCE, this);
    registerMetrics();
    recoverySteps.open(source == null ? null : new Recovery(source, new FenceDecoder(geometryOptions, geometryFormat), maxParallelism,
        ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup(),
        "fence-recovery-" + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()), restoredLsn);
    // The episode's first row, so that a slow warm-up shows as it goes; a restore's comes with
    // the gap check's verdict.
    if (recorder.phase() != LoadPhase.GAP_CHECK) {
      recorder.record();
    }
    recorder.update();
    // A restored hold may be full already.
    maybeReportHold();
  }

  private void registerMetrics() {
    getMetricGroup().gauge(FenceIndexMetrics.FENCES_LOADED, () -> fences.liveCount());
    getMetricGroup().gauge(FenceIndexMetrics.FENCES_EXPECTED, () -> readiness.fingerprints().expectedFences());
    getMetricGroup().gauge(FenceIndexMetrics.COMPLETENESS, () -> readiness.fingerprints().completeness());
    getMetricGroup().gauge(FenceIndexMetrics.INDEX_READY, () -> readiness.ready() ? 1 : 0);
    getMetricGroup().gauge(FenceIndexMetrics.BUCKETS_UNMATCHED, () -> readiness.fingerprints().unmatched());
    getMetricGroup().gauge(FenceIndexMetrics.GAP_DETECTED, () -> readiness.distrust() == null ? 0 : 1);
    getMetricGroup().gauge(FenceIndexMetrics.CATCHUP_LAG_MS,
        () -> readiness.streamTime() == 0 ? -1 : Math.max(0, System.currentTimeMillis() - readiness.streamTime()));
    getMetricGroup().gauge(FenceIndexMetrics.SNAPSHOT_AGE_MS,
        () -> restoredTime == 0 ? -1 : Math.max(0, System.currentTimeMillis() - restoredTime));
    getMetricGroup().gauge(FenceIndexMetrics.PENDING_LOCATIONS, () -> clock.heldLocations());
    getMetricGroup().gauge(FenceIndexMetrics.PENDING_EDITS, () -> clock.pendingEdits());
    getMetricGroup().gauge(FenceIndexMetrics.LOAD_PHASE, () -> recorder.phase().code());
    getMetricGroup().gauge(FenceIndexMetrics.PHASE_MS, () -> recorder.phaseMillis());
    getMetricGroup().gauge(FenceIndexMetrics.BUCKETS_UNMATCHED_LIST, () -> recorder.unmatchedBuckets());
    getMetricGroup().counter(FenceIndexMetrics.LATE_LOCATIONS, new CountOf(() -> lateLocations));
    getMetricGroup().counter(FenceIndexMetrics.TOO_LATE_LOCATIONS, new CountOf(() -> tooLateLocations));
    getMetricGroup().counter(FenceIndexMetrics.OUT_OF_ORDER_LOCATIONS, new CountOf(() -> outOfOrderLocations));
    getMetricGroup().counter(FenceIndexMetrics.BUCKETS_REREAD, new CountOf(recoverySteps::rereadCount));
    getMetricGroup().counter(FenceIndexMetrics.BUCKETS_REREAD_UNMATCHED, new CountOf(recoverySteps::rereadUnmatchedCount));
    getMetricGroup().gauge(FenceIndexMetrics.FENCE_HISTORY_VERSIONS, () -> history.versions());
    getMetricGroup().counter(FenceIndexMetrics.EDITS_APPLIED, new CountOf(fences::appliedCount));
    getMetricGroup().counter(FenceIndexMetrics.EDITS_DUPLICATE, new CountOf(fences::duplicateCount));
    getMetricGroup().counter(FenceIndexMetrics.EDITS_STALE, new CountOf(fences::staleCount));
    getMetricGroup().counter(FenceIndexMetrics.EDITS_COALESCED, new CountOf(fences::coalescedAwayCount));
    getMetricGroup().counter(FenceIndexMetrics.SEQ_GAPS, new CountOf(fences::gapCount));
  }

  @Override
  public void snapshotState(StateSnapshotContext context) throws Exception {
    super.snapshotState(context);
    state.writeUnwritten();
    persistHistory();
    pendingLocationsState.update(clock.held());
    clockState.update(List.of(clock.time()));
    // Every subtask evaluates every location, so each writes its share of the objects and a
    // restore reads each object once; if two subtasks' orders differed, the newest time wins.
    evaluation.forgetOlderThan(historyHorizon());
    int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    int subtasks = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
    List<Tuple2<String, Long>> share = new ArrayList<>();
    evaluation.forEachNewest((object, time) -> {
      if (Math.floorMod(object.hashCode(), subtasks) == subtask) {
        share.add(Tuple2.of(object, time));
      }
    });
    objectTimesState.update(share);
    // A checkpoint in the middle of a fresh start's read holds only part of the fences, which no
    // stream will bring again: restored, it is read again, as a rebuild.
    String untrusted = readiness.distrust() != null ? readiness.distrust()
        : readiness.loading() ? INCOMPLETE_LOAD : null;
    untrustedState.update(untrusted == null ? List.of() : List.of(untrusted));
  }

  @Override
  public void close() throws Exception {
    recoverySteps.close();
    super.close();
  }

  // ---- recovery: what a read of the source brings -------------------------------------------------

  /** Where the recovery's reads go: applied like the stream's edits, merged by seq. */
  private final class ReadInto implements RecoverySteps.Index {
    @Override
    public void applyRead(FenceChange change, FenceDecoder.Decoded decoded) throws Exception {
      setCurrentKey(change.kind == FenceChange.Kind.FENCE ? new FenceKey(change.fenceId) : FenceKey.ofBucket(change.bucket));
      apply(List.of(change), Collections.singletonList(decoded));
    }

    @Override
    public void deleteGone(String fenceId) throws Exception {
      setCurrentKey(new FenceKey(fenceId));
      applyCoalesced(CoalescedEdit.of(FenceEdit.delete(fenceId, fences.seqOf(fenceId) + 1, EditOrigin.SNAPSHOT, 0, System.currentTimeMillis())));
    }

    @Override
    public void removeUnreadable(String fenceId) throws Exception {
      state.removeFence(fenceId);
    }

    @Override
    public void ready() throws Exception {
      release();
    }
  }

  // ---- input 1: fence changes, keyed by fence id -------------------------------------------------

  @Override
  public void processElement1(StreamRecord<FenceChange> record) throws Exception {
    FenceChange change = record.getValue();
    boolean wasReady = readiness.ready();
    if (change.kind == FenceChange.Kind.BUCKET_STATS) {
      if (change.snapshot) {
        readiness.versions().known(change.bucket, change.seq);
      } else if (readiness.distrust(readiness.versions().streamed(change.bucket, change.seq))) {
        recoverySteps.distrusted();
      }
    }
    if (!change.snapshot) {
      readiness.streamed(change.lsn, change.commitTime);
    }
    if (readiness.proveVersionsOnceCaughtUp()) {
      recoverySteps.distrusted();
    }
    if (change.kind == FenceChange.Kind.HEARTBEAT) {
      // Keyed like key group change.bucket: this subtask's record of how far the stream has got.
      state.storePosition(change);
    } else if (change.kind == FenceChange.Kind.FENCE || change.kind == FenceChange.Kind.BUCKET_STATS) {
      receive(change);
    }
    recorder.update();
    if (!wasReady && readiness.ready()) {
      release();
    }
  }

  /** A fence edit or bucket fingerprint: applied now if no location can see the fence without it, else queued. */
  private void receive(FenceChange change) throws Exception {
    if (change.kind == FenceChange.Kind.FENCE && !change.snapshot) {
      editsReceived++;
      recoverySteps.streamed(change.fenceId);
    }
    // Queued under the record's key: a fence's id, or a bucket fingerprint's.
    String key = change.kind == FenceChange.Kind.BUCKET_STATS ? FenceKey.ofBucket(change.bucket).id : change.fenceId;
    if (change.snapshot || clock.appliesAtOnce(change.commitTime, key, !everReady)) {
      apply(List.of(change), null);
    } else {
      state.queueEdit(change);
      clock.queueEdit(change.commitTime, key);
    }
  }

  /**
   * Applies changes of the current key's fence, oldest first: decoded (bad ones to dead letters),
   * coalesced so that only the newest version reaches the index, and split after each delete so
   * that a delete's EXITs are never folded away by a later re-creation.
   *
   * @param decoded the changes' geometries decoded already (a read's rows), or null to decode here
   */
  private void apply(List<FenceChange> changes, List<FenceDecoder.Decoded> decoded) throws Exception {
    List<FenceEdit> run = new ArrayList<>();
    // The version in force before each edit, for the history; read only when an edit needs it.
    FenceHistory.Version inForce = null;
    for (int i = 0; i < changes.size(); i++) {
      FenceChange change = changes.get(i);
      if (change.kind == FenceChange.Kind.BUCKET_STATS) {
        // A bucket's fingerprint: the newest wins; the current key is the bucket's.
        boolean wasReady = readiness.ready();
        if (readiness.fingerprints().expect(change.bucket, change.fenceCount, change.checksum, change.seq)) {
          state.storeFingerprint(change);
          recoverySteps.fingerprint(change.bucket, change.snapshot ? null : change.commitTime);
        }
        if (wasReady && !readiness.ready()) {
          // Usually for a moment (a fingerprint applies on arrival, the edit it counts waits for the
          // clock: some 20 times a minute at 40 edits/s); one that lasts is re-read, and logged then.
          LOG.debug("Bucket {} at the source no longer matches the fences this subtask holds for it ({} buckets unmatched):"
              + " locations are held until it does", change.bucket, readiness.fingerprints().unmatched());
        }
        continue;
      }
      // A version no newer than the stored one (a redelivery: a rebuild's overlap with the stream,
      // a replay after a restore) never takes effect: its geometry is not decoded at all.
      boolean takesNoEffect = !change.delete && change.seq <= fences.seqOf(change.fenceId);
      FenceEdit edit = edit(change, takesNoEffect ? null : decoded == null ? decoder.decode(change) : decoded.get(i));
      if (!takesNoEffect) {
        inForce = keepHistory(edit, inForce);
      }
      run.add(edit);
      if (edit.kind() == EditKind.DELETE) {
        applyCoalesced(EditCoalescer.coalesce(run).get(0));
        run.clear();
      }
    }
    if (!run.isEmpty()) {
      applyCoalesced(EditCoalescer.coalesce(run).get(0));
    }
  }

  /**
   * Keeps the version an edit supersedes in the history, if a location still to be evaluated may
   * be older than the edit, and returns the version the edit puts in force. Every version between
   * two locations is kept, though only the newest reaches the index: a late location may fall
   * between them. A read of the source says nothing of a fence's past, which is forgotten.
   */
  private FenceHistory.Version keepHistory(FenceEdit edit, FenceHistory.Version inForce) throws Exception {
    String id = edit.fenceId();
    if (edit.origin() == EditOrigin.SNAPSHOT) {
      if (!history.of(id).isEmpty()) {
        history.forget(id);
        state.forgetVersions();
      }
      return null;
    }
    long seqBefore = inForce != null ? inForce.seq() : fences.seqOf(id);
    if (edit.seq() <= seqBefore) {
      return inForce;
    }
    FenceGeometry geometryBefore = inForce != null ? inForce.geometry() : fences.index().get(id);
    long until = edit.commitTimeMillis();
    if (until > historyHorizon()) {
      String tenantBefore = inForce != null ? inForce.tenant() : tenantInForce(id);
      // In memory only until a checkpoint (persistHistory): a catch-up sweeps past most versions
      // within seconds, before any checkpoint needs them.
      history.superseded(id, new FenceHistory.Version(seqBefore, geometryBefore, tenantBefore, until));
    }
    // A refused upsert leaves the geometry in force as it was.
    FenceGeometry after = edit.kind() == EditKind.DELETE ? null : edit.geometry() != null ? edit.geometry() : geometryBefore;
    return new FenceHistory.Version(edit.seq(), after, edit.tenant(), Long.MAX_VALUE);
  }

  /**
   * Brings the history's keyed state to what the history holds ({@link FenceHistory#checkpoint}).
   * A version pruned between two checkpoints, as most of a catch-up's are, costs no state access.
   * Called in {@code snapshotState}, before the keyed state backend takes its snapshot.
   */
  private void persistHistory() throws Exception {
    long horizon = historyHorizon();
    FenceHistory.Checkpoint checkpoint = history.checkpoint(horizon);
    for (FenceHistory.Kept kept : checkpoint.write()) {
      FenceHistory.Version version = kept.version();
      setCurrentKey(new FenceKey(kept.fenceId()));
      state.keepVersion(version.until(), new StoredFence(version.seq(), version.geometry() == null, version.geometry(), version.tenant(), 0, 0));
    }
    for (String fenceId : checkpoint.forgetUpToHorizon()) {
      setCurrentKey(new FenceKey(fenceId));
      state.forgetVersionsUpTo(horizon);
    }
  }

  /** No location still to be evaluated is older than this: history that ended at or before it is needed no more. */
  private long historyHorizon() {
    return Math.min(timePolicy.historyHorizon(clock.time()), clock.oldestHeld());
  }

  /**
   * A timer of an earlier release, which pruned each fence's history by timers, restored from its
   * savepoint: the versions it was for are pruned with the rest ({@link FenceHistory#pruneUpTo},
   * {@link #persistHistory}), so it has nothing left to do.
   */
  @Override
  public void onEventTime(InternalTimer<FenceKey, VoidNamespace> timer) {}

  @Override
  public void onProcessingTime(InternalTimer<FenceKey, VoidNamespace> timer) {
    throw new IllegalStateException("the fence index sets no processing-time timers on keys");
  }

  /** Seq-checks one coalesced edit, then updates keyed state and the index, and EXITs on delete. */
  private void applyCoalesced(CoalescedEdit coalesced) throws Exception {
    FenceEdit edit = coalesced.latest();
    boolean wasLive = fences.isLive(edit.fenceId());
    long storedSeq = fences.seqOf(edit.fenceId());
    EditOutcome outcome = fences.apply(coalesced);
    if (!outcome.changesState()) {
      return;
    }
    if (wasLive) {
      readiness.fingerprints().remove(edit.fenceId(), storedSeq);
    }
    if (edit.kind() != EditKind.DELETE) {
      readiness.fingerprints().add(edit.fenceId(), edit.seq());
    }
    if (outcome == EditOutcome.GAP && readiness.distrust(
        "seq gap on fence " + edit.fenceId() + ": seq " + edit.seq() + " arrived after " + storedSeq + ", the change stream lost an edit")) {
      // The stream lost an edit: nothing else it delivered can be trusted either.
      recoverySteps.distrusted();
    }
    boolean deleted = edit.kind() == EditKind.DELETE;
    FenceEdit shaping = coalesced.shaping();
    // Keyed state is read only when neither the edit nor the index says the tenant: on RocksDB a
    // read per edit (of a key that a snapshot never finds) was most of a cold start's time.
    String tenant = shaping != null && shaping.kind() == EditKind.UPSERT ? shaping.tenant() : tenantInForce(edit.fenceId());
    state.store(edit.fenceId(), new StoredFence(
        edit.seq(), deleted, deleted ? null : fences.index().get(edit.fenceId()), tenant,
        edit.commitLsn(), edit.commitTimeMillis()));
    boolean aheadOfTheClock = !everReady && edit.origin() == EditOrigin.STREAM && edit.commitTimeMillis() > clock.time();
    if (deleted && (clock.oldestHeld() < edit.commitTimeMillis() || aheadOfTheClock)) {
      // Applied ahead of a held location older than it, or of the clock while warming up (the
      // index was not ready): a location older than the delete must still find who was inside, so
      // the EXITs wait for it, as in time order. (A read's delete, applied on arrival like all of
      // a read, waits only for held locations, as it always has.)
      state.queueExit(edit.commitTimeMillis(), edit.seq());
      clock.queueExit(edit.commitTimeMillis(), edit.fenceId());
    } else if (deleted) {
      evaluation.deleted(edit.fenceId(), state.members(), edit.commitTimeMillis(), edit.seq());
      state.clearMembers();
    }
  }

  /**
   * The tenant of the fence's version in force: the index's, for a fence it holds (the stored
   * version's, without a keyed-state read that decodes its geometry: a fifth of a catch-up's
   * applying in a profile), else the stored version's.
   */
  private String tenantInForce(String fenceId) throws Exception {
    return fences.index().get(fenceId) != null ? fences.index().tenantOf(fenceId) : state.storedTenant(fenceId);
  }

  /** The edit a change makes, its geometry decoded: a bad one goes to dead letters and refuses the upsert. */
  private FenceEdit edit(FenceChange change, FenceDecoder.Decoded decoded) {
    EditOrigin origin = change.snapshot ? EditOrigin.SNAPSHOT : EditOrigin.STREAM;
    if (change.delete) {
      return FenceEdit.delete(change.fenceId, change.seq, origin, change.lsn, change.commitTime);
    }
    if (decoded == null) {
      // A redelivered or stale version, not decoded: it can never take effect.
      return FenceEdit.refusedUpsert(change.fenceId, change.seq, change.tenant, origin, change.lsn, change.commitTime);
    }
    if (decoded.failure() != null) {
      String kept = fences.index().get(change.fenceId) != null ? "; the previous version stays in force" : "; the fence has no usable version";
      deadLetter(change, "ERROR", decoded.failure().reason().name(), decoded.failure().getMessage() + kept);
      return FenceEdit.refusedUpsert(change.fenceId, change.seq, change.tenant, origin, change.lsn, change.commitTime);
    }
    decoded.geometry().repair().ifPresent(note -> deadLetter(change, "WARNING", "REPAIRED", note));
    return FenceEdit.upsert(change.fenceId, change.seq, decoded.geometry().geometry(), change.tenant, origin, change.lsn, change.commitTime);
  }

  private void deadLetter(FenceChange change, String severity, String reason, String detail) {
    String payload = change.geometryText != null ? change.geometryText
        : change.geometryBytes != null ? Base64.getEncoder().encodeToString(change.geometryBytes) : null;
    output.collect(DEAD_LETTERS, new StreamRecord<>(new DeadLetter(
        "fence", change.fenceId, change.seq, severity, reason, detail, payload, change.commitTime, System.currentTimeMillis())));
  }

  // ---- input 2: locations, broadcast ---------------------------------------------------------------

  @Override
  public void processElement2(StreamRecord<Location> record) throws Exception {
    Location location = record.getValue();
    if (timePolicy.isLate(location.timestamp, clock.time())) {
      // Its fences' versions of then may be gone: a dead letter, never a different answer.
      tooLateLocations++;
      deadLetter(location, LocationTimePolicy.LATE, "more than the allowed lateness of " + timePolicy.allowedLateness().toMillis()
          + " ms behind the fence index's clock at " + Instant.ofEpochMilli(clock.time()));
      return;
    }
    if (location.timestamp <= clock.time() && readiness.ready()) {
      lateLocations++;
      evaluation.evaluate(location, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
    } else {
      // Not due yet, or the index is not provably complete: held, in state, none lost.
      clock.hold(location, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
      maybeReportHold();
    }
  }

  /** A location older than the newest evaluated for its object: it changed nothing. */
  private void outOfOrder(Location location, long newest) {
    outOfOrderLocations++;
    deadLetter(location, LocationTimePolicy.OUT_OF_ORDER, "older than the location of " + Instant.ofEpochMilli(newest)
        + " already evaluated for this object, whose presence only moves forward in its own event time");
  }

  private void deadLetter(Location location, String reason, String detail) {
    output.collect(DEAD_LETTERS, new StreamRecord<>(new DeadLetter("location", location.objectId, 0, "ERROR", reason, detail,
        LocationJson.format(location), location.timestamp, System.currentTimeMillis())));
  }

  private void emit(GeofenceTrigger trigger) {
    output.collect(new StreamRecord<>(trigger, trigger.eventTime));
  }

  // ---- the clock -----------------------------------------------------------------------------------

  @Override
  public void processWatermark(Watermark mark) throws Exception {
    // Called with the combined watermark of both inputs (idle inputs excluded).
    if (clock.advanceTo(mark.getTimestamp())) {
      release();
      history.pruneUpTo(historyHorizon());
      recoverySteps.maybeReread(clock.time());
      // Objects seen no more within the lateness are forgotten as the map doubles, not only at checkpoints.
      if (evaluation.objects() > forgetObjectsAbove) {
        evaluation.forgetOlderThan(historyHorizon());
        forgetObjectsAbove = Math.max(MIN_OBJECTS_KEPT, 2 * evaluation.objects());
      }
    }
    super.processWatermark(mark);
  }

  @Override
  public void processWatermark2(Watermark mark) throws Exception {
    clock.locationWatermark(mark.getTimestamp());
    super.processWatermark2(mark);
  }

  /**
   * Applies and evaluates what the clock has let through, locations in batches, and says if the
   * hold has room again.
   */
  private void release() throws Exception {
    clock.releaseUpTo(clock.time(), readiness::ready, new Release());
    evaluation.flush();
    everReady |= readiness.ready();
    maybeReportHold();
  }

  /** What the clock releases: a fence's edits up to a time, or a location to evaluate. */
  private final class Release implements EventClock.Due {
    @Override
    public void applyPending(String key, long time) throws Exception {
      // The locations released before this edit see the fences without it.
      evaluation.flush();
      setCurrentKey(new FenceKey(key));
      List<FenceChange> due = state.takeEditsUpTo(time);
      if (!due.isEmpty()) {
        // Every edit of this fence up to the next location: no location sees the versions between.
        apply(due, null);
        recorder.update();
      }
    }

    @Override
    public void evaluate(Location location, int keyGroupStart, int keyGroupEnd) throws Exception {
      evaluation.add(location, keyGroupStart, keyGroupEnd);
    }

    @Override
    public void exitDeleted(String key) throws Exception {
      // The locations released before these EXITs enter and leave the fence first.
      evaluation.flush();
      setCurrentKey(new FenceKey(key));
      Map.Entry<Long, Long> delete = state.takeOldestExit();
      evaluation.deleted(key, state.members(), delete.getKey(), delete.getValue());
      state.clearMembers();
    }
  }

  /** A counter whose count another object keeps (the fence set counts its edit outcomes itself). */
  private static final class CountOf implements Counter {
    private final LongSupplier count;

    CountOf(LongSupplier count) {
      this.count = count;
    }

    @Override
    public void inc() {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void inc(long n) {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void dec() {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public void dec(long n) {
      throw new UnsupportedOperationException("counted by its owner");
    }

    @Override
    public long getCount() {
      return count.getAsLong();
    }
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

  // ---- the bounded hold -----------------------------------------------------------------------------

  /** At most this many locations held (the sources pause at it and resume at half of it). */
  public FenceIndexOperator maxHeldLocations(int max) {
    if (max < 1) {
      throw new IllegalArgumentException("the maximum of held locations must be positive, got " + max);
    }
    this.maxHeldLocations = max;
    return this;
  }

  /** Set by the operator's factory: the gateway to the coordinator that pauses the location sources. */
  void reportHoldTo(OperatorEventGateway gateway) {
    this.holdGateway = gateway;
  }

  /**
   * Says when the hold becomes full, and when it has room again (at half, so that the sources do
   * not flap): the coordinator pauses the location sources meanwhile. What is already on its way
   * still arrives and is held, so the hold may pass the bound by what the network buffers carry.
   */
  private void maybeReportHold() {
    if (holdGateway == null) {
      return;
    }
    int held = clock.heldLocations();
    boolean full = holdFull ? held > maxHeldLocations / 2 : held >= maxHeldLocations;
    if (full != holdFull) {
      holdFull = full;
      holdGateway.sendEventToCoordinator(new HeldLocationsEvent(full));
      if (full && readiness.ready()) {
        // Ready, so these wait only for the fence clock: the bound is below what the rate needs.
        long lag = clock.lagBehindHeld();
        LOG.warn("{} locations held by a ready index, the most this subtask may hold: it asks for the location sources"
            + " to pause. They wait for the fence clock, which {}; at this rate the bound throttles the job: raise"
            + " --max-held-locations (geofence.locations.max-held) above the locations of a few such lags, or shorten"
            + " --heartbeat-interval", held, lag == Long.MAX_VALUE ? "has not started" : "trails them by " + lag + " ms");
      } else {
        LOG.info(full ? "{} locations held, the most this subtask may hold: it asks for the location sources to pause"
            : "{} locations held: room again, the location sources may resume", held);
      }
    }
  }

  // ---- for tests -----------------------------------------------------------------------------------

  /**
   * This operator stores its state as releases before the per-bucket maps and the state's own
   * record types did: fences one per fence key, fingerprints and positions as the stream's records.
   */
  FenceIndexOperator writingPreviousLayout() {
    previousLayout = true;
    return this;
  }

  /** How many fences this operator's restore moved from the per-fence layout into the bucket maps. */
  int movedFromPerFenceLayout() {
    return state.movedFromPerFenceLayout();
  }

  /** This operator writes fences in format {@code version}, as another release would. */
  FenceIndexOperator writingFormat(byte version) {
    fenceSerializer = new StoredFenceSerializer(version);
    return this;
  }

  LoadPhase phase() {
    return recorder.phase();
  }

  long historyVersions() {
    return history.versions();
  }

  long lateLocationCount() {
    return lateLocations;
  }

  long outOfOrderLocationCount() {
    return outOfOrderLocations;
  }

  long tooLateLocationCount() {
    return tooLateLocations;
  }

  FenceSet fences() {
    return fences;
  }

  /** Whether a gap check or a rebuild is under way. */
  boolean recovering() {
    return recoverySteps.running();
  }
}
