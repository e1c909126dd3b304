package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.checksum.FenceBuckets;
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

  private final GeometryReadOptions geometryOptions;
  private final GeometryFormat geometryFormat;

  private transient ValueState<StoredFence> fenceState;
  private transient MapState<String, Long> membersState;
  private transient ListState<FenceChange> pendingEditsState;
  private transient ListState<Location> pendingLocationsState;
  private transient ListState<Long> clockState;

  private transient FenceSet fences;
  private transient FenceGeometryReader reader;
  private transient Map<String, Set<String>> fencesByObject;
  private transient PriorityQueue<PendingEdit> pendingEdits;
  private transient PriorityQueue<PendingLocation> pendingLocations;
  private transient long arrivals;
  private transient long clock;
  private transient long lateLocations;

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
    this.geometryOptions = geometryOptions;
    this.geometryFormat = geometryFormat;
  }

  private static final class PendingEdit {
    final long time;
    final long arrival;
    final String fenceId;

    PendingEdit(long time, long arrival, String fenceId) {
      this.time = time;
      this.arrival = arrival;
      this.fenceId = fenceId;
    }
  }

  private static final class PendingLocation {
    final long arrival;
    final Location location;

    PendingLocation(long arrival, Location location) {
      this.arrival = arrival;
      this.location = location;
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
        new ListStateDescriptor<>("pending-locations", TypeInformation.of(Location.class)));
    clockState = context.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("clock", Types.LONG));

    reader = new FenceGeometryReader(geometryOptions);
    fences = new FenceSet(new FenceIndex());
    fencesByObject = new HashMap<>();
    pendingEdits = new PriorityQueue<>(Comparator.<PendingEdit>comparingLong(e -> e.time).thenComparingLong(e -> e.arrival));
    pendingLocations = new PriorityQueue<>(
        Comparator.<PendingLocation>comparingLong(p -> p.location.timestamp).thenComparingLong(p -> p.arrival));
    clock = Long.MIN_VALUE;

    // Starting fresh and restoring share this path: on a fresh start there is nothing to read.
    restoreFromKeyedState();
    for (Location location : pendingLocationsState.get()) {
      pendingLocations.add(new PendingLocation(arrivals++, location));
    }
    // The clock goes on from where it was: a location that was late before the restore is late after.
    for (Long restored : clockState.get()) {
      clock = Math.max(clock, restored);
    }
  }

  private void restoreFromKeyedState() throws Exception {
    KeyedStateBackend<FenceKey> backend = getKeyedStateBackend();
    List<FenceEdit> stored = new ArrayList<>();
    backend.applyToAllKeys(
        VoidNamespace.INSTANCE, VoidNamespaceSerializer.INSTANCE,
        new ValueStateDescriptor<>("fence", StoredFenceSerializer.INSTANCE),
        (FenceKey key, ValueState<StoredFence> state) -> stored.add(state.value().asSnapshotEdit(key.id)));
    stored.forEach(fences::apply);
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
    pendingLocationsState.clear();
    clockState.clear();
    if (getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() == 0) {
      List<Location> pending = new ArrayList<>(pendingLocations.size());
      pendingLocations.forEach(p -> pending.add(p.location));
      pendingLocationsState.update(pending);
      clockState.add(clock);
    }
  }

  // ---- input 1: fence changes, keyed by fence id -------------------------------------------------

  @Override
  public void processElement1(StreamRecord<FenceChange> record) throws Exception {
    FenceChange change = record.getValue();
    if (change.kind != FenceChange.Kind.FENCE) {
      return;
    }
    if (change.snapshot || change.commitTime <= clock) {
      apply(List.of(change));
    } else {
      pendingEditsState.add(change);
      pendingEdits.add(new PendingEdit(change.commitTime, arrivals++, change.fenceId));
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
  }

  /** Seq-checks one coalesced edit, then updates keyed state and the index, and EXITs on delete. */
  private void applyCoalesced(CoalescedEdit coalesced) throws Exception {
    FenceEdit edit = coalesced.latest();
    EditOutcome outcome = fences.apply(coalesced);
    if (!outcome.changesState()) {
      return;
    }
    if (outcome == EditOutcome.GAP) {
      LOG.warn("Seq gap on fence {}: edit {} arrived after stored seq; the change stream lost an edit", edit.fenceId(), edit.seq());
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
    if (location.timestamp <= clock) {
      lateLocations++;
      evaluate(location);
    } else {
      pendingLocations.add(new PendingLocation(arrivals++, location));
    }
  }

  private void evaluate(Location location) throws Exception {
    List<String> covering = fences.index().covering(location.lon, location.lat, location.tenant);
    Set<String> before = fencesByObject.getOrDefault(location.objectId, Set.of());
    long now = System.currentTimeMillis();
    for (String fenceId : covering) {
      if (!before.contains(fenceId)) {
        setCurrentKey(new FenceKey(fenceId));
        membersState.put(location.objectId, location.timestamp);
        emit(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.ENTER, location.timestamp,
            location.lon, location.lat, fences.seqOf(fenceId), location.tenant, now));
      }
    }
    if (before.isEmpty() && covering.isEmpty()) {
      return;
    }
    Set<String> inside = new HashSet<>(covering);
    for (String fenceId : before) {
      if (!inside.contains(fenceId)) {
        setCurrentKey(new FenceKey(fenceId));
        membersState.remove(location.objectId);
        emit(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.EXIT, location.timestamp,
            location.lon, location.lat, fences.seqOf(fenceId), location.tenant, now));
      }
    }
    if (inside.isEmpty()) {
      fencesByObject.remove(location.objectId);
    } else {
      fencesByObject.put(location.objectId, inside);
    }
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
      PendingLocation location = pendingLocations.peek();
      boolean editDue = edit != null && edit.time <= time;
      boolean locationDue = location != null && location.location.timestamp <= time;
      if (editDue && (!locationDue || edit.time <= location.location.timestamp)) {
        pendingEdits.poll();
        // Every edit of this fence up to the next location can be coalesced: no location sees
        // the versions in between.
        applyPending(edit.fenceId, location == null ? time : Math.min(time, location.location.timestamp));
      } else if (locationDue) {
        pendingLocations.poll();
        evaluate(location.location);
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

  // ---- for tests and metrics -----------------------------------------------------------------------

  FenceSet fences() {
    return fences;
  }

  long lateLocations() {
    return lateLocations;
  }
}
