package dev.geofence.job.index;

import java.lang.reflect.Field;
import java.util.Collection;

/**
 * What the location path benchmarks (bench/run path, bench/run stays) read and do of the job's
 * package-private parts, from the bench module, in the job's package as OperatorPathBenchmark was
 * (the class path splits packages; nothing seals them): the job's code stays as it is, and the
 * benchmark runs against the job jar it was built with. Not an API.
 */
public final class BenchAccess {

  private BenchAccess() {}

  /** Pending DWELLs and watched objects ({@link Stays#pending}), what the operator reports. */
  public static int pending(Stays stays) {
    return stays.pending();
  }

  /**
   * The entries of the stays' two queues, those of stays ended before their DWELL and of watches
   * not surfaced yet included (read by reflection: private): what {@link #pending} leaves out.
   */
  public static int queued(Stays stays) {
    return size(stays, "dwellQueue") + size(stays, "silenceQueue");
  }

  /**
   * What {@link LocationPath#checkpoint} does to the evaluation before it writes the union state,
   * which only reads: forgets the objects seen no more within the lateness (those inside fences
   * too, while silence is off).
   */
  public static void checkpoint(Evaluation evaluation, EventClock clock) {
    evaluation.forgetOlderThan(clock.historyHorizon());
  }

  private static int size(Stays stays, String field) {
    try {
      Field f = Stays.class.getDeclaredField(field);
      f.setAccessible(true);
      return ((Collection<?>) f.get(stays)).size();
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("Stays has no " + field + " any more", e);
    }
  }
}
