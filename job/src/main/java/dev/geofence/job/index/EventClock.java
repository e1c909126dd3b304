package dev.geofence.job.index;

import dev.geofence.job.operator.PendingLocation;
import dev.geofence.connectors.model.Location;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The fence index's clock, and what waits for it (docs/design.md#time-rules): a location with event time t
 * is evaluated against the fences holding exactly the edits committed at or before t. The clock is
 * the operator's combined watermark; fence edits committed after it and locations not yet
 * evaluated wait here, and are released in time order, edits first on a tie, so that every subtask
 * reaches the same decisions from the same elements and watermarks, and a replay emits the same.
 *
 * <p>An edit that no location still to be evaluated can precede (older than every held location
 * and than the location watermark) and that is behind no pending edit of its key applies at once:
 * a catch-up's backlog does not take a round trip through keyed state per edit. So does any edit
 * behind no pending edit of its key while the index warms up: no location is evaluated before it
 * is ready, and those older than the edit then see the fence of their time through the history
 * (the owner keeps it for them, and holds a delete's EXITs until the clock and every older location
 * have passed it); otherwise the locations a savepoint holds, older than a whole backlog, would send
 * every edit of it through keyed state. The edits' content is the owner's (in keyed state); this
 * holds their times and keys. Not thread-safe.
 */
final class EventClock {

  /** What the clock releases, in time order. */
  interface Due {
    /** Applies the key's pending edits committed at or before {@code time}. */
    void applyPending(String key, long time) throws Exception;

    /** Evaluates the location against the fences of key groups [{@code keyGroupStart}, {@code keyGroupEnd}]. */
    void evaluate(Location location, int keyGroupStart, int keyGroupEnd) throws Exception;

    /** EXITs the objects inside the key's fence for its oldest delete whose EXITs wait ({@link #queueExit}). */
    void exitDeleted(String key) throws Exception;
  }

  private record PendingEdit(long time, long arrival, String key) {}

  /** A location not evaluated yet, with the key groups it is owed to. */
  private record Held(long arrival, Location location, int keyGroupStart, int keyGroupEnd) {}

  private final PriorityQueue<PendingEdit> edits =
      new PriorityQueue<>(Comparator.comparingLong(PendingEdit::time).thenComparingLong(PendingEdit::arrival));
  /** How many entries of {@link #edits} each key has. */
  private final Map<String, Integer> editsPerKey = new HashMap<>();
  /** Deletes applied while older locations were held, whose EXITs wait for those ({@link #queueExit}). */
  private final PriorityQueue<PendingEdit> exits =
      new PriorityQueue<>(Comparator.comparingLong(PendingEdit::time).thenComparingLong(PendingEdit::arrival));
  private final Map<String, Integer> exitsPerKey = new HashMap<>();
  /** The order locations are released in: by time, then by arrival. */
  private static final Comparator<Held> RELEASE_ORDER =
      Comparator.<Held>comparingLong(h -> h.location().timestamp).thenComparingLong(Held::arrival);

  private final HeldLocations locations = new HeldLocations();
  private long clock = Long.MIN_VALUE;
  /** The location input's own watermark: no location to come (on time) is older. */
  private long locationWatermark = Long.MIN_VALUE;
  private long newestHeld = Long.MIN_VALUE;
  private long arrivals;

  long time() {
    return clock;
  }

  /**
   * Moves the clock to {@code watermark} if that is later, and says whether it moved. A restored
   * clock goes on from where it was, so a location late before a restore is late after it.
   */
  boolean advanceTo(long watermark) {
    if (watermark > clock) {
      clock = watermark;
      return true;
    }
    return false;
  }

  void locationWatermark(long watermark) {
    locationWatermark = Math.max(locationWatermark, watermark);
  }

  /**
   * Whether an edit committed at {@code commitTime} under {@code key} may apply now rather than
   * wait; {@code warmingUp} while the index has not been ready yet.
   */
  boolean appliesAtOnce(long commitTime, String key, boolean warmingUp) {
    return commitTime <= clock || ((warmingUp || commitTime <= oldestUnevaluatedLocation()) && !editsPerKey.containsKey(key));
  }

  void queueEdit(long commitTime, String key) {
    edits.add(new PendingEdit(commitTime, arrivals++, key));
    editsPerKey.merge(key, 1, Integer::sum);
  }

  /**
   * A delete committed at {@code time} was applied to the index while a location older than it was
   * held (the index was not ready, as in a catch-up after a restore): its EXITs wait until every
   * held location older than it is evaluated, ready or not, so that those see who was inside the
   * fence, as they did in time order, and the delete EXITs whoever they leave inside.
   */
  void queueExit(long time, String key) {
    exits.add(new PendingEdit(time, arrivals++, key));
    exitsPerKey.merge(key, 1, Integer::sum);
  }

  /** Whether a delete of the key's fence waits to EXIT its members. */
  boolean exitPending(String key) {
    return exitsPerKey.containsKey(key);
  }

  void hold(Location location, int keyGroupStart, int keyGroupEnd) {
    locations.add(new Held(arrivals++, location, keyGroupStart, keyGroupEnd));
    newestHeld = Math.max(newestHeld, location.timestamp);
  }

  /**
   * How far the clock trails the newest location held so far, milliseconds: 0 if it does not,
   * {@link Long#MAX_VALUE} while the clock has not started.
   */
  long lagBehindHeld() {
    if (newestHeld <= clock) {
      return 0;
    }
    return clock == Long.MIN_VALUE ? Long.MAX_VALUE : newestHeld - clock;
  }

  int heldLocations() {
    return locations.size();
  }

  int pendingEdits() {
    return edits.size();
  }

  /**
   * The held locations with the key groups each is owed to, for operator state, in release order:
   * held again in that order on restore, locations of the same time keep their order.
   */
  List<PendingLocation> held() {
    List<Held> inOrder = new ArrayList<>(locations.size());
    locations.forEach(inOrder::add);
    inOrder.sort(RELEASE_ORDER);
    List<PendingLocation> held = new ArrayList<>(inOrder.size());
    inOrder.forEach(h -> held.add(new PendingLocation(h.location(), h.keyGroupStart(), h.keyGroupEnd())));
    return held;
  }

  /**
   * Releases what is due at {@code time}: pending edits, and, while {@code ready} says so, held
   * locations, oldest first and edits first on a tie. Every edit of a fence up to the next location
   * goes at once (no location sees the versions in between, so they coalesce).
   */
  void releaseUpTo(long time, BooleanSupplier ready, Due due) throws Exception {
    while (true) {
      PendingEdit edit = edits.peek();
      PendingEdit exit = exits.peek();
      Held location = locations.peek();
      // Until the index is provably complete no location is due: edits go on being applied.
      boolean locationDue = location != null && location.location().timestamp <= time && ready.getAsBoolean();
      boolean editDue = edit != null && edit.time() <= time && (!locationDue || edit.time() <= location.location().timestamp);
      // A delete's EXITs wait for every older held location, due or not.
      boolean exitDue = exit != null && exit.time() <= time && (location == null || exit.time() <= location.location().timestamp);
      if (editDue && (!exitDue || edit.time() <= exit.time())) {
        edits.poll();
        editsPerKey.computeIfPresent(edit.key(), (k, n) -> n == 1 ? null : n - 1);
        due.applyPending(edit.key(), !locationDue ? time : Math.min(time, location.location().timestamp));
      } else if (exitDue) {
        // Called while still pending: locations the owner evaluates first still see the EXITs wait.
        due.exitDeleted(exit.key());
        exits.poll();
        exitsPerKey.computeIfPresent(exit.key(), (k, n) -> n == 1 ? null : n - 1);
      } else if (locationDue) {
        locations.poll();
        due.evaluate(location.location(), location.keyGroupStart(), location.keyGroupEnd());
      } else {
        return;
      }
    }
  }

  /** The time of the oldest held location, or {@link Long#MAX_VALUE} if none is held. */
  long oldestHeld() {
    Held held = locations.peek();
    return held == null ? Long.MAX_VALUE : held.location().timestamp;
  }

  /**
   * Held locations in {@link #RELEASE_ORDER}. Locations arrive nearly in time order: each input
   * channel in order, channels interleaved buffer by buffer. So arrivals are appended to a list at
   * no cost, and sorted into a run when the clock next looks at them (a merge of the channels'
   * runs, which the sort finds); a release takes the earliest head among the runs, of which there
   * are about as many as looks since the oldest held location. A heap of every held location cost
   * a logarithmic climb through some 10^5 of them per location (bench/run path). The run with the
   * earliest head is kept out of the heap of runs, and a release compares its next head with the
   * heap's earliest once: runs overlap only by the locations' disorder, so the same run usually
   * goes on, where taking it out of the heap and putting it back cost two climbs per location.
   */
  private static final class HeldLocations {
    private ArrayList<Held> arriving = new ArrayList<>();
    /** The run whose head is released next, or null if none is held. */
    private ArrayDeque<Held> first;
    private final PriorityQueue<ArrayDeque<Held>> runs =
        new PriorityQueue<>((a, b) -> RELEASE_ORDER.compare(a.peekFirst(), b.peekFirst()));
    private int size;

    void add(Held held) {
      arriving.add(held);
      size++;
    }

    Held peek() {
      seal();
      return first == null ? null : first.peekFirst();
    }

    void poll() {
      seal();
      first.pollFirst();
      size--;
      if (first.isEmpty()) {
        first = runs.poll();
      } else if (!runs.isEmpty() && RELEASE_ORDER.compare(runs.peek().peekFirst(), first.peekFirst()) < 0) {
        runs.add(first);
        first = runs.poll();
      }
    }

    int size() {
      return size;
    }

    void forEach(Consumer<Held> action) {
      arriving.forEach(action);
      if (first != null) {
        first.forEach(action);
      }
      runs.forEach(run -> run.forEach(action));
    }

    private void seal() {
      if (!arriving.isEmpty()) {
        arriving.sort(RELEASE_ORDER);
        ArrayDeque<Held> run = new ArrayDeque<>(arriving);
        arriving = new ArrayList<>();
        if (first == null) {
          first = run;
        } else if (RELEASE_ORDER.compare(run.peekFirst(), first.peekFirst()) < 0) {
          runs.add(first);
          first = run;
        } else {
          runs.add(run);
        }
      }
    }
  }

  /** The time of the oldest location not yet evaluated: held, or yet to come within its watermark. */
  private long oldestUnevaluatedLocation() {
    Held held = locations.peek();
    return held == null ? locationWatermark : Math.min(locationWatermark, held.location().timestamp);
  }
}
