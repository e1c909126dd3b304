package dev.geofence.state.readiness;

import java.util.Objects;

/**
 * Decides whether the change stream can still cover a restored index: the check every restore
 * runs before any location is evaluated (DESIGN section 6).
 *
 * <p>The slot must exist, must not have lost WAL it needs ({@code wal_status = 'lost'}), and must
 * not have confirmed a position past the restored one. PostgreSQL silently streams from {@code
 * confirmed_flush_lsn} when asked for an older position, and Flink CDC confirms positions a few
 * checkpoints after each completes, so restoring an older savepoint would otherwise skip edits
 * without any error. Any other answer means the restored fences cannot be trusted and are rebuilt
 * from the source of truth. Stateless.
 */
public final class GapCheck {

  /** The outcome, with the reason for a failure in words for the logs and hydration history. */
  public static final class Result {
    private final boolean covered;
    private final String reason;

    private Result(boolean covered, String reason) {
      this.covered = covered;
      this.reason = reason;
    }

    public boolean covered() {
      return covered;
    }

    public String reason() {
      return reason;
    }

    @Override
    public String toString() {
      return (covered ? "covered: " : "gap: ") + reason;
    }
  }

  private GapCheck() {}

  /**
   * @param restoredLsn the position the restored state had consumed the stream up to
   */
  public static Result check(SlotState slot, long restoredLsn) {
    Objects.requireNonNull(slot, "slot");
    if (!slot.exists()) {
      return new Result(false, "the replication slot does not exist (dropped?)");
    }
    if ("lost".equals(slot.walStatus())) {
      return new Result(false, "the replication slot has lost WAL it needed (wal_status = lost)");
    }
    if (Long.compareUnsigned(slot.confirmedFlushLsn(), restoredLsn) > 0) {
      return new Result(false, "the slot has confirmed " + Lsn.format(slot.confirmedFlushLsn())
          + ", past the restored " + Lsn.format(restoredLsn) + ": the stream would silently skip what lies between");
    }
    return new Result(true, "the slot can stream from " + Lsn.format(restoredLsn)
        + " (confirmed " + Lsn.format(slot.confirmedFlushLsn()) + ", wal_status " + slot.walStatus() + ")");
  }
}
