package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.model.HydrationEpisode;
import dev.geofence.connectors.source.BucketRead;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.readiness.BucketVersions;
import dev.geofence.state.readiness.GapCheck;
import dev.geofence.state.readiness.SlotState;
import dev.geofence.state.edit.CoalescedEdit;
import dev.geofence.state.edit.EditCoalescer;
import dev.geofence.state.edit.EditKind;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.EditOutcome;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.BadGeometryException;
import dev.geofence.state.geom.DecodedGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.TwoInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.OutputTag;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fence index operator: holds this subtask's fences (input 1, keyed by fence id) and evaluates
 * every location (input 2, broadcast to all subtasks) against them, emitting ENTER and EXIT.
 *
 * <p><b>State.</b> Keyed by {@link FenceKey}, so a subtask owns whole buckets of fences. Per fence, in keyed state: its stored version ({@link StoredFence}), the objects
 * inside it, and its edits not yet applied. In memory, rebuilt from keyed state on every start: the
 * {@link FenceSet} (versions, spatial index, checksum) and an object-to-fences map. Locations not
 * yet evaluated, and the clock, are kept in union operator state, written by subtask 0: every
 * subtask holds the same at a checkpoint barrier (see below), so any one copy restores them all.
 *
 * <p><b>Time.</b> A location with event time t is evaluated against the fences holding exactly the
 * edits committed at or before t. The operator's clock is its combined watermark: the fence
 * stream's (commit times, advanced by the source's heartbeats while fences are idle) and the
 * location stream's (an idle location source does not hold it back). When the clock passes t,
 * pending edits and locations are processed in time order, edits first on a tie. Snapshot reads,
 * which carry no commit time, are applied on arrival. A location older than the clock when it
 * arrives is evaluated at once against the current fences and counted as late. Everything depends
 * only on elements and watermarks, never on wall-clock time, so every subtask reaches the same
 * decisions at the same barrier and a replay after a restore emits the same triggers, with the
 * same deterministic ids.
 *
 * <p><b>Bad input.</b> A fence geometry that does not decode goes to the dead-letter side output
 * with its reason; the edit still consumes its seq and the previous geometry stays in force. A
 * repaired geometry is used and reported as a warning.
 */
public final class FenceIndexOperator extends AbstractStreamOperator<GeofenceTrigger>
    implements TwoInputStreamOperator<FenceChange, Location, GeofenceTrigger> {

  private static final long serialVersionUID = 1L;

  /** One row per warm-up of this subtask's index, for {@code hydration_history}. */
  public static final OutputTag<HydrationEpisode> HYDRATION_EPISODES =
      new OutputTag<>("hydration-episodes", TypeInformation.of(HydrationEpisode.class));

  private static final String FENCE_STATE = "fence";
  private static final String MEMBERS_STATE = "members";
  private static final String BUCKET_STATS_STATE = "bucket-stats";
  private static final String STREAM_POSITION_STATE = "stream-position";

  /** Each fence's stored version; the savepoint tools read and write it with the same descriptor. */
  public static ValueStateDescriptor<StoredFence> fenceStateDescriptor() {
    return new ValueStateDescriptor<>(FENCE_STATE, StoredFenceSerializer.INSTANCE);
  }

  /** The objects inside each fence, and since when. */
  public static MapStateDescriptor<String, Long> membersStateDescriptor() {
    return new MapStateDescriptor<>(MEMBERS_STATE, Types.STRING, Types.LONG);
  }

  /** Each bucket's fingerprint as the stream delivered it (its version in {@code seq}). */
  public static ValueStateDescriptor<FenceChange> bucketStatsStateDescriptor() {
    return new ValueStateDescriptor<>(BUCKET_STATS_STATE, TypeInformation.of(FenceChange.class));
  }

  /** Each key group's last heartbeat: how far the stream had been read. */
  public static ValueStateDescriptor<FenceChange> streamPositionStateDescriptor() {
    return new ValueStateDescriptor<>(STREAM_POSITION_STATE, TypeInformation.of(FenceChange.class));
  }

  /** How long to wait before trying an unreachable source of truth again. */
  static final long RETRY_INTERVAL_MS = 2_000;

  /** Dead letters of fence edits this operator could not use as they were. */
  public static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("fence-dead-letters", TypeInformation.of(DeadLetter.class));

  private static final int PAYLOAD_LIMIT = 4096;

  /** This operator's own logger (hiding AbstractStreamOperator's), so its phases can be followed. */
  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  /** The source of truth, for the gap check on restore and rebuilds; null in tests that have none. */
  private final FenceSourceOptions source;
  /** The savepoint the job was submitted to restore from, or null: for the hydration history. */
  private final String savepointPath;
  /** Writes the current format, except in tests of state an other release wrote. */
  private StoredFenceSerializer fenceSerializer = StoredFenceSerializer.INSTANCE;

  private transient ValueState<StoredFence> fenceState;
  private transient MapState<String, Long> membersState;
  private transient ListState<FenceChange> pendingEditsState;
  private transient ListState<PendingLocation> pendingLocationsState;
  private transient ListState<Long> clockState;
  private transient ValueState<FenceChange> bucketStatsState;
  private transient ValueState<FenceChange> streamPositionState;
  private transient ListState<String> untrustedState;

  private transient FenceSet fences;
  private transient FenceGeometryReader reader;
  private transient Map<String, Set<String>> fencesByObject;
  private transient PriorityQueue<PendingEdit> pendingEdits;
  /** How many entries of {@link #pendingEdits} each key has. */
  private transient Map<String, Integer> pendingEditCounts;
  /** The location input's own watermark: no location to come (on time) is older. */
  private transient long locationWatermark;
  private transient PriorityQueue<Held> pendingLocations;
  private transient BucketFingerprints fingerprints;
  private transient BucketVersions versions;
  private transient int maxParallelism;
  private transient KeyGroupRange ownKeyGroups;
  private transient long arrivals;
  private transient long clock;
  private transient long lateLocations;
  /** How far the change stream has been read: the newest LSN and commit time seen. */
  private transient long streamLsn;
  private transient long streamTime;
  private transient long restoredLsn;
  private transient long restoredTime;
  /**
   * Why the index cannot be trusted, or null: a failed gap check, a seq gap in the stream, or
   * restored state of an unknown format. Cleared only by a rebuild from the source of truth.
   */
  private transient String gap;
  /** The restored position is proven covered by the stream (or there was none to prove). */
  private transient boolean verified;
  /** The stream must reach this LSN (read at the gap check or rebuild) before the index is ready. */
  private transient long catchUpTarget;
  /** Keys whose restored fence is of a format this release cannot read. */
  private transient List<FenceKey> unreadable;
  private transient boolean recoveryScheduled;
  private transient volatile LoadPhase phase;
  private transient long phaseSince;
  private transient HydrationEpisode episode;
  /** Fence edits received from the stream, applied or still queued; and their count at the episode's start. */
  private transient long editsReceived;
  private transient long editsBefore;
  private transient long coalescedBefore;

  public FenceIndexOperator(GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) {
    this(geometryOptions, geometryFormat, null, null);
  }

  /**
   * @param source the source of truth, for the gap check and rebuilds
   * @param savepointPath the savepoint the job is submitted to restore from, or null
   */
  public FenceIndexOperator(
      GeometryReadOptions geometryOptions, GeometryFormat geometryFormat, FenceSourceOptions source, String savepointPath) {
    this.geometryOptions = geometryOptions;
    this.geometryFormat = geometryFormat;
    this.source = source;
    this.savepointPath = savepointPath;
  }

  private static final class PendingEdit {
    final long time;
    final long arrival;
    /** The id of the record's {@link FenceKey}. */
    final String fenceId;

    PendingEdit(long time, long arrival, String fenceId) {
      this.time = time;
      this.arrival = arrival;
      this.fenceId = fenceId;
    }
  }

  /** A location not evaluated yet: in arrival order, with the key groups it is owed to. */
  private static final class Held {
    final long arrival;
    final Location location;
    final int keyGroupStart;
    final int keyGroupEnd;

    Held(long arrival, Location location, int keyGroupStart, int keyGroupEnd) {
      this.arrival = arrival;
      this.location = location;
      this.keyGroupStart = keyGroupStart;
      this.keyGroupEnd = keyGroupEnd;
    }
  }

  @Override
  public void initializeState(StateInitializationContext context) throws Exception {
    super.initializeState(context);
    episode = new HydrationEpisode();
    episode.installedAt = System.currentTimeMillis();
    phase = LoadPhase.STARTING;
    phaseSince = episode.installedAt;
    fenceState = context.getKeyedStateStore().getState(new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer));
    membersState = context.getKeyedStateStore().getMapState(membersStateDescriptor());
    pendingEditsState = context.getKeyedStateStore().getListState(
        new ListStateDescriptor<>("pending-edits", TypeInformation.of(FenceChange.class)));
    pendingLocationsState = context.getOperatorStateStore().getUnionListState(
        new ListStateDescriptor<>("pending-locations", TypeInformation.of(PendingLocation.class)));
    bucketStatsState = context.getKeyedStateStore().getState(bucketStatsStateDescriptor());
    streamPositionState = context.getKeyedStateStore().getState(streamPositionStateDescriptor());
    clockState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));
    untrustedState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("untrusted", Types.STRING));

    reader = new FenceGeometryReader(geometryOptions);
    fences = new FenceSet(new FenceIndex());
    fencesByObject = new HashMap<>();
    pendingEdits = new PriorityQueue<>(Comparator.<PendingEdit>comparingLong(e -> e.time).thenComparingLong(e -> e.arrival));
    pendingEditCounts = new HashMap<>();
    locationWatermark = Long.MIN_VALUE;
    pendingLocations = new PriorityQueue<>(
        Comparator.<Held>comparingLong(p -> p.location.timestamp).thenComparingLong(p -> p.arrival));
    clock = Long.MIN_VALUE;
    maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    ownKeyGroups = ((CheckpointableKeyedStateBackend<?>) getKeyedStateBackend()).getKeyGroupRange();
    fingerprints = new BucketFingerprints(maxParallelism, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
    versions = new BucketVersions();

    unreadable = new ArrayList<>();
    // Starting fresh and restoring share this path: on a fresh start there is nothing to read.
    restoreFromKeyedState(context.isRestored());
    // Each old subtask wrote what it still owed; take what is owed to key groups now ours.
    for (PendingLocation owed : pendingLocationsState.get()) {
      int start = Math.max(owed.keyGroupStart, ownKeyGroups.getStartKeyGroup());
      int end = Math.min(owed.keyGroupEnd, ownKeyGroups.getEndKeyGroup());
      if (start <= end) {
        pendingLocations.add(new Held(arrivals++, owed.location, start, end));
      }
    }
    // The clock goes on from where it was: a location that was late before the restore is late after.
    for (Long restored : clockState.get()) {
      clock = Math.max(clock, restored);
    }
    restoredLsn = streamLsn;
    restoredTime = streamTime;
    // Distrust outlives restarts: state restored across a gap stays untrusted until rebuilt, even
    // if a later checkpoint of it would pass the check.
    for (String reason : untrustedState.get()) {
      gap = reason;
    }
    if (!unreadable.isEmpty()) {
      gap = unreadable.size() + " restored fences are of a state format this release cannot read (it reads "
          + StoredFenceSerializer.FORMAT_VERSION + ")";
      LOG.warn("{}; the index is rebuilt from the source", gap);
    }
    // A fresh start has no position to prove: the CDC snapshot and stream are one consistent read.
    verified = !context.isRestored() || source == null;
    describeStart(context);
  }

  private void describeStart(StateInitializationContext context) {
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
    if (context.isRestored()) {
      episode.restoredLsn = Lsn.format(restoredLsn);
      episode.restoredCommitTime = restoredTime;
      episode.gapCheck = gap == null ? "not-needed" : "gap";
      episode.gapReason = gap;
    }
    editsBefore = editsReceived;
    coalescedBefore = fences.coalescedAwayCount();
  }

  /**
   * Before any location is evaluated, proves that the slot can still stream from where the
   * restored state stopped, and reads the catch-up target. A failed check leaves {@link #gap} set
   * (the fences are rebuilt); an unreachable database leaves the index unverified, to try again.
   */
  private void gapCheck(Connection db) throws SQLException {
    SlotState slot = SlotProbe.read(db, source.slotName());
    // State checkpointed before the first stream record (during the initial snapshot) has no
    // position of its own: the CDC source resumes its snapshot, and confirms nothing until it
    // streams, so only the slot's existence and WAL are in question.
    long from = restoredLsn == 0 && slot.exists() ? slot.confirmedFlushLsn() : restoredLsn;
    GapCheck.Result result = GapCheck.check(slot, from);
    if (result.covered() || result.slotAhead()) {
      SlotProbe.CatchUpTarget target = SlotProbe.catchUpTarget(
          db, source.columns(), maxParallelism, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
      verified = true;
      catchUpTarget = target.lsn();
      // Either way the versions prove it; with the slot ahead, they alone can.
      versions.expectAtTarget(target.bucketVersions());
      episode.gapCheck = "covered";
      episode.gapReason = result.slotAhead() ? result.reason() + "; proven by the bucket versions at " + Lsn.format(target.lsn()) : null;
      LOG.info("Gap check: {}; catching up to {} ({} fences at the source){}", result.reason(), Lsn.format(target.lsn()),
          target.fenceCount(), result.slotAhead() ? ", where every bucket version of this subtask must have arrived" : "");
      return;
    }
    gap = result.reason();
    episode.gapCheck = "gap";
    episode.gapReason = gap;
    LOG.warn("Gap check failed, the restored fences cannot be trusted and are rebuilt from the source: {}", gap);
    if (slot.exists() && "lost".equals(slot.walStatus())) {
      // A slot whose WAL is gone can never stream again: dropped, the CDC source creates it anew.
      try (PreparedStatement drop = db.prepareStatement(
          "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ? AND wal_status = 'lost' AND NOT active")) {
        drop.setString(1, source.slotName());
        drop.execute();
        LOG.warn("Dropped the replication slot {}, whose WAL was lost, so that the CDC source can create it anew", source.slotName());
      }
    }
  }

  /**
   * Runs what stands between this subtask and a trusted index: the gap check, then a rebuild if
   * the index cannot be trusted. While the database is unreachable, tries again every {@link
   * #RETRY_INTERVAL_MS}; the job keeps running and locations stay held.
   */
  private void recover() throws Exception {
    recoveryScheduled = false;
    if (source == null || (verified && gap == null)) {
      return;
    }
    try (Connection db = DriverManager.getConnection(source.jdbcUrl(), source.username(), source.password())) {
      if (!verified && gap == null) {
        setPhase(LoadPhase.GAP_CHECK);
        gapCheck(db);
        proveVersionsOnceCaughtUp();
      }
      if (gap != null) {
        rebuild(db);
      }
    } catch (SQLException e) {
      if (!verified && gap == null) {
        episode.gapCheck = "unreachable";
        episode.gapReason = e.getMessage();
      }
      LOG.warn("The fence database at {} is unreachable ({}); the index is not ready, trying again in {} ms",
          source.jdbcUrl(), e.getMessage(), RETRY_INTERVAL_MS);
      scheduleRecovery(RETRY_INTERVAL_MS);
    }
    updatePhase();
  }

  /** Once the stream has passed the catch-up target, every bucket version there must have arrived. */
  private void proveVersionsOnceCaughtUp() {
    if (versions.proofPending() && Long.compareUnsigned(streamLsn, catchUpTarget) >= 0) {
      distrust(versions.targetReached());
    }
  }

  /** The stream lost edits (a null reason: it did not): evaluate nothing until rebuilt. */
  private void distrust(String reason) {
    if (reason != null && gap == null) {
      gap = reason;
      if (episode.hydratedAt == 0) {
        episode.gapCheck = "gap";
        episode.gapReason = reason;
      }
      LOG.warn("{}; no location is evaluated until the index is rebuilt from the source", gap);
      scheduleRecovery(0);
    }
  }

  private void scheduleRecovery(long delayMs) {
    if (!recoveryScheduled && source != null) {
      recoveryScheduled = true;
      long at = getProcessingTimeService().getCurrentProcessingTime() + delayMs;
      getProcessingTimeService().registerTimer(at, time -> {
        recover();
        if (ready()) {
          drainUpTo(clock);
        }
      });
    }
  }

  /**
   * Abandons the untrusted fences for the source of truth: reads this subtask's buckets in one
   * consistent read and applies every row as a snapshot edit, merged with whatever the stream has
   * delivered or will deliver by seq (older stream edits are then stale, newer ones apply). Fences
   * held here that the source has no row of at all are deleted.
   */
  private void rebuild(Connection db) throws Exception {
    setPhase(LoadPhase.REBUILDING);
    for (FenceKey key : unreadable) {
      setCurrentKey(key);
      fenceState.clear();
    }
    Set<String> read = new HashSet<>();
    BucketRead.Result result = BucketRead.read(db, source.columns(), maxParallelism,
        ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup(), change -> {
          try {
            if (change.kind == FenceChange.Kind.FENCE) {
              read.add(change.fenceId);
              setCurrentKey(new FenceKey(change.fenceId));
            } else {
              setCurrentKey(FenceKey.ofBucket(change.bucket));
              versions.known(change.bucket, change.seq);
            }
            apply(List.of(change));
          } catch (Exception e) {
            throw new IllegalStateException("applying a rebuilt fence to keyed state failed", e);
          }
        });
    List<String> gone = new ArrayList<>();
    for (String id : fences.liveIds()) {
      if (!read.contains(id)) {
        gone.add(id);
      }
    }
    for (String id : gone) {
      setCurrentKey(new FenceKey(id));
      applyCoalesced(CoalescedEdit.of(FenceEdit.delete(id, fences.seqOf(id) + 1, EditOrigin.SNAPSHOT, 0, System.currentTimeMillis())));
    }
    unreadable.clear();
    versions.proven();
    gap = null;
    verified = true;
    catchUpTarget = result.lsn();
    LOG.info("Rebuilt the fence index from the source in {} ms: {} fences and {} tombstones read as of {}, {} held fences gone",
        result.millis(), result.fences(), result.tombstones(), Lsn.format(result.lsn()), gone.size());
  }

  /**
   * Provably complete: the restored position proven covered (or rebuilt), the stream past the
   * catch-up target, and every owned bucket matching the source's fingerprint.
   */
  private boolean ready() {
    return verified && gap == null && caughtUp() && fingerprints.ready();
  }

  /** The stream has passed the catch-up target, and the bucket versions there are proven. */
  private boolean caughtUp() {
    return Long.compareUnsigned(streamLsn, catchUpTarget) >= 0 && !versions.proofPending();
  }

  private void updatePhase() {
    LoadPhase next = gap != null ? LoadPhase.REBUILDING
        : !verified ? LoadPhase.GAP_CHECK
        : !caughtUp() ? LoadPhase.CATCHING_UP
        : !fingerprints.ready() ? LoadPhase.VERIFYING
        : LoadPhase.READY;
    setPhase(next);
  }

  private void setPhase(LoadPhase next) {
    if (next == phase) {
      return;
    }
    long now = System.currentTimeMillis();
    boolean hydrated = episode.hydratedAt != 0;
    if (hydrated && next != LoadPhase.REBUILDING) {
      // A ready index between an edit and its bucket's fingerprint: in flight, not a warm-up.
      LOG.debug("Fence index phase {} -> {}", phase, next);
      phase = next;
      return;
    }
    LOG.info("Fence index phase {} -> {} after {} ms: {} fences loaded of {} expected, {} of {} buckets unmatched, stream at {}, {} edits replayed",
        phase, next, now - phaseSince, fences.checksum().count(), fingerprints.expectedFences(), fingerprints.unmatched(),
        fingerprints.ownedBuckets(), Lsn.format(streamLsn), editsReceived - editsBefore);
    if (next == LoadPhase.READY) {
      episode.hydratedAt = now;
      recordEpisode();
    } else if (hydrated) {
      // Trusted no longer (a seq gap): the rebuild is a warm-up of its own.
      HydrationEpisode previous = episode;
      episode = new HydrationEpisode();
      episode.installedAt = now;
      episode.jobName = previous.jobName;
      episode.jobId = previous.jobId;
      episode.subtask = previous.subtask;
      episode.attempt = previous.attempt;
      episode.keyGroupStart = previous.keyGroupStart;
      episode.keyGroupEnd = previous.keyGroupEnd;
      episode.startMode = "rebuild";
      episode.restoredLsn = Lsn.format(streamLsn);
      episode.restoredCommitTime = streamTime;
      episode.gapCheck = "gap";
      episode.gapReason = gap;
      editsBefore = editsReceived;
      coalescedBefore = fences.coalescedAwayCount();
      recordEpisode();
    }
    phase = next;
    phaseSince = now;
  }

  /** Emits the episode's row as it stands; later emissions of the same episode overwrite it. */
  private void recordEpisode() {
    episode.editsReplayed = editsReceived - editsBefore;
    episode.editsCoalesced = fences.coalescedAwayCount() - coalescedBefore;
    episode.fencesLoaded = fences.checksum().count();
    episode.fencesExpected = fingerprints.expectedFences();
    episode.checksumMatch = fingerprints.ready();
    long peak = 0;
    for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
      if (pool.getType() == MemoryType.HEAP && pool.getPeakUsage() != null) {
        peak += pool.getPeakUsage().getUsed();
      }
    }
    episode.peakHeapBytes = peak;
    output.collect(HYDRATION_EPISODES, new StreamRecord<>(episode.copy()));
  }

  /** Notes how far the stream has been read. */
  private void advanceStream(FenceChange change) {
    if (!change.snapshot && Long.compareUnsigned(change.lsn, streamLsn) > 0) {
      streamLsn = change.lsn;
    }
    streamTime = Math.max(streamTime, change.commitTime);
  }

  private void restoreFromKeyedState(boolean restored) throws Exception {
    KeyedStateBackend<FenceKey> backend = getKeyedStateBackend();
    List<FenceEdit> stored = new ArrayList<>();
    if (restored) {
      setPhase(LoadPhase.RESTORING);
    }
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ValueStateDescriptor<>(FENCE_STATE, fenceSerializer),
        (FenceKey key, ValueState<StoredFence> state) -> {
          if (state.value() == StoredFence.UNREADABLE) {
            unreadable.add(key);
          } else {
            stored.add(state.value().asSnapshotEdit(key.id));
          }
        });
    if (restored) {
      episode.restoredAt = System.currentTimeMillis();
      setPhase(LoadPhase.INDEXING);
    }
    for (FenceEdit edit : stored) {
      if (edit.commitLsn() != 0 && Long.compareUnsigned(edit.commitLsn(), streamLsn) > 0) {
        streamLsn = edit.commitLsn();
      }
      streamTime = Math.max(streamTime, edit.commitTimeMillis());
      fences.apply(edit);
      if (edit.kind() != EditKind.DELETE) {
        fingerprints.add(edit.fenceId(), edit.seq());
      }
    }
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        bucketStatsStateDescriptor(),
        (FenceKey key, ValueState<FenceChange> state) -> {
          fingerprints.expect(state.value().bucket, state.value().fenceCount, state.value().checksum, state.value().seq);
          versions.known(state.value().bucket, state.value().seq);
          advanceStream(state.value());
        });
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        streamPositionStateDescriptor(),
        (FenceKey key, ValueState<FenceChange> state) -> advanceStream(state.value()));
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        membersStateDescriptor(),
        (FenceKey key, MapState<String, Long> state) -> {
          for (String objectId : state.keys()) {
            fencesByObject.computeIfAbsent(objectId, o -> new HashSet<>()).add(key.id);
          }
        });
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ListStateDescriptor<>("pending-edits", TypeInformation.of(FenceChange.class)),
        (FenceKey key, ListState<FenceChange> state) -> {
          for (FenceChange change : state.get()) {
            queue(new PendingEdit(change.commitTime, arrivals++, key.id));
            if (change.kind == FenceChange.Kind.BUCKET_STATS) {
              versions.known(change.bucket, change.seq);
            }
          }
        });
    if (restored) {
      episode.indexedAt = System.currentTimeMillis();
    }
  }

  @Override
  public void open() throws Exception {
    super.open();
    int maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    if (FenceBuckets.COUNT % maxParallelism != 0) {
      throw new IllegalStateException("the job's max parallelism must divide " + FenceBuckets.COUNT
          + " (a power of two up to it), so that subtasks own whole fence buckets; it is " + maxParallelism);
    }
    getMetricGroup().gauge("fences_loaded", () -> fences.checksum().count());
    getMetricGroup().gauge("fences_expected", () -> fingerprints.expectedFences());
    getMetricGroup().gauge("index_completeness", () -> fingerprints.completeness());
    getMetricGroup().gauge("index_ready", () -> ready() ? 1 : 0);
    getMetricGroup().gauge("buckets_unmatched", () -> fingerprints.unmatched());
    getMetricGroup().gauge("gap_detected", () -> gap == null ? 0 : 1);
    getMetricGroup().gauge("catchup_lag_ms", () -> streamTime == 0 ? -1 : Math.max(0, System.currentTimeMillis() - streamTime));
    getMetricGroup().gauge("snapshot_age_ms", () -> restoredTime == 0 ? -1 : Math.max(0, System.currentTimeMillis() - restoredTime));
    getMetricGroup().gauge("pending_locations", () -> pendingLocations.size());
    getMetricGroup().gauge("pending_edits", () -> pendingEdits.size());
    getMetricGroup().gauge("late_locations", () -> lateLocations);
    getMetricGroup().gauge("edits_applied", () -> fences.appliedCount());
    getMetricGroup().gauge("edits_duplicate", () -> fences.duplicateCount());
    getMetricGroup().gauge("edits_stale", () -> fences.staleCount());
    getMetricGroup().gauge("edits_coalesced", () -> fences.coalescedAwayCount());
    getMetricGroup().gauge("seq_gaps", () -> fences.gapCount());
    getMetricGroup().gauge("index_load_phase", () -> phase.code());
    recover();
    // The episode's first row, with the gap check's outcome: a slow warm-up shows as it goes.
    recordEpisode();
    updatePhase();
  }

  @Override
  public void snapshotState(StateSnapshotContext context) throws Exception {
    super.snapshotState(context);
    List<PendingLocation> pending = new ArrayList<>(pendingLocations.size());
    pendingLocations.forEach(p -> pending.add(new PendingLocation(p.location, p.keyGroupStart, p.keyGroupEnd)));
    pendingLocationsState.update(pending);
    clockState.update(List.of(clock));
    untrustedState.update(gap == null ? List.of() : List.of(gap));
  }

  // ---- input 1: fence changes, keyed by fence id -------------------------------------------------

  @Override
  public void processElement1(StreamRecord<FenceChange> record) throws Exception {
    FenceChange change = record.getValue();
    if (change.kind == FenceChange.Kind.BUCKET_STATS) {
      if (change.snapshot) {
        versions.known(change.bucket, change.seq);
      } else {
        distrust(versions.streamed(change.bucket, change.seq));
      }
    }
    advanceStream(change);
    proveVersionsOnceCaughtUp();
    if (change.kind == FenceChange.Kind.HEARTBEAT) {
      // Keyed like key group change.bucket: this subtask's record of how far the stream has got.
      streamPositionState.update(change);
      if (phase == LoadPhase.CATCHING_UP) {
        updatePhase();
        if (ready()) {
          drainUpTo(clock);
        }
      }
      return;
    }
    if (change.kind != FenceChange.Kind.FENCE && change.kind != FenceChange.Kind.BUCKET_STATS) {
      return;
    }
    if (change.kind == FenceChange.Kind.FENCE && !change.snapshot) {
      editsReceived++;
    }
    // Queued under the record's key: a fence's id, or a bucket fingerprint's.
    String key = change.kind == FenceChange.Kind.BUCKET_STATS ? FenceKey.ofBucket(change.bucket).id : change.fenceId;
    // Due, or older than every location still to be evaluated (held, or to come on time) and behind
    // no pending edit of its own key: no location can see the fence without it. A catch-up's
    // backlog takes this way instead of a round trip through keyed state per edit. (A location
    // later than its own watermark allows may then see an edit committed after it, as one later
    // than the clock already does.)
    boolean aheadOfEveryLocation = change.commitTime <= oldestUnevaluatedLocation() && !pendingEditCounts.containsKey(key);
    if (change.snapshot || change.commitTime <= clock || aheadOfEveryLocation) {
      boolean wasReady = ready();
      apply(List.of(change));
      if (!wasReady && ready()) {
        drainUpTo(clock);
      }
    } else {
      pendingEditsState.add(change);
      queue(new PendingEdit(change.commitTime, arrivals++, key));
    }
  }

  /**
   * Applies changes of the current key's fence, oldest first: decoded (bad ones to dead letters),
   * coalesced so that only the newest version reaches the index, and split after each delete so
   * that a delete's EXITs are never folded away by a later re-creation.
   */
  private void apply(List<FenceChange> changes) throws Exception {
    List<FenceEdit> run = new ArrayList<>();
    for (FenceChange change : changes) {
      if (change.kind == FenceChange.Kind.BUCKET_STATS) {
        // A bucket's fingerprint: the newest wins; the current key is the bucket's.
        if (fingerprints.expect(change.bucket, change.fenceCount, change.checksum, change.seq)) {
          bucketStatsState.update(change);
        }
        continue;
      }
      FenceEdit edit = decode(change);
      run.add(edit);
      if (edit.kind() == EditKind.DELETE) {
        applyCoalesced(EditCoalescer.coalesce(run).get(0));
        run.clear();
      }
    }
    if (!run.isEmpty()) {
      applyCoalesced(EditCoalescer.coalesce(run).get(0));
    }
    updatePhase();
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
      fingerprints.remove(edit.fenceId(), storedSeq);
    }
    if (edit.kind() != EditKind.DELETE) {
      fingerprints.add(edit.fenceId(), edit.seq());
    }
    if (outcome == EditOutcome.GAP) {
      // The stream lost an edit: nothing else it delivered can be trusted either.
      distrust("seq gap on fence " + edit.fenceId() + ": seq " + edit.seq() + " arrived after " + storedSeq + ", the change stream lost an edit");
    }
    boolean deleted = edit.kind() == EditKind.DELETE;
    FenceEdit shaping = coalesced.shaping();
    // Keyed state is read only when the edit does not say the tenant: on RocksDB a read per edit
    // (of a key that a snapshot never finds) was most of a cold start's time.
    String tenant = shaping != null && shaping.kind() == EditKind.UPSERT ? shaping.tenant() : storedTenant();
    fenceState.update(new StoredFence(
        edit.seq(), deleted, deleted ? null : fences.index().get(edit.fenceId()), tenant,
        edit.commitLsn(), edit.commitTimeMillis()));
    if (deleted) {
      // An object inside a deleted fence leaves it now, at the delete's commit time.
      for (Map.Entry<String, Long> member : membersState.entries()) {
        emit(GeofenceTrigger.exitOnDelete(member.getKey(), edit.fenceId(), edit.commitTimeMillis(), edit.seq(), System.currentTimeMillis()));
        Set<String> inside = fencesByObject.get(member.getKey());
        if (inside != null) {
          inside.remove(edit.fenceId());
          if (inside.isEmpty()) {
            fencesByObject.remove(member.getKey());
          }
        }
      }
      membersState.clear();
    }
  }

  private String storedTenant() throws Exception {
    StoredFence stored = fenceState.value();
    return stored == null ? null : stored.tenant;
  }

  private FenceEdit decode(FenceChange change) {
    EditOrigin origin = change.snapshot ? EditOrigin.SNAPSHOT : EditOrigin.STREAM;
    if (change.delete) {
      return FenceEdit.delete(change.fenceId, change.seq, origin, change.lsn, change.commitTime);
    }
    try {
      DecodedGeometry decoded = decodeGeometry(change);
      decoded.repair().ifPresent(note -> deadLetter(change, "WARNING", "REPAIRED", note));
      return FenceEdit.upsert(change.fenceId, change.seq, decoded.geometry(), change.tenant, origin, change.lsn, change.commitTime);
    } catch (BadGeometryException e) {
      String kept = fences.index().get(change.fenceId) != null ? "; the previous version stays in force" : "; the fence has no usable version";
      deadLetter(change, "ERROR", e.reason().name(), e.getMessage() + kept);
      return FenceEdit.refusedUpsert(change.fenceId, change.seq, change.tenant, origin, change.lsn, change.commitTime);
    }
  }

  private DecodedGeometry decodeGeometry(FenceChange change) throws BadGeometryException {
    if (change.geometryBytes != null) {
      return reader.readWkb(change.geometryBytes);
    }
    if (change.geometryText == null) {
      throw new BadGeometryException(BadGeometryException.Reason.EMPTY, "the geometry column is null");
    }
    return reader.readText(change.geometryText, geometryFormat);
  }

  private void deadLetter(FenceChange change, String severity, String reason, String detail) {
    String payload = change.geometryText != null ? change.geometryText
        : change.geometryBytes != null ? Base64.getEncoder().encodeToString(change.geometryBytes) : null;
    if (payload != null && payload.length() > PAYLOAD_LIMIT) {
      payload = payload.substring(0, PAYLOAD_LIMIT);
    }
    output.collect(DEAD_LETTERS, new StreamRecord<>(new DeadLetter(
        "fence", change.fenceId, change.seq, severity, reason, detail, payload, change.commitTime, System.currentTimeMillis())));
  }

  // ---- input 2: locations, broadcast ---------------------------------------------------------------

  @Override
  public void processElement2(StreamRecord<Location> record) throws Exception {
    Location location = record.getValue();
    if (location.timestamp <= clock && ready()) {
      lateLocations++;
      evaluate(location, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());
    } else {
      // Not due yet, or the index is not provably complete: held, in state, none lost.
      pendingLocations.add(new Held(arrivals++, location, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup()));
    }
  }

  /**
   * Evaluates a location against the fences of key groups {@code [start, end]}: all of this
   * subtask's, except for a location a restore handed over for part of them.
   */
  private void evaluate(Location location, int start, int end) throws Exception {
    List<String> covering = fences.index().covering(location.lon, location.lat, location.tenant);
    Set<String> before = fencesByObject.getOrDefault(location.objectId, Set.of());
    if (before.isEmpty() && covering.isEmpty()) {
      return;
    }
    boolean whole = start == ownKeyGroups.getStartKeyGroup() && end == ownKeyGroups.getEndKeyGroup();
    Set<String> inside = new HashSet<>(before);
    long now = System.currentTimeMillis();
    for (String fenceId : covering) {
      if ((whole || inKeyGroups(fenceId, start, end)) && inside.add(fenceId)) {
        setCurrentKey(new FenceKey(fenceId));
        membersState.put(location.objectId, location.timestamp);
        emit(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.ENTER, location.timestamp,
            location.lon, location.lat, fences.seqOf(fenceId), location.tenant, now));
      }
    }
    for (String fenceId : before) {
      if ((whole || inKeyGroups(fenceId, start, end)) && !covering.contains(fenceId)) {
        setCurrentKey(new FenceKey(fenceId));
        membersState.remove(location.objectId);
        emit(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.EXIT, location.timestamp,
            location.lon, location.lat, fences.seqOf(fenceId), location.tenant, now));
        inside.remove(fenceId);
      }
    }
    if (inside.isEmpty()) {
      fencesByObject.remove(location.objectId);
    } else {
      fencesByObject.put(location.objectId, inside);
    }
  }

  private boolean inKeyGroups(String fenceId, int start, int end) {
    int group = FenceBuckets.of(fenceId) % maxParallelism;
    return group >= start && group <= end;
  }

  private void emit(GeofenceTrigger trigger) {
    output.collect(new StreamRecord<>(trigger, trigger.eventTime));
  }

  // ---- the clock -----------------------------------------------------------------------------------

  @Override
  public void processWatermark(Watermark mark) throws Exception {
    // Called with the combined watermark of both inputs (idle inputs excluded).
    if (mark.getTimestamp() > clock) {
      clock = mark.getTimestamp();
      drainUpTo(clock);
    }
    super.processWatermark(mark);
  }

  @Override
  public void processWatermark2(Watermark mark) throws Exception {
    locationWatermark = Math.max(locationWatermark, mark.getTimestamp());
    super.processWatermark2(mark);
  }

  /** The time of the oldest location not yet evaluated: held, or yet to come within its watermark. */
  private long oldestUnevaluatedLocation() {
    Held held = pendingLocations.peek();
    return held == null ? locationWatermark : Math.min(locationWatermark, held.location.timestamp);
  }

  private void queue(PendingEdit edit) {
    pendingEdits.add(edit);
    pendingEditCounts.merge(edit.fenceId, 1, Integer::sum);
  }

  private void drainUpTo(long time) throws Exception {
    while (true) {
      PendingEdit edit = pendingEdits.peek();
      Held location = pendingLocations.peek();
      boolean editDue = edit != null && edit.time <= time;
      // Until the index is provably complete no location is due: edits go on being applied.
      boolean locationDue = location != null && location.location.timestamp <= time && ready();
      if (editDue && (!locationDue || edit.time <= location.location.timestamp)) {
        pendingEdits.poll();
        pendingEditCounts.computeIfPresent(edit.fenceId, (k, n) -> n == 1 ? null : n - 1);
        // Every edit of this fence up to the next location can be coalesced: no location sees
        // the versions in between.
        applyPending(edit.fenceId, !locationDue ? time : Math.min(time, location.location.timestamp));
      } else if (locationDue) {
        pendingLocations.poll();
        evaluate(location.location, location.keyGroupStart, location.keyGroupEnd);
      } else {
        return;
      }
    }
  }

  /**
   * Applies the fence's pending edits committed at or before {@code time}, in arrival order. Their
   * other entries in the queue then find nothing left to apply.
   */
  private void applyPending(String fenceId, long time) throws Exception {
    setCurrentKey(new FenceKey(fenceId));
    List<FenceChange> due = new ArrayList<>();
    List<FenceChange> keep = new ArrayList<>();
    for (FenceChange change : pendingEditsState.get()) {
      (change.commitTime <= time ? due : keep).add(change);
    }
    if (!due.isEmpty()) {
      apply(due);
      pendingEditsState.update(keep);
    }
  }

  // ---- for tests -----------------------------------------------------------------------------------

  /** This operator writes fences in format {@code version}, as another release would. */
  FenceIndexOperator writingFormat(byte version) {
    fenceSerializer = new StoredFenceSerializer(version);
    return this;
  }

  LoadPhase phase() {
    return phase;
  }

  FenceSet fences() {
    return fences;
  }
}
