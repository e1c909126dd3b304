package dev.geofence.job.index;

import dev.geofence.job.operator.Membership;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.time.FenceHistory;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Predicate;
import org.apache.flink.annotation.Internal;

/**
 * Evaluates locations against a subtask's fences (docs/design.md#evaluation): ENTER when an object is inside
 * a fence now and was not at its previous evaluation for that fence, EXIT when it was and is not,
 * or when the fence is deleted under it. Who is inside which fence is kept twice: durably per fence
 * by the owner ({@link Membership}, keyed state), and here per object in memory, rebuilt from the
 * former on every restore, so that a location costs no keyed-state read.
 *
 * <p>A location is evaluated against the fences in force at its time: the index holds the current
 * versions, and for a location older than the newest edit, {@link FenceHistory} says which fences
 * have changed since and what they were then. A fence deleted since the location's time is left
 * as it is once its delete has EXITed its members: that closed every presence in it, and a late
 * location does not reopen what was closed. While those EXITs wait for the location (a delete
 * applied as the index caught up, with older locations held), it is evaluated against the fence
 * as it was, so that it enters and leaves it as it did in time order.
 *
 * <p>An object's presence moves forward in its own event time only: a location older than the
 * newest one evaluated for its object (a late one, arriving after a newer one was evaluated) is
 * refused ({@link OutOfOrder}) and changes nothing. Locations of the same time are all evaluated.
 *
 * <p>Locations released together are evaluated in batches ({@link #add}, {@link #flush}), through
 * one query of the index per batch, whose stages overlap the cache misses of its points; each is
 * decided as {@link #evaluate} would, in the order added. Not thread-safe. Public for the benchmark
 * of the location path; not an API.
 */
@Internal
public final class Evaluation {

  /** Told of a location older than the newest evaluated for its object, which changed nothing. */
  public interface OutOfOrder {
    void refused(Location location, long newest);
  }

  private final FenceSet fences;
  private final FenceHistory history;
  private final Membership membership;
  private final Consumer<GeofenceTrigger> emit;
  private final int maxParallelism;
  private final int ownStart;
  private final int ownEnd;
  /**
   * Each object's presence and the time of its newest location evaluated, in one entry: a
   * location costs one lookup in a map of every object (a cache miss at 10^5 objects and more),
   * where a map for each cost three (docs/performance/journal.md, "2026-12-03: the location path").
   */
  private final Map<String, ObjectState> objects = new HashMap<>();
  private final OutOfOrder outOfOrder;
  private final Predicate<String> exitPending;
  private final LocationBatch batch;
  private final Stays stays;
  /** Stays whose DWELL is pending, in all objects' {@link ObjectState#dwellDue}. */
  private int pendingDwells;
  /** Stays restored with their ENTER times, until the clock and the objects' newest times are restored too. */
  private List<RestoredStay> restoredStays = new ArrayList<>();

  private record RestoredStay(String objectId, String fenceId, long since) {}

  /**
   * @param exitPending whether a fence's delete has yet to EXIT its members ({@link EventClock#queueExit})
   * @param batchSize locations per query of the index ({@link #add}); 1 queries each alone
   * @param stayRules when stays DWELL and objects fall silent
   * @param lateness the allowed lateness of locations, milliseconds
   */
  public Evaluation(FenceSet fences, FenceHistory history, Membership membership, Consumer<GeofenceTrigger> emit,
      OutOfOrder outOfOrder, Predicate<String> exitPending, int maxParallelism, int ownStart, int ownEnd, int batchSize,
      StayRules stayRules, long lateness) {
    this.stays = new Stays(stayRules, lateness);
    this.exitPending = exitPending;
    this.batch = new LocationBatch(batchSize);
    this.fences = fences;
    this.history = history;
    this.outOfOrder = outOfOrder;
    this.membership = membership;
    this.emit = emit;
    this.maxParallelism = maxParallelism;
    this.ownStart = ownStart;
    this.ownEnd = ownEnd;
  }

  /**
   * What is known of an object: the fences it is inside, the time of its newest location, and what
   * DWELL and silence need of it, here rather than in maps of their own, which would cost each
   * location another lookup (docs/performance/journal.md, "2026-12-06: DWELL and silence on the
   * location path").
   */
  private static final class ObjectState {
    /** The fences the object is inside, or null for none. */
    Set<String> inside;
    /** The time of its newest location evaluated, or {@link Long#MIN_VALUE} if forgotten ({@link #forgetOlderThan}). */
    long newest = Long.MIN_VALUE;
    /** The newest before the location being evaluated: when a silence since it would have begun. */
    long previous = Long.MIN_VALUE;
    /** The DWELL time of each of its stays whose DWELL is pending, or null for none. */
    Map<String, Long> dwellDue;
    /** Whether {@link Stays} has a look at its silence queued; kept until that look drops it. */
    boolean watched;

    boolean forgotten() {
      return inside == null && newest == Long.MIN_VALUE && !watched;
    }
  }

  /** A restored membership: {@code objectId} is inside {@code fenceId}, since its ENTER at {@code since}. */
  void restoreMember(String fenceId, String objectId, long since) {
    ObjectState object = objects.computeIfAbsent(objectId, o -> new ObjectState());
    if (object.inside == null) {
      object.inside = new HashSet<>();
    }
    object.inside.add(fenceId);
    if (mayDwell()) {
      restoredStays.add(new RestoredStay(objectId, fenceId, since));
    }
  }

  /**
   * Whether any stay may DWELL: the job's delay is on, or a fence has a delay of its own, now or in
   * a version the history keeps. Without, an ENTER costs nothing more than before DWELLs.
   */
  private boolean mayDwell() {
    return stays.dwells() || fences.index().hasDwellDelays() || history.versions() > 0;
  }

  /**
   * When a stay in the fence that began at {@code since} DWELLs ({@link Long#MAX_VALUE}: never): by
   * the delay of the fence version in force then, the one {@code then} holds if the fence has
   * changed since, else the index's (docs/design.md#a-delay-per-fence).
   */
  private long dwellAt(String fenceId, long since, FenceHistory.Version then) {
    long own = then != null ? then.dwellDelay() : fences.index().dwellDelayOf(fenceId);
    return stays.dwellAt(since, own);
  }

  /**
   * Everything is restored, the clock at {@code clock}: the stays' DWELLs not decided yet are
   * pending again, and the objects inside fences are watched for silence. An object inside whose
   * newest time the state did not keep (written with silence off) is timed from the clock.
   */
  void restored(long clock) {
    for (RestoredStay stay : restoredStays) {
      // Pending unless a location at or after its time, or the clock past it by the lateness, decided it.
      ObjectState object = objects.get(stay.objectId());
      long due = dwellAt(stay.fenceId(), stay.since(), history.versionAt(stay.fenceId(), stay.since()));
      if (due != Long.MAX_VALUE && object.newest < due && !stays.dwellDecidedBy(due, clock)) {
        queueDwell(stay.objectId(), object, stay.fenceId(), due);
      }
    }
    restoredStays = new ArrayList<>();
    if (stays.silences()) {
      objects.forEach((objectId, object) -> {
        if (object.inside != null) {
          if (object.newest == Long.MIN_VALUE) {
            object.newest = clock;
          }
          if (object.newest != Long.MIN_VALUE) {
            watch(objectId, object);
          }
        }
      });
    }
  }

  private void queueDwell(String objectId, ObjectState object, String fenceId, long due) {
    if (object.dwellDue == null) {
      object.dwellDue = new HashMap<>(4);
    }
    object.dwellDue.put(fenceId, due);
    pendingDwells++;
    stays.queueDwell(objectId, fenceId, due, pendingDwells, this::stillPending);
  }

  private boolean stillPending(Stays.PendingDwell dwell) {
    ObjectState object = objects.get(dwell.objectId());
    return object != null && object.dwellDue != null && Long.valueOf(dwell.due()).equals(object.dwellDue.get(dwell.fenceId()));
  }

  /** The stay's DWELL time if it is pending and due by {@code time}, which takes it; else {@link Long#MIN_VALUE}. */
  private long takeDwellDueBy(ObjectState object, String fenceId, long time) {
    if (object.dwellDue == null) {
      return Long.MIN_VALUE;
    }
    Long due = object.dwellDue.get(fenceId);
    if (due == null || due > time) {
      return Long.MIN_VALUE;
    }
    cancelDwell(object, fenceId);
    return due;
  }

  /** The stay's DWELL, if pending, is pending no more. */
  private void cancelDwell(ObjectState object, String fenceId) {
    if (object.dwellDue != null && object.dwellDue.remove(fenceId) != null) {
      pendingDwells--;
      if (object.dwellDue.isEmpty()) {
        object.dwellDue = null;
      }
    }
  }

  /** The object is inside fences: its silence is looked at in time, once queued until the look drops it. */
  private void watch(String objectId, ObjectState object) {
    if (stays.silences() && !object.watched) {
      object.watched = true;
      stays.watch(objectId, object.newest);
    }
  }

  /**
   * Evaluates a location against the fences of key groups {@code [start, end]}: all of this
   * subtask's, except for a location a restore handed over for part of them.
   */
  void evaluate(Location location, int start, int end) throws Exception {
    ObjectState object = inOrder(location);
    if (object != null) {
      evaluate(location, object, start, end, fences.index().covering(location.lon, location.lat, location.tenant));
    }
  }

  /**
   * Adds a location to the batch, to be evaluated as {@link #evaluate} would, by the time {@link
   * #flush} returns; a full batch is evaluated at once. The caller flushes before anything that
   * could change the answer (a fence edit, which also changes the history) or the order of
   * evaluations (a location evaluated alone).
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
      // Read for every point, refused or not: the answers are read points in order.
      batch.covering(point, covering);
      Location location = batch.location(point);
      ObjectState object = inOrder(location);
      if (object != null) {
        evaluate(location, object, batch.keyGroupStart(point), batch.keyGroupEnd(point), covering);
      }
    }
    batch.clear();
  }

  /**
   * The location's object, if the location is no older than the newest evaluated for it, which it
   * then becomes; null if it is older, and refused.
   */
  private ObjectState inOrder(Location location) {
    ObjectState object = objects.get(location.objectId);
    if (object == null) {
      object = new ObjectState();
      objects.put(location.objectId, object);
    } else if (location.timestamp < object.newest) {
      outOfOrder.refused(location, object.newest);
      return null;
    }
    object.previous = object.newest;
    object.newest = location.timestamp;
    return object;
  }

  /**
   * Evaluates an in-order location given the ids of the fences of the index covering it, which it
   * does not keep or change.
   */
  private void evaluate(Location location, ObjectState object, int start, int end, List<String> covering) throws Exception {
    if (stays.silences() && object.inside != null && object.previous != Long.MIN_VALUE
        && location.timestamp > stays.silentAt(object.previous)) {
      // Silent since its previous location: those stays ended then, and this location starts afresh.
      silence(location.objectId, object, stays.silentAt(object.previous), start, end, System.currentTimeMillis());
    }
    Set<String> before = object.inside == null ? Set.of() : object.inside;
    // Usually empty: only a location older than the newest edit finds fences changed since.
    Map<String, FenceHistory.Version> then = history.anyChangedAfter(location.timestamp)
        ? changedSince(location, covering, before) : Map.of();
    Set<String> untouched = Set.of();
    if (!then.isEmpty()) {
      covering = new ArrayList<>(covering);
      covering.removeIf(then::containsKey);
      untouched = new HashSet<>();
      for (Map.Entry<String, FenceHistory.Version> past : then.entrySet()) {
        String fenceId = past.getKey();
        if (history.deletedAfter(fenceId, location.timestamp, !fences.isLive(fenceId)) && !exitPending.test(fenceId)) {
          untouched.add(fenceId);
        } else if (past.getValue().covers(location.lon, location.lat, location.tenant)) {
          covering.add(fenceId);
        }
      }
    }
    if (before.isEmpty() && covering.isEmpty()) {
      return;
    }
    boolean whole = start == ownStart && end == ownEnd;
    Set<String> inside = new HashSet<>(before);
    long now = System.currentTimeMillis();
    for (String fenceId : covering) {
      if ((whole || inKeyGroups(fenceId, start, end)) && !untouched.contains(fenceId) && inside.add(fenceId)) {
        long seq = seqAt(fenceId, then);
        membership.entered(fenceId, location.objectId, location.timestamp, seq);
        if (mayDwell()) {
          long due = dwellAt(fenceId, location.timestamp, then.get(fenceId));
          if (due != Long.MAX_VALUE) {
            queueDwell(location.objectId, object, fenceId, due);
          }
        }
        emit.accept(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.ENTER, TriggerCause.LOCATION, location.timestamp,
            location.lon, location.lat, seq, location.tenant, now));
      }
    }
    for (String fenceId : before) {
      if ((whole || inKeyGroups(fenceId, start, end)) && !untouched.contains(fenceId)) {
        // Open until now, whether it goes on or ends here: a stay as long as the delay DWELLs.
        dwellIfDue(location.objectId, object, fenceId, location.timestamp, now);
        if (!covering.contains(fenceId)) {
          cancelDwell(object, fenceId);
          membership.left(fenceId, location.objectId);
          TriggerCause cause = reshapedUnder(fenceId, object.previous, location, then) ? TriggerCause.FENCE_RESHAPED : TriggerCause.LOCATION;
          emit.accept(new GeofenceTrigger(location.objectId, fenceId, TriggerKind.EXIT, cause, location.timestamp,
              location.lon, location.lat, seqAt(fenceId, then), location.tenant, now));
          inside.remove(fenceId);
        }
      }
    }
    object.inside = inside.isEmpty() ? null : inside;
    if (object.inside != null) {
      watch(location.objectId, object);
    }
  }

  /**
   * Whether an EXIT at the location is the fence's doing: the version in force at the object's
   * previous location, since replaced, covers the point the version of now does not.
   */
  private boolean reshapedUnder(String fenceId, long previous, Location location, Map<String, FenceHistory.Version> then) {
    if (previous == Long.MIN_VALUE) {
      return false;
    }
    FenceHistory.Version before = history.versionAt(fenceId, previous);
    return before != null && before.seq() != seqAt(fenceId, then) && before.covers(location.lon, location.lat, location.tenant);
  }

  /** DWELLs the stay if its DWELL is pending and due by {@code time}. */
  private void dwellIfDue(String objectId, ObjectState object, String fenceId, long time, long now) {
    long due = takeDwellDueBy(object, fenceId, time);
    if (due != Long.MIN_VALUE) {
      emitAt(objectId, fenceId, TriggerKind.DWELL, TriggerCause.LOITERING, due, now);
    }
  }

  /**
   * The object fell silent at {@code at}: it EXITs each fence of key groups [{@code start}, {@code
   * end}] it is inside, a stay as long as the delay DWELLing first.
   */
  private void silence(String objectId, ObjectState object, long at, int start, int end, long now) throws Exception {
    boolean whole = start == ownStart && end == ownEnd;
    for (Iterator<String> fences = object.inside.iterator(); fences.hasNext(); ) {
      String fenceId = fences.next();
      if (whole || inKeyGroups(fenceId, start, end)) {
        dwellIfDue(objectId, object, fenceId, at, now);
        cancelDwell(object, fenceId);
        membership.left(fenceId, objectId);
        emitAt(objectId, fenceId, TriggerKind.EXIT, TriggerCause.SILENCE, at, now);
        fences.remove();
      }
    }
    if (object.inside.isEmpty()) {
      object.inside = null;
    }
  }

  /**
   * The clock reached {@code clock}, every location up to it evaluated: the stays' DWELLs and the
   * objects' silences it decides are emitted.
   */
  void clockPassed(long clock) throws Exception {
    if (stays.queued() == 0) {
      return;
    }
    long now = System.currentTimeMillis();
    stays.passed(clock, new Stays.Decide() {
      @Override
      public void dwell(Stays.PendingDwell dwell) {
        if (stillPending(dwell)) {
          cancelDwell(objects.get(dwell.objectId()), dwell.fenceId());
          emitAt(dwell.objectId(), dwell.fenceId(), TriggerKind.DWELL, TriggerCause.LOITERING, dwell.due(), now);
        }
      }

      @Override
      public long silence(String objectId, long clock) throws Exception {
        ObjectState object = objects.get(objectId);
        if (object == null) {
          return Long.MIN_VALUE;
        }
        if (object.inside == null) {
          object.watched = false;
          return Long.MIN_VALUE;
        }
        if (object.newest == Long.MIN_VALUE) {
          // Forgotten before silence was on: timed from now on.
          object.newest = clock;
        }
        if (!stays.silentBy(object.newest, clock)) {
          return object.newest;
        }
        Evaluation.this.silence(objectId, object, stays.silentAt(object.newest), ownStart, ownEnd, now);
        object.watched = false;
        return Long.MIN_VALUE;
      }
    });
  }

  /**
   * The earliest event time of a trigger that is still to be decided by the clock alone (a DWELL
   * or a silence), or {@link Long#MAX_VALUE}.
   */
  long undecidedFrom() {
    return stays.undecidedFrom();
  }

  /** A trigger the clock or an end of stay decides, at {@code time}: of the fence version in force then, with no position. */
  private void emitAt(String objectId, String fenceId, TriggerKind kind, TriggerCause cause, long time, long now) {
    FenceHistory.Version then = history.versionAt(fenceId, time);
    long seq = then != null ? then.seq() : fences.seqOf(fenceId);
    String tenant = then != null ? then.tenant() : fences.index().contains(fenceId) ? fences.index().tenantOf(fenceId) : null;
    emit.accept(new GeofenceTrigger(objectId, fenceId, kind, cause, time, Double.NaN, Double.NaN, seq, tenant, now));
  }

  /**
   * The fences changed after the location's time that can make a difference to it, each with its
   * version of then: those whose version of then may cover the point, and those the index or the
   * object's presence names now. The others neither cover it then nor are covered or held now.
   */
  private Map<String, FenceHistory.Version> changedSince(Location location, List<String> covering, Set<String> before) {
    Map<String, FenceHistory.Version> then = history.changedAfterNear(location.lon, location.lat, location.timestamp);
    for (String fenceId : covering) {
      addIfChanged(then, fenceId, location.timestamp);
    }
    for (String fenceId : before) {
      addIfChanged(then, fenceId, location.timestamp);
    }
    return then;
  }

  private void addIfChanged(Map<String, FenceHistory.Version> then, String fenceId, long time) {
    FenceHistory.Version past = history.versionAt(fenceId, time);
    if (past != null) {
      then.put(fenceId, past);
    }
  }

  /** A restored time of the newest location evaluated for an object (the newest of several wins). */
  void restoreNewest(String objectId, long time) {
    ObjectState object = objects.computeIfAbsent(objectId, o -> new ObjectState());
    object.newest = Math.max(object.newest, time);
  }

  /** Gives the newest location time of each object that has one, for operator state. */
  void forEachNewest(BiConsumer<String, Long> action) {
    objects.forEach((objectId, object) -> {
      if (object.newest != Long.MIN_VALUE) {
        action.accept(objectId, object.newest);
      }
    });
  }

  /** Objects' newest times are pruned only beyond this many, so that a small fleet costs no pruning. */
  private static final int MIN_OBJECTS_KEPT = 1024;
  /** When the objects' newest times are next pruned ({@link #maybeForgetOlderThan}). */
  private int forgetAbove = MIN_OBJECTS_KEPT;

  /**
   * Forgets the objects seen no more within the lateness ({@link #forgetOlderThan}) each time their
   * map has doubled, not only at checkpoints.
   */
  void maybeForgetOlderThan(long horizon) {
    if (objects.size() > forgetAbove) {
      forgetOlderThan(horizon);
      forgetAbove = Math.max(MIN_OBJECTS_KEPT, 2 * objects.size());
    }
  }

  /** How many stays' DWELLs are still to be decided. */
  public int pendingDwells() {
    return pendingDwells;
  }

  /**
   * Entries queued for the clock's DWELLs and silences, those it will drop when they surface
   * included (bounded: a DWELL's by twice the pending ones, a silence's one per object).
   */
  public int queuedDecisions() {
    return stays.queued();
  }

  /** How many objects this holds: with a newest location time, or inside a fence. */
  public int objects() {
    return objects.size();
  }

  /**
   * Forgets the newest location time of the objects whose newest location is older than {@code
   * horizon}, and the objects inside no fence with it: a location older than that is never
   * evaluated (it is late), so their order needs no check.
   */
  public void forgetOlderThan(long horizon) {
    objects.values().removeIf(object -> {
      // An object inside fences keeps its newest time while silence is on: its silence is timed from it.
      if (object.newest < horizon && !(stays.silences() && object.inside != null)) {
        object.newest = Long.MIN_VALUE;
      }
      return object.forgotten();
    });
  }

  /**
   * A fence was deleted: the {@code members} that entered a version before it leave it now, at the
   * delete's commit time, or at their silence time if that came first (the owner took them from
   * the fence's durable membership).
   */
  void deleted(String fenceId, Iterable<String> members, long commitTime, long seq) throws Exception {
    long now = System.currentTimeMillis();
    for (String objectId : members) {
      ObjectState object = objects.get(objectId);
      // Silent before the delete, as far as is known yet: this stay ended then. Its other stays wait
      // for their own decision (a late location may still show the object was not silent), on
      // whichever subtask holds them, so that every parallelism decides them alike.
      boolean silent = stays.silences() && object != null && object.inside != null && object.inside.contains(fenceId)
          && object.newest != Long.MIN_VALUE && commitTime > stays.silentAt(object.newest);
      long ended = silent ? stays.silentAt(object.newest) : commitTime;
      if (object != null) {
        dwellIfDue(objectId, object, fenceId, ended, now);
        cancelDwell(object, fenceId);
      }
      if (silent) {
        emitAt(objectId, fenceId, TriggerKind.EXIT, TriggerCause.SILENCE, ended, now);
      } else {
        emit.accept(GeofenceTrigger.exitOnDelete(objectId, fenceId, commitTime, seq, now));
      }
      if (object != null && object.inside != null) {
        object.inside.remove(fenceId);
        if (object.inside.isEmpty()) {
          object.inside = null;
          if (object.forgotten()) {
            objects.remove(objectId);
          }
        }
      }
    }
  }

  /** The seq of the fence's version in force at the location's time. */
  private long seqAt(String fenceId, Map<String, FenceHistory.Version> then) {
    FenceHistory.Version past = then.get(fenceId);
    return past != null ? past.seq() : fences.seqOf(fenceId);
  }

  private boolean inKeyGroups(String fenceId, int start, int end) {
    return FenceBuckets.inKeyGroups(FenceBuckets.of(fenceId), maxParallelism, start, end);
  }
}
