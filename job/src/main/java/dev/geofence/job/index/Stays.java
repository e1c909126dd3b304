package dev.geofence.job.index;

import dev.geofence.state.time.StayRules;
import java.util.PriorityQueue;
import java.util.function.Predicate;

/**
 * When the clock decides the DWELLs and silences of a subtask's objects
 * (docs/design.md#dwell-and-silence): the stays whose DWELL is pending and the objects watched for
 * silence, each in a queue by the clock time that decides it. What is pending is {@link
 * Evaluation}'s to know, in each object's own entry (a location costs no lookup of its own here);
 * an entry of these queues is only looked at when it surfaces.
 *
 * <p>A location decides at once: one at or after a stay's ENTER + delay that finds it open DWELLs
 * it (and a stay that ends at or after that time DWELLs before it ends), one more than the presence
 * timeout after its object's previous location ends its stays by silence first. Without a location,
 * the clock decides, once it has passed the time by the allowed lateness: until then a late
 * location could still show the stay ended before its DWELL, or the object not silent. So a
 * decision never depends on when the clock moved, only on the locations and edits, and a replay
 * makes the same. Not thread-safe.
 */
final class Stays {

  /** A stay's DWELL at {@code due}, decided by the clock at {@code due} + lateness. */
  record PendingDwell(long due, String objectId, String fenceId) {}

  /** An object's silence to be looked at when the clock reaches {@code at}. */
  private record Watch(long at, String objectId) {}

  private final StayRules rules;
  private final long presenceTimeout;
  private final long lateness;
  /** Entries of stays ended before their DWELL are dropped as they surface, or all at once when they outnumber the rest. */
  private final PriorityQueue<PendingDwell> dwellQueue = new PriorityQueue<>((a, b) -> Long.compare(a.due(), b.due()));
  private final PriorityQueue<Watch> silenceQueue = new PriorityQueue<>((a, b) -> Long.compare(a.at(), b.at()));

  /** @param lateness the allowed lateness of locations, milliseconds */
  Stays(StayRules rules, long lateness) {
    this.rules = rules;
    this.presenceTimeout = rules.presenceTimeout().toMillis();
    this.lateness = lateness;
  }

  /** Whether a fence without a dwell delay of its own DWELLs: the job's delay is on. */
  boolean dwells() {
    return rules.dwells();
  }

  boolean silences() {
    return presenceTimeout > 0;
  }

  /**
   * When a stay that began at {@code since} DWELLs, in a fence version whose own delay is {@code
   * fenceDelay} ({@link StayRules#NO_FENCE_DELAY}: the job's); {@link Long#MAX_VALUE}: never.
   */
  long dwellAt(long since, long fenceDelay) {
    long delay = rules.dwellDelayOf(fenceDelay);
    // A delay past the end of time (a file may hold one) never comes rather than wrapping round.
    return delay > 0 && delay < Long.MAX_VALUE - since ? since + delay : Long.MAX_VALUE;
  }

  /** Whether the clock has decided a DWELL of {@code due} by {@code clock}. */
  boolean dwellDecidedBy(long due, long clock) {
    return clock != Long.MIN_VALUE && due + lateness <= clock;
  }

  /** When an object whose newest location is at {@code newest} falls silent, if no location comes. */
  long silentAt(long newest) {
    return newest + presenceTimeout;
  }

  /** Whether an object whose newest location is at {@code newest} is silent past the lateness at {@code clock}: final. */
  boolean silentBy(long newest, long clock) {
    return silentAt(newest) + lateness <= clock;
  }

  /**
   * Queues a stay's DWELL at {@code due} for the clock; {@code pending} is how many DWELLs are
   * pending in all, {@code stillPending} whether an entry's still is.
   */
  void queueDwell(String objectId, String fenceId, long due, int pending, Predicate<PendingDwell> stillPending) {
    dwellQueue.add(new PendingDwell(due, objectId, fenceId));
    if (dwellQueue.size() > 2 * pending + 1024) {
      dwellQueue.removeIf(stillPending.negate());
    }
  }

  /** Queues a look at an object's silence, its newest location at {@code newest}: once per object until it is dropped. */
  void watch(String objectId, long newest) {
    silenceQueue.add(new Watch(silentAt(newest) + lateness, objectId));
  }

  /** What the clock decides as it passes a time. */
  interface Decide {
    /** The clock decided the DWELL, if it is still pending. */
    void dwell(PendingDwell dwell) throws Exception;

    /**
     * Looks at an object's silence with the clock at {@code clock}: ends its stays if it is silent
     * past the lateness and returns {@link Long#MIN_VALUE}, as it does for an object inside no
     * fence (which drops the watch); else returns its newest location's time, not silent past the
     * lateness at {@code clock} yet, to be looked at again from there.
     */
    long silence(String objectId, long clock) throws Exception;
  }

  /** The clock reached {@code clock}: the DWELLs and silences it decides are decided. */
  void passed(long clock, Decide decide) throws Exception {
    while (!dwellQueue.isEmpty() && dwellDecidedBy(dwellQueue.peek().due(), clock)) {
      decide.dwell(dwellQueue.poll());
    }
    while (!silenceQueue.isEmpty() && silenceQueue.peek().at() <= clock) {
      Watch watch = silenceQueue.poll();
      long newest = decide.silence(watch.objectId(), clock);
      if (newest != Long.MIN_VALUE) {
        watch(watch.objectId(), newest);
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

  /** Entries of both queues, those already dropped by the state but not surfaced yet included. */
  int queued() {
    return dwellQueue.size() + silenceQueue.size();
  }
}
