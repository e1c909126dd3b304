package dev.geofence.state.readiness;

import java.util.Objects;

/**
 * Decides whether the change stream can still cover a restored index: the check every restore
 * runs before any location is evaluated (docs/design.md#gap-check).
 *
 * <p>The slot must exist and must not have lost WAL it needs ({@code wal_status = 'lost'}); else
 * the restored fences cannot be trusted and are rebuilt from the source of truth. When the slot
 * has confirmed a position past the restored one, PostgreSQL will silently stream from there and
 * whatever lies between is never delivered: restoring an older savepoint does this, but so does
 * a latest savepoint, since the CDC source's offset moves past the last change it forwards (on
 * keepalives, on other tables' transactions). That outcome, {@link Result#slotAhead()}, is
 * neither covered nor a gap: {@link BucketVersions} decides it exactly during catch-up. Stateless.
 */
public final class GapCheck {

  /**
   * The outcome, with the reason in words for the logs and hydration history.
   *
   * @param covered the slot streams on from the restored position: nothing can be skipped
   * @param slotAhead the slot exists but has confirmed past the restored position: what lies
   *     between will not be streamed, and the restored index holds only if none of it touched the
   *     subtask's buckets
   */
  public record Result(boolean covered, boolean slotAhead, String reason) {

    @Override
    public String toString() {
      return (covered ? "covered: " : slotAhead ? "slot ahead: " : "gap: ") + reason;
    }
  }

  private GapCheck() {}

  /**
   * @param restoredLsn the position the restored state had consumed the stream up to
   */
  public static Result check(SlotState slot, long restoredLsn) {
    Objects.requireNonNull(slot, "slot");
    if (!slot.exists()) {
      return new Result(false, false, "the replication slot does not exist (dropped?)");
    }
    if ("lost".equals(slot.walStatus())) {
      return new Result(false, false, "the replication slot has lost WAL it needed (wal_status = lost)");
    }
    if (Long.compareUnsigned(slot.confirmedFlushLsn(), restoredLsn) > 0) {
      return new Result(false, true, "the slot has confirmed " + Lsn.format(slot.confirmedFlushLsn())
          + ", past the restored " + Lsn.format(restoredLsn) + ": the stream will skip what lies between");
    }
    return new Result(true, false, "the slot can stream from " + Lsn.format(restoredLsn)
        + " (confirmed " + Lsn.format(slot.confirmedFlushLsn()) + ", wal_status " + slot.walStatus() + ")");
  }
}
