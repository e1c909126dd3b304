package dev.geofence.job.index;

import dev.geofence.connectors.location.LocationJson;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Instant;
import java.util.function.Consumer;
import org.apache.flink.annotation.Internal;

/**
 * Which locations time lets through (design: "Time rules"): one more than the allowed lateness
 * behind the clock is a {@code LATE} dead letter (the fence versions of its time may be gone: never
 * a different answer); one older than its object's newest evaluated location is an {@code
 * OUT_OF_ORDER} dead letter ({@link Evaluation} finds it); each is counted, and so are the late
 * ones evaluated at once. Not thread-safe. Public for the benchmark of the location path; not an
 * API.
 */
@Internal
public final class Admission implements Evaluation.OutOfOrder {

  private final LocationTimePolicy policy;
  private final Consumer<DeadLetter> deadLetters;
  private long late;
  private long tooLate;
  private long outOfOrder;
  private long beforeRead;
  /** The read time of a catch-up by read of what changed: locations stamped before it are refused; 0 for none. */
  private long readTime;

  public Admission(LocationTimePolicy policy, Consumer<DeadLetter> deadLetters) {
    this.policy = policy;
    this.deadLetters = deadLetters;
  }

  /** Whether the location is beyond the allowed lateness behind the clock at {@code clock}: then a dead letter. */
  boolean tooLate(Location location, long clock) {
    if (!policy.isLate(location.timestamp, clock)) {
      return false;
    }
    tooLate++;
    deadLetter(location, LocationTimePolicy.LATE, "more than the allowed lateness of " + policy.allowedLateness().toMillis()
        + " ms behind the fence index's clock at " + Instant.ofEpochMilli(clock));
    return true;
  }

  /**
   * This subtask caught up by reading what changed at {@code time}: it holds the fence versions of
   * that instant, not those before it for the fences that changed, so a location stamped earlier
   * is refused here (the newest read wins).
   */
  void readAt(long time) {
    readTime = Math.max(readTime, time);
  }

  /** The read time locations are refused before, 0 for none. */
  long readTime() {
    return readTime;
  }

  /** Whether the location is stamped before this subtask's read of what changed: then a dead letter. */
  boolean beforeRead(Location location) {
    if (location.timestamp >= readTime) {
      return false;
    }
    beforeRead++;
    deadLetter(location, LocationTimePolicy.BEFORE_READ, "stamped before " + Instant.ofEpochMilli(readTime) + ", when this subtask"
        + " caught up by reading the fences changed since its restored state: the versions of the location's time were not read"
        + " (evaluated by the subtasks that replayed, if any)");
    return true;
  }

  /** A location behind the clock, within the allowed lateness, is evaluated at once. */
  void late() {
    late++;
  }

  @Override
  public void refused(Location location, long newest) {
    outOfOrder++;
    deadLetter(location, LocationTimePolicy.OUT_OF_ORDER, "older than the location of " + Instant.ofEpochMilli(newest)
        + " already evaluated for this object, whose presence only moves forward in its own event time");
  }

  private void deadLetter(Location location, String reason, String detail) {
    deadLetters.accept(new DeadLetter("location", location.objectId, 0, "ERROR", reason, detail, LocationJson.format(location),
        location.timestamp, System.currentTimeMillis()));
  }

  long lateCount() {
    return late;
  }

  long tooLateCount() {
    return tooLate;
  }

  long outOfOrderCount() {
    return outOfOrder;
  }

  long beforeReadCount() {
    return beforeRead;
  }
}
