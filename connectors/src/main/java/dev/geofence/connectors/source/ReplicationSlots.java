package dev.geofence.connectors.source;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;

/**
 * The job's logical replication slots as a deploy handles them: made where missing, copied for a
 * second instance of the job, dropped once no instance reads them. What the gap check reads of a
 * slot is {@link SlotProbe}'s.
 *
 * <p>A second instance (a blue/green deploy) needs a slot of its own that holds every change its
 * savepoint has not seen. A copy made before that savepoint is taken does: it starts where the
 * running instance's slot had confirmed, which is at or before the position of any checkpoint
 * still to come, and it keeps the WAL from there. A copy made after it could start past the
 * savepoint; the gap check would then find the slot ahead and prove it by the bucket versions, or
 * rebuild, never skip. A slot no instance reads keeps WAL forever and fills the database's disk,
 * so the old instance's slot is dropped once it is gone.
 */
public final class ReplicationSlots {

  private ReplicationSlots() {}

  /** Creates the logical slot {@code name} with the pgoutput plugin unless it exists; true if it created it. */
  public static boolean createIfMissing(Connection db, String name) throws SQLException {
    try (PreparedStatement s = db.prepareStatement("SELECT pg_create_logical_replication_slot(?, 'pgoutput')"
        + " WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = ?)")) {
      s.setString(1, name);
      s.setString(2, name);
      try (ResultSet r = s.executeQuery()) {
        return r.next();
      }
    }
  }

  /**
   * Copies the logical slot {@code from} into a new slot {@code to}, which streams from where
   * {@code from} had confirmed (PostgreSQL 12 and later; {@code from} may be in use).
   *
   * @throws IllegalStateException in one sentence naming both slots, if {@code from} does not
   *     exist, {@code to} does, or the server cannot copy it
   */
  public static void copy(Connection db, String from, String to) throws SQLException {
    if (SlotProbe.read(db, to).exists()) {
      throw new IllegalStateException("cannot copy the replication slot " + from + " into " + to + ": " + to + " exists already"
          + " (drop it if no instance of the job reads it)");
    }
    if (!SlotProbe.read(db, from).exists()) {
      throw new IllegalStateException("cannot copy the replication slot " + from + " into " + to + ": " + from + " does not exist");
    }
    try (PreparedStatement s = db.prepareStatement("SELECT pg_copy_logical_replication_slot(?, ?)")) {
      s.setString(1, from);
      s.setString(2, to);
      s.execute();
    } catch (SQLException e) {
      throw new IllegalStateException("cannot copy the replication slot " + from + " into " + to + ": " + e.getMessage(), e);
    }
  }

  /**
   * Drops the slot {@code name} if it exists and no one reads it; true if it dropped it.
   *
   * @throws IllegalStateException if a reader still holds it: an instance of the job still runs on it
   */
  public static boolean dropIfUnused(Connection db, String name) throws SQLException {
    Optional<Boolean> read = isRead(db, name);
    if (read.isEmpty()) {
      return false;
    }
    if (read.get()) {
      throw new IllegalStateException("the replication slot " + name + " is still read (an instance of the job runs on it): not dropped");
    }
    try (PreparedStatement s = db.prepareStatement(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ? AND NOT active")) {
      s.setString(1, name);
      try (ResultSet r = s.executeQuery()) {
        return r.next();
      }
    }
  }

  /** Whether a reader holds the slot {@code name} now; empty if there is no such slot. */
  public static Optional<Boolean> isRead(Connection db, String name) throws SQLException {
    try (PreparedStatement s = db.prepareStatement("SELECT active FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, name);
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? Optional.of(r.getBoolean(1)) : Optional.empty();
      }
    }
  }
}
