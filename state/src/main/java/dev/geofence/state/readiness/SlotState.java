package dev.geofence.state.readiness;

import java.util.Objects;

/**
 * What the source's {@code pg_replication_slots} says of the job's slot at one moment: whether it
 * exists, its {@code wal_status}, and the position up to which it has confirmed changes (the
 * oldest position it can still stream from). LSNs are PostgreSQL's 64-bit WAL positions. Immutable.
 */
public record SlotState(boolean exists, String walStatus, long confirmedFlushLsn) {

  public static SlotState missing() {
    return new SlotState(false, null, 0);
  }

  /**
   * @param walStatus {@code reserved}, {@code extended}, {@code unreserved} or {@code lost}
   */
  public static SlotState of(String walStatus, long confirmedFlushLsn) {
    return new SlotState(true, Objects.requireNonNull(walStatus, "wal_status"), confirmedFlushLsn);
  }

  @Override
  public String toString() {
    return exists ? "slot{wal_status=" + walStatus + ", confirmed_flush_lsn=" + Lsn.format(confirmedFlushLsn) + "}" : "slot{missing}";
  }
}
