package dev.geofence.state.time;

import java.io.Serializable;
import java.time.Duration;

/**
 * Which locations event time admits, and how far back it looks (docs/design.md#time-rules). Three
 * rules, each with the reason of the dead letter a location it refuses becomes:
 *
 * <ul>
 *   <li>{@link #FUTURE_TIMESTAMP}: stamped more than the maximum clock skew ahead of the clock it
 *       is checked against. Checked before event time is assigned, so that it moves no watermark.
 *   <li>{@link #LATE}: more than the allowed lateness behind the fence index's clock when it
 *       arrives. Within it, a location is evaluated against the fences as they were at its time,
 *       which is why superseded fence versions are kept for that long ({@link #historyHorizon}).
 *   <li>{@link #OUT_OF_ORDER}: older than the newest location already evaluated for its object: an
 *       object's presence only moves forward in its own event time.
 * </ul>
 *
 * <p>Immutable and thread-safe.
 */
public record LocationTimePolicy(Duration allowedLateness, Duration maxClockSkew) implements Serializable {

  public static final String FUTURE_TIMESTAMP = "FUTURE_TIMESTAMP";
  public static final String LATE = "LATE";
  public static final String OUT_OF_ORDER = "OUT_OF_ORDER";
  /**
   * Stamped before a catch-up's read of what changed, on a subtask that caught up so: the fence
   * versions of its time were not read, so it is not evaluated there (docs/design.md#catch-up).
   */
  public static final String BEFORE_READ = "BEFORE_READ";

  public static final Duration DEFAULT_ALLOWED_LATENESS = Duration.ofMinutes(5);
  public static final Duration DEFAULT_MAX_CLOCK_SKEW = Duration.ofMinutes(1);

  public LocationTimePolicy {
    if (allowedLateness == null || allowedLateness.isNegative()) {
      throw new IllegalArgumentException("the allowed lateness must not be negative, got " + allowedLateness);
    }
    if (maxClockSkew == null || maxClockSkew.isNegative()) {
      throw new IllegalArgumentException("the maximum clock skew must not be negative, got " + maxClockSkew);
    }
  }

  public static LocationTimePolicy defaults() {
    return new LocationTimePolicy(DEFAULT_ALLOWED_LATENESS, DEFAULT_MAX_CLOCK_SKEW);
  }

  /** Whether a location stamped {@code timestamp} lies beyond the skew ahead of {@code now}. */
  public boolean isFuture(long timestamp, long now) {
    return timestamp > now && timestamp - now > maxClockSkew.toMillis();
  }

  /** Whether a location stamped {@code timestamp} is beyond the lateness behind {@code clock} (none is, before the clock starts). */
  public boolean isLate(long timestamp, long clock) {
    return clock != Long.MIN_VALUE && timestamp < historyHorizon(clock);
  }

  /**
   * The oldest time a location still admitted at {@code clock} can have: fence versions superseded
   * at or before it are needed by no location to come.
   */
  public long historyHorizon(long clock) {
    long lateness = allowedLateness.toMillis();
    return clock < Long.MIN_VALUE + lateness ? Long.MIN_VALUE : clock - lateness;
  }
}
