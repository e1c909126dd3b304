package dev.geofence.job.operator;

import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.edit.FenceSet;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Evaluates locations against a subtask's fences (DESIGN section 5): ENTER when an object is inside
 * a fence now and was not at its previous evaluation for that fence, EXIT when it was and is not,
 * or when the fence is deleted under it. Who is inside which fence is kept twice: durably per fence
 * by the owner ({@link Membership}, keyed state), and here per object in memory, rebuilt from the
 * former on every restore, so that a location costs no keyed-state read. Locations released together
 * are evaluated in batches ({@link #add}, {@link #flush}), through one query of the index per batch,
 * whose stages overlap the cache misses of its points. Not thread-safe.
 */
final class Evaluation {

  /** The durable record of who is inside a fence, kept by the owner. */
  interface Membership {
    void entered(String fenceId, String objectId, long since) throws Exception;

    void left(String fenceId, String objectId) throws Exception;
  }

  private final FenceSet fences;
  private final Membership membership;
  private final Consumer<GeofenceTrigger> emit;
  private final int maxParallelism;
  private final int ownStart;
  private final int ownEnd;
  private final Map<String, Set<String>> fencesByObject = new HashMap<>();
  private final LocationBatch batch;

  Evaluation(FenceSet fences, Membership membership, Consumer<GeofenceTrigger> emit, int maxParallelism, int ownStart, int ownEnd) {
    this(fences, membership, emit, maxParallelism, ownStart, ownEnd, LocationBatch.DEFAULT_SIZE);
  }

  /** @param batchSize locations per query of the index ({@link #add}); 1 queries each alone */
  Evaluation(FenceSet fences, Membership membership, Consumer<GeofenceTrigger> emit, int maxParallelism, int ownStart, int ownEnd,
      int batchSize) {
    this.batch = new LocationBatch(batchSize);
    this.fences = fences;
    this.membership = membership;
    this.emit = emit;
    this.maxParallelism = maxParallelism;
    this.ownStart = ownStart;
    this.ownEnd = ownEnd;
  }

  /** A restored membership: {@code objectId} is inside {@code fenceId}. */
  void restoreMember(String fenceId, String objectId) {
    fencesByObject.computeIfAbsent(objectId, o -> new HashSet<>()).add(fenceId);
  }

  /**
   * Evaluates a location against the fences of key groups {@code [start, end]}: all of this
   * subtask's, except for a location a restore handed over for part of them.
   */
  void evaluate(Location location, int start, int end) throws Exception {
    evaluate(location, start, end, fences.index().covering(location.lon, location.lat, location.tenant));
  }

  /**
   * Adds a location to the batch, to be evaluated as {@link #evaluate} would, by the time {@link
   * #flush} returns; a full batch is evaluated at once. The caller flushes before anything that
   * could change the answer (a fence edit) or the order of triggers (a location evaluated alone).
   */
  void add(Location location, int start, int end) throws Exception {
    batch.add(location, start, end);
    if (batch.full()) {
      flush();
    }
  }

  /** Evaluates the batch's locations in the order they were added, all from one query of the index. */
  void flush() throws Exception {
    int n = batch.size();
    if (n == 0) {
      return;
    }
    batch.query(fences.index());
    List<String> covering = new ArrayList<>(4);
    for (int point = 0; point < n; point++) {
      batch.covering(point, covering);
      evaluate(batch.location(point), batch.keyGroupStart(point), batch.keyGroupEnd(point), covering);
    }
    batch.clear();
  }

  /** Evaluates {@code location} given the ids of the fences covering it, which it does not keep. */
  private void evaluate(Location location, int start, int end, List<String> covering) throws Exception {
    Set<String> before = fencesByObject.getOrDefault(location.objectId, Set.of());
    if (before.isEmpty() && covering.isEmpty()) {
      return;
    }
    boolean whole = start == ownStart && end == ownEnd;
    Set<String> inside = new HashSet<>(before);
    long now = System.currentTimeMillis();
    for (String fenceId : covering) {
      if ((whole || inKeyGroups(fenceId, start, end)) && inside.add(fenceId)) {
        membership.entered(fenceId, location.objectId, location.timestamp);
        emit.accept(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.ENTER, location.timestamp,
            location.lon, location.lat, fences.seqOf(fenceId), location.tenant, now));
      }
    }
    for (String fenceId : before) {
      if ((whole || inKeyGroups(fenceId, start, end)) && !covering.contains(fenceId)) {
        membership.left(fenceId, location.objectId);
        emit.accept(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.EXIT, location.timestamp,
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

  /**
   * A fence was deleted: every object inside leaves it now, at the delete's commit time. The
   * owner clears the fence's durable membership after.
   */
  void deleted(String fenceId, Iterable<String> members, long commitTime, long seq) {
    long now = System.currentTimeMillis();
    for (String objectId : members) {
      emit.accept(GeofenceTrigger.exitOnDelete(objectId, fenceId, commitTime, seq, now));
      Set<String> inside = fencesByObject.get(objectId);
      if (inside != null) {
        inside.remove(fenceId);
        if (inside.isEmpty()) {
          fencesByObject.remove(objectId);
        }
      }
    }
  }

  private boolean inKeyGroups(String fenceId, int start, int end) {
    return FenceBuckets.inKeyGroups(FenceBuckets.of(fenceId), maxParallelism, start, end);
  }
}
