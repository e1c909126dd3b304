package dev.geofence.job.testing;

import java.time.Duration;
import java.util.function.Predicate;

/**
 * Waits on a condition, not on a clock (as Flink's {@code CommonTestUtils.waitUntilCondition}):
 * polls it, first often and then five times a second, until it holds or the deadline passes, and
 * then fails saying what it waited for and what it saw last. What the condition throws fails the
 * wait at once.
 */
public final class Waiting {

  /** What is polled; it may throw, which ends the wait. */
  @FunctionalInterface
  public interface Probe<T> {
    T get() throws Exception;
  }

  private static final long FIRST_PAUSE_MILLIS = 10;
  private static final long LONGEST_PAUSE_MILLIS = 200;

  private Waiting() {}

  /**
   * Waits until {@code condition} holds.
   *
   * @param what what is waited for, as the failure says it: "the CDC source to create its slot"
   */
  public static void until(String what, Duration timeout, Probe<Boolean> condition) throws Exception {
    until(what, timeout, condition, Boolean.TRUE::equals);
  }

  /**
   * Polls {@code probe} until its value satisfies {@code done}; returns that value.
   *
   * @throws AssertionError after {@code timeout}, with {@code what} and the last value seen
   */
  public static <T> T until(String what, Duration timeout, Probe<T> probe, Predicate<? super T> done) throws Exception {
    return until(what, timeout, LONGEST_PAUSE_MILLIS, probe, done);
  }

  /**
   * Polls {@code condition} every millisecond or so until it holds: for a moment that lasts only
   * milliseconds (a checkpoint in flight).
   */
  public static void untilMoment(String what, Duration timeout, Probe<Boolean> condition) throws Exception {
    until(what, timeout, 1, condition, Boolean.TRUE::equals);
  }

  /**
   * Polls {@code probe} as {@link #until} does, until its value satisfies {@code done} or {@code
   * timeout} passes, and returns the last value either way: for an assertion that says how it
   * differs from what was waited for.
   */
  public static <T> T last(Duration timeout, Probe<T> probe, Predicate<? super T> done) throws Exception {
    return poll(timeout, LONGEST_PAUSE_MILLIS, probe, done);
  }

  private static <T> T until(String what, Duration timeout, long longestPause, Probe<T> probe, Predicate<? super T> done)
      throws Exception {
    T value = poll(timeout, longestPause, probe, done);
    if (!done.test(value)) {
      throw new AssertionError("waited " + timeout.toSeconds() + " s for " + what + "; last seen: " + value);
    }
    return value;
  }

  private static <T> T poll(Duration timeout, long longestPause, Probe<T> probe, Predicate<? super T> done) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    long pause = Math.min(FIRST_PAUSE_MILLIS, longestPause);
    while (true) {
      T value = probe.get();
      if (done.test(value) || System.nanoTime() > deadline) {
        return value;
      }
      Thread.sleep(pause);
      pause = Math.min(longestPause, pause * 2);
    }
  }
}
