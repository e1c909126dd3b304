package dev.geofence.state.time;

import java.io.Serializable;
import java.time.Duration;

/**
 * How long an object's stay in a fence lasts before it DWELLs, and how long an object may be
 * silent before its stays end (docs/design.md#dwell-and-silence). Either is off at zero. Both are
 * decided in event time: a DWELL at the ENTER's time plus the loitering delay, a silence's EXITs at
 * the last location's time plus the presence timeout. Immutable and thread-safe.
 *
 * @param dwellDelay the loitering delay: a stay at least this long DWELLs once, at ENTER + delay
 * @param presenceTimeout an object with no location for this long while inside fences EXITs them
 */
public record StayRules(Duration dwellDelay, Duration presenceTimeout) implements Serializable {

  /**
   * A fence's own dwell delay when it names none: the job's holds. A fence's delay is in
   * milliseconds, 0 when the fence never DWELLs (docs/design.md#a-delay-per-fence).
   */
  public static final long NO_FENCE_DELAY = -1;

  /** Neither DWELL nor silence: the triggers of releases before them. */
  public static final StayRules OFF = new StayRules(Duration.ZERO, Duration.ZERO);

  public StayRules {
    if (dwellDelay == null || dwellDelay.isNegative()) {
      throw new IllegalArgumentException("the dwell delay must not be negative, got " + dwellDelay);
    }
    if (presenceTimeout == null || presenceTimeout.isNegative()) {
      throw new IllegalArgumentException("the presence timeout must not be negative, got " + presenceTimeout);
    }
  }

  public boolean dwells() {
    return !dwellDelay.isZero();
  }

  /** Whether {@code fenceDelay} is a fence's own delay as kept: milliseconds, or {@link #NO_FENCE_DELAY}. */
  public static boolean isFenceDelay(long fenceDelay) {
    return fenceDelay >= 0 || fenceDelay == NO_FENCE_DELAY;
  }

  /** The delay of a fence whose own is {@code fenceDelay} ({@link #NO_FENCE_DELAY}: the job's), milliseconds; 0: it never DWELLs. */
  public long dwellDelayOf(long fenceDelay) {
    return fenceDelay == NO_FENCE_DELAY ? dwellDelay.toMillis() : fenceDelay;
  }

  public boolean silences() {
    return !presenceTimeout.isZero();
  }
}
