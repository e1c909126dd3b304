package dev.geofence.job.index;

import dev.geofence.job.operator.PendingLocation;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.ledger.Schedule;
import dev.geofence.state.time.LocationTimePolicy;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.apache.flink.annotation.Internal;

/**
 * The fence index's clock, and the locations that wait for it (design: "Time rules"): a location
 * with event time t is evaluated against the fences holding exactly the edits committed at or before
 * t. The clock is the operator's combined watermark; fence edits committed after it wait in the
 * ledger's {@link Schedule}, locations not yet evaluated here, and both are released in time order,
 * edits first on a tie, so that every subtask reaches the same decisions from the same elements and
 * watermarks, and a replay emits the same.
 *
 * <p>An edit that no location still to be evaluated can precede (older than every held location
 * and than the location watermark) and that is behind no queued edit of its key applies at once:
 * a catch-up's backlog does not wait for the clock edit by edit. So does any edit behind no queued
 * edit of its key while the index warms up: no location is evaluated before it is ready, and those
 * older than the edit then see the fence of their time through the history (the ledger keeps it for
 * them, and holds a delete's EXITs until the clock and every older location have passed it);
 * otherwise the locations a savepoint holds, older than a whole backlog, would queue every edit of
 * it. Not thread-safe. Public for the benchmark of the location path; not an API.
 */
@Internal
public final class EventClock implements FenceLedger.Clock {

  /** What the clock releases, in time order. */
  public interface Due {
    /** Applies the key's pending edits committed at or before {@code time}. */
    void applyPending(String key, long time) throws Exception;

    /** Evaluates the location against the fences of key groups [{@code keyGroupStart}, {@code keyGroupEnd}]. */
    void evaluate(Location location, int keyGroupStart, int keyGroupEnd) throws Exception;

    /** EXITs the objects inside the key's fence for its oldest delete whose EXITs wait ({@link #queueExit}). */
    void exitDeleted(String key) throws Exception;
  }

  /** A location not evaluated yet, with the key groups it is owed to. */
  private record Held(long arrival, Location location, int keyGroupStart, int keyGroupEnd) {}

  /** The order locations are released in: by time, then by arrival. */
  private static final Comparator<Held> RELEASE_ORDER =
      Comparator.<Held>comparingLong(h -> h.location().timestamp).thenComparingLong(Held::arrival);

  private final HeldLocations locations = new HeldLocations();
  private final Schedule schedule;
  private final LocationTimePolicy timePolicy;
  private long clock = Long.MIN_VALUE;
  /** Whether the index has not been ready yet in this attempt. */
  private boolean warmingUp = true;
  /** The location input's own watermark: no location to come (on time) is older. */
  private long locationWatermark = Long.MIN_VALUE;
  private long newestHeld = Long.MIN_VALUE;
  private long arrivals;

  /**
   * @param schedule where the fences' edits and EXITs wait
   * @param timePolicy how far back a late location may reach, and so how long history is kept
   */
  public EventClock(Schedule schedule, LocationTimePolicy timePolicy) {
    this.schedule = schedule;
    this.timePolicy = timePolicy;
  }

  @Override
  public long time() {
    return clock;
  }

  /** The index is ready: from now on an edit waits for every older location, ready or not. */
  void indexReady() {
    warmingUp = false;
  }

  @Override
  public boolean warmingUp() {
    return warmingUp;
  }

  @Override
  public long historyHorizon() {
    return Math.min(timePolicy.historyHorizon(clock), oldestHeld());
  }

  /**
   * Moves the clock to {@code watermark} if that is later, and says whether it moved. A restored
   * clock goes on from where it was, so a location late before a restore is late after it.
   */
  public boolean advanceTo(long watermark) {
    if (watermark > clock) {
      clock = watermark;
      return true;
    }
    return false;
  }

  void locationWatermark(long watermark) {
    locationWatermark = Math.max(locationWatermark, watermark);
  }

  @Override
  public boolean appliesAtOnce(long commitTime, String key) {
    return commitTime <= clock || ((warmingUp || commitTime <= oldestUnevaluatedLocation()) && !schedule.hasEdits(key));
  }

  public void hold(Location location, int keyGroupStart, int keyGroupEnd) {
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
  public void releaseUpTo(long time, BooleanSupplier ready, Due due) throws Exception {
    while (true) {
      Schedule.Entry edit = schedule.peekEdit();
      Schedule.Entry exit = schedule.peekExit();
      Held location = locations.peek();
      // Until the index is provably complete no location is due: edits go on being applied.
      boolean locationDue = location != null && location.location().timestamp <= time && ready.getAsBoolean();
      boolean editDue = edit != null && edit.time() <= time && (!locationDue || edit.time() <= location.location().timestamp);
      // A delete's EXITs wait for every older held location, due or not.
      boolean exitDue = exit != null && exit.time() <= time && (location == null || exit.time() <= location.location().timestamp);
      if (editDue && (!exitDue || edit.time() <= exit.time())) {
        schedule.pollEdit();
        due.applyPending(edit.key(), !locationDue ? time : Math.min(time, location.location().timestamp));
      } else if (exitDue) {
        // Called while still pending: locations the owner evaluates first still see the EXITs wait.
        due.exitDeleted(exit.key());
        schedule.pollExit();
      } else if (locationDue) {
        locations.poll();
        due.evaluate(location.location(), location.keyGroupStart(), location.keyGroupEnd());
      } else {
        return;
      }
    }
  }

  /** The time of the oldest held location, or {@link Long#MAX_VALUE} if none is held. */
  @Override
  public long oldestHeld() {
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
