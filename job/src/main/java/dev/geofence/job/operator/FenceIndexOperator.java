package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.connectors.cdc.FenceSourceOptions;
import dev.geofence.connectors.source.SlotProbe;
import dev.geofence.state.readiness.BucketFingerprints;
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
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
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

  /** Dead letters of fence edits this operator could not use as they were. */
  public static final OutputTag<DeadLetter> DEAD_LETTERS =
      new OutputTag<>("fence-dead-letters", TypeInformation.of(DeadLetter.class));

  private static final int PAYLOAD_LIMIT = 4096;

  /** This operator's own logger (hiding AbstractStreamOperator's), so its phases can be followed. */
  private static final Logger LOG = LoggerFactory.getLogger(FenceIndexOperator.class);

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;
  /** The source of truth, for the gap check on restore; null in tests that have none. */
  private final FenceSourceOptions source;

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
  private transient PriorityQueue<Held> pendingLocations;
  private transient BucketFingerprints fingerprints;
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
  private transient boolean announcedReady;
  /** Why the index cannot be trusted, or null: a failed gap check, or a seq gap in the stream. */
  private transient String gap;

  /** How fence geometries arrive from the source. */
  public enum GeometryFormat {
    /** EWKB/WKB bytes: a PostGIS geometry column, or bytea. */
    WKB,
    /** WKT or EWKT text. */
    WKT,
    /** GeoJSON text. */
    GEOJSON
  }

  public FenceIndexOperator(GeometryReadOptions geometryOptions, GeometryFormat geometryFormat) {
    this(geometryOptions, geometryFormat, null);
  }

  public FenceIndexOperator(GeometryReadOptions geometryOptions, GeometryFormat geometryFormat, FenceSourceOptions source) {
    this.geometryOptions = geometryOptions;
    this.geometryFormat = geometryFormat;
    this.source = source;
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
    fenceState = context.getKeyedStateStore().getState(new ValueStateDescriptor<>("fence", StoredFenceSerializer.INSTANCE));
    membersState = context.getKeyedStateStore().getMapState(new MapStateDescriptor<>("members", Types.STRING, Types.LONG));
    pendingEditsState = context.getKeyedStateStore().getListState(
        new ListStateDescriptor<>("pending-edits", TypeInformation.of(FenceChange.class)));
    pendingLocationsState = context.getOperatorStateStore().getUnionListState(
        new ListStateDescriptor<>("pending-locations", TypeInformation.of(PendingLocation.class)));
    bucketStatsState = context.getKeyedStateStore().getState(
        new ValueStateDescriptor<>("bucket-stats", TypeInformation.of(FenceChange.class)));
    streamPositionState = context.getKeyedStateStore().getState(
        new ValueStateDescriptor<>("stream-position", TypeInformation.of(FenceChange.class)));
    clockState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));
    untrustedState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("untrusted", Types.STRING));

    reader = new FenceGeometryReader(geometryOptions);
    fences = new FenceSet(new FenceIndex());
    fencesByObject = new HashMap<>();
    pendingEdits = new PriorityQueue<>(Comparator.<PendingEdit>comparingLong(e -> e.time).thenComparingLong(e -> e.arrival));
    pendingLocations = new PriorityQueue<>(
        Comparator.<Held>comparingLong(p -> p.location.timestamp).thenComparingLong(p -> p.arrival));
    clock = Long.MIN_VALUE;
    maxParallelism = getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
    ownKeyGroups = ((CheckpointableKeyedStateBackend<?>) getKeyedStateBackend()).getKeyGroupRange();
    fingerprints = new BucketFingerprints(maxParallelism, ownKeyGroups.getStartKeyGroup(), ownKeyGroups.getEndKeyGroup());

    // Starting fresh and restoring share this path: on a fresh start there is nothing to read.
    restoreFromKeyedState();
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
    if (context.isRestored() && gap == null) {
      gap = maybeGapCheck();
    }
  }

  /**
   * Before any location is evaluated, proves that the slot can still stream from where the
   * restored state stopped. A failure holds every location (the index is never ready); rebuilding
   * from the source is the next step (issue 4).
   */
  private String maybeGapCheck() {
    if (source == null) {
      return null;
    }
    try (java.sql.Connection db = java.sql.DriverManager.getConnection(source.jdbcUrl(), source.username(), source.password())) {
      SlotState slot = SlotProbe.read(db, source.slotName());
      // State checkpointed before the first stream record (during the initial snapshot) has no
      // position of its own: the CDC source resumes its snapshot, and confirms nothing until it
      // streams, so only the slot's existence and WAL are in question.
      long from = restoredLsn == 0 && slot.exists() ? slot.confirmedFlushLsn() : restoredLsn;
      GapCheck.Result result = GapCheck.check(slot, from);
      if (result.covered()) {
        LOG.info("Gap check passed: {}", result.reason());
        return null;
      }
      LOG.warn("Gap check failed, the restored fences cannot be trusted and no location will be evaluated: {}", result.reason());
      return result.reason();
    } catch (java.sql.SQLException e) {
      LOG.warn("Gap check could not reach the fence database at {}: {}", source.jdbcUrl(), e.getMessage());
      return "the fence database was unreachable at restore: " + e.getMessage();
    }
  }

  /** Provably complete: no gap found at restore, and every owned bucket matches the source. */
  private boolean ready() {
    return gap == null && fingerprints.ready();
  }

  /** Notes how far the stream has been read. */
  private void advanceStream(FenceChange change) {
    if (!change.snapshot && Long.compareUnsigned(change.lsn, streamLsn) > 0) {
      streamLsn = change.lsn;
    }
    streamTime = Math.max(streamTime, change.commitTime);
  }

  private void restoreFromKeyedState() throws Exception {
    KeyedStateBackend<FenceKey> backend = getKeyedStateBackend();
    List<FenceEdit> stored = new ArrayList<>();
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ValueStateDescriptor<>("fence", StoredFenceSerializer.INSTANCE),
        (FenceKey key, ValueState<StoredFence> state) -> stored.add(state.value().asSnapshotEdit(key.id)));
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
        new ValueStateDescriptor<>("bucket-stats", TypeInformation.of(FenceChange.class)),
        (FenceKey key, ValueState<FenceChange> state) -> {
          fingerprints.expect(state.value().bucket, state.value().fenceCount, state.value().checksum);
          advanceStream(state.value());
        });
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ValueStateDescriptor<>("stream-position", TypeInformation.of(FenceChange.class)),
        (FenceKey key, ValueState<FenceChange> state) -> advanceStream(state.value()));
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new MapStateDescriptor<>("members", Types.STRING, Types.LONG),
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
            pendingEdits.add(new PendingEdit(change.commitTime, arrivals++, key.id));
          }
        });
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
    advanceStream(change);
    if (change.kind == FenceChange.Kind.HEARTBEAT) {
      // Keyed like key group change.bucket: this subtask's record of how far the stream has got.
      streamPositionState.update(change);
      return;
    }
    if (change.kind != FenceChange.Kind.FENCE && change.kind != FenceChange.Kind.BUCKET_STATS) {
      return;
    }
    if (change.snapshot || change.commitTime <= clock) {
      boolean wasReady = ready();
      apply(List.of(change));
      if (!wasReady && ready()) {
        drainUpTo(clock);
      }
    } else {
      pendingEditsState.add(change);
      // Queued under the record's key: a fence's id, or a bucket fingerprint's.
      String key = change.kind == FenceChange.Kind.BUCKET_STATS ? FenceKey.ofBucket(change.bucket).id : change.fenceId;
      pendingEdits.add(new PendingEdit(change.commitTime, arrivals++, key));
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
        bucketStatsState.update(change);
        fingerprints.expect(change.bucket, change.fenceCount, change.checksum);
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
    if (!announcedReady && ready()) {
      announcedReady = true;
      LOG.info("Fence index ready: {} fences in {} buckets match the source's fingerprints", fences.checksum().count(), fingerprints.ownedBuckets());
    }
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
    if (outcome == EditOutcome.GAP && gap == null) {
      // The stream lost an edit: nothing else it delivered can be trusted either.
      gap = "seq gap on fence " + edit.fenceId() + ": seq " + edit.seq() + " arrived after " + storedSeq + ", the change stream lost an edit";
      LOG.warn("{}; no location will be evaluated", gap);
    }
    StoredFence previous = fenceState.value();
    boolean deleted = edit.kind() == EditKind.DELETE;
    FenceEdit shaping = coalesced.shaping();
    String tenant = shaping != null && shaping.kind() == EditKind.UPSERT ? shaping.tenant() : previous == null ? null : previous.tenant;
    fenceState.update(new StoredFence(
        edit.seq(), deleted, deleted ? null : fences.index().get(edit.fenceId()), tenant,
        edit.commitLsn(), edit.commitTimeMillis()));
    if (deleted) {
      // An object inside a deleted fence leaves it now, at the delete's commit time.
      for (Map.Entry<String, Long> member : membersState.entries()) {
        emit(new GeofenceTrigger(member.getKey(), edit.fenceId(), TriggerKind.EXIT, edit.commitTimeMillis(),
            Double.NaN, Double.NaN, edit.seq(), null, System.currentTimeMillis()));
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
    return geometryFormat == GeometryFormat.GEOJSON ? reader.readGeoJson(change.geometryText) : reader.readWkt(change.geometryText);
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

  private void drainUpTo(long time) throws Exception {
    while (true) {
      PendingEdit edit = pendingEdits.peek();
      Held location = pendingLocations.peek();
      boolean editDue = edit != null && edit.time <= time;
      // Until the index is provably complete no location is due: edits go on being applied.
      boolean locationDue = location != null && location.location.timestamp <= time && ready();
      if (editDue && (!locationDue || edit.time <= location.location.timestamp)) {
        pendingEdits.poll();
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

  FenceSet fences() {
    return fences;
  }
}
