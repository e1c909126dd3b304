package dev.geofence.job.index;

import dev.geofence.state.time.StayRules;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import org.apache.flink.annotation.Internal;

/**
 * When the stays of a subtask's objects DWELL and when their objects fall silent
 * (docs/design.md#dwell-and-silence): the pending DWELL of each stay, and the objects whose
 * silence is to be looked at, each in a queue by the clock time that decides it.
 *
 * <p>A location decides at once: one at or after a stay's ENTER + delay that finds it open DWELLs
 * it (and a stay that ends at or after that time DWELLs before it ends), one more than the presence
 * timeout after its object's previous location ends its stays by silence first. Without a location,
 * the clock decides, once it has passed the time by the allowed lateness: until then a late
 * location could still show the stay ended before its DWELL, or the object not silent. So
 * a decision never depends on when the clock moved, only on the locations and edits, and a replay
 * makes the same. Not thread-safe. Public for the benchmark of the location path; not an API.
 */
@Internal
public final class Stays {

  /** An object's stay in a fence. */
  record Stay(String objectId, String fenceId) {}

  /** A stay's DWELL at {@code due}, decided by the clock at {@code due} + lateness. */
  private record PendingDwell(long due, Stay stay) {}

  /** An object's silence to be looked at when the clock reaches {@code at}. */
  private record Watch(long at, String objectId) {}

  private final long dwellDelay;
  private final long presenceTimeout;
  private final long lateness;
  /** The DWELL time of each open stay that has not DWELLed. */
  private final Map<Stay, Long> dwellDue = new HashMap<>();
  /** The same, by decision time; entries of stays ended before their DWELL are dropped as they surface. */
  private final PriorityQueue<PendingDwell> dwellQueue = new PriorityQueue<>((a, b) -> Long.compare(a.due(), b.due()));
  /** The objects with a watch in {@link #silenceQueue}: one each, moved on when it surfaces. */
  private final Set<String> watched = new HashSet<>();
  private final PriorityQueue<Watch> silenceQueue = new PriorityQueue<>((a, b) -> Long.compare(a.at(), b.at()));

  /** @param lateness the allowed lateness of locations, milliseconds */
  public Stays(StayRules rules, long lateness) {
    this.dwellDelay = rules.dwellDelay().toMillis();
    this.presenceTimeout = rules.presenceTimeout().toMillis();
    this.lateness = lateness;
  }

  boolean dwells() {
    return dwellDelay > 0;
  }

  boolean silences() {
    return presenceTimeout > 0;
  }

  /** When an object whose newest location is at {@code newest} falls silent, if no location comes. */
  long silentAt(long newest) {
    return newest + presenceTimeout;
  }

  /** Whether an object whose newest location is at {@code newest} is silent past the lateness at {@code clock}: final. */
  boolean silentBy(long newest, long clock) {
    return silentAt(newest) + lateness <= clock;
  }

  /** An object entered a fence at {@code since}: its DWELL is due at {@code since} + delay. */
  void entered(String objectId, String fenceId, long since) {
    if (dwells()) {
      schedule(new Stay(objectId, fenceId), since + dwellDelay);
    }
  }

  /**
   * A stay restored open at {@code since}: its DWELL is pending unless a location of its object
   * at or after the DWELL time ({@code newest}) or the clock past it by the lateness decided it.
   */
  void restored(String objectId, String fenceId, long since, long newest, long clock) {
    long due = since + dwellDelay;
    if (dwells() && newest < due && (clock == Long.MIN_VALUE || clock < due + lateness)) {
      schedule(new Stay(objectId, fenceId), due);
    }
  }

  private void schedule(Stay stay, long due) {
    dwellDue.put(stay, due);
    dwellQueue.add(new PendingDwell(due, stay));
    // Stays ended before their DWELL leave their entries behind: dropped in one pass once they outnumber the rest.
    if (dwellQueue.size() > 2 * dwellDue.size() + 1024) {
      dwellQueue.removeIf(p -> !Long.valueOf(p.due()).equals(dwellDue.get(p.stay())));
    }
  }

  /**
   * The DWELL time of the stay if it is pending and due at or before {@code time}, which takes it;
   * else {@link Long#MIN_VALUE}.
   */
  long takeDwellDueBy(String objectId, String fenceId, long time) {
    if (!dwells()) {
      return Long.MIN_VALUE;
    }
    Stay stay = new Stay(objectId, fenceId);
    Long due = dwellDue.get(stay);
    if (due == null || due > time) {
      return Long.MIN_VALUE;
    }
    dwellDue.remove(stay);
    return due;
  }

  /** The stay ended: a DWELL still pending is cancelled. */
  void ended(String objectId, String fenceId) {
    if (dwells()) {
      dwellDue.remove(new Stay(objectId, fenceId));
    }
  }

  /** The object is inside fences as of its location at {@code newest}: its silence is looked at in time. */
  void watch(String objectId, long newest) {
    if (silences() && watched.add(objectId)) {
      silenceQueue.add(new Watch(silentAt(newest) + lateness, objectId));
    }
  }

  /** What the clock decides as it passes a time. */
  interface Decide {
    /** The stay DWELLs, at {@code due}. */
    void dwell(Stay stay, long due) throws Exception;

    /**
     * Looks at an object's silence with the clock at {@code clock}: ends its stays if it is silent
     * past the lateness and returns {@link Long#MIN_VALUE}, as it does for an object inside no
     * fence; else returns its newest location's time, not silent past the lateness at {@code clock}
     * yet, to be looked at again from there.
     */
    long silence(String objectId, long clock) throws Exception;
  }

  /** The clock reached {@code clock}: the DWELLs and silences it decides are decided. */
  void passed(long clock, Decide decide) throws Exception {
    while (!dwellQueue.isEmpty() && dwellQueue.peek().due() + lateness <= clock) {
      PendingDwell pending = dwellQueue.poll();
      if (dwellDue.remove(pending.stay(), pending.due())) {
        decide.dwell(pending.stay(), pending.due());
      }
    }
    while (!silenceQueue.isEmpty() && silenceQueue.peek().at() <= clock) {
      Watch watch = silenceQueue.poll();
      long newest = decide.silence(watch.objectId(), clock);
      if (newest == Long.MIN_VALUE) {
        watched.remove(watch.objectId());
      } else {
        silenceQueue.add(new Watch(silentAt(newest) + lateness, watch.objectId()));
      }
    }
  }

  /**
   * The earliest event time of a DWELL or silence EXIT still to be decided, or {@link
   * Long#MAX_VALUE}: no trigger before it is still to come from these.
   */
  long undecidedFrom() {
    long from = Long.MAX_VALUE;
    if (!dwellQueue.isEmpty()) {
      from = dwellQueue.peek().due();
    }
    if (!silenceQueue.isEmpty()) {
      from = Math.min(from, silenceQueue.peek().at() - lateness);
    }
    return from;
  }

  /** Stays whose DWELL is still to be decided. */
  int pendingDwells() {
    return dwellDue.size();
  }
}
