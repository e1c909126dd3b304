package dev.geofence.connectors.source;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.SlotState;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** Reads the job's replication slot from {@code pg_replication_slots}, for the gap check. */
public final class SlotProbe {

  private SlotProbe() {}

  public static SlotState read(Connection connection, String slotName) throws SQLException {
    try (PreparedStatement s = connection.prepareStatement(
        "SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, slotName);
      try (ResultSet r = s.executeQuery()) {
        if (!r.next()) {
          return SlotState.missing();
        }
        String confirmed = r.getString(2);
        // A slot that has confirmed nothing yet has a null position: it can stream from anywhere
        // it still holds.
        return SlotState.of(r.getString(1), confirmed == null ? 0 : Lsn.parse(confirmed));
      }
    }
  }

  /**
   * The catch-up target: the source's WAL position now, and its {@code fence_stats} (live fences
   * and their checksum) as of then. A restored index is caught up once the stream has passed it.
   */
  public static CatchUpTarget catchUpTarget(Connection connection, FenceTableColumns columns) throws SQLException {
    try (Statement s = connection.createStatement();
        ResultSet r = s.executeQuery("SELECT pg_current_wal_lsn()::text, fence_count, checksum FROM \""
            + columns.schema() + "\".\"" + columns.statsTable() + "\"")) {
      if (!r.next()) {
        throw new SQLException("the fence_stats row is missing: apply docker/sql/source/fence-versioning.sql");
      }
      return new CatchUpTarget(Lsn.parse(r.getString(1)), r.getLong(2), r.getLong(3));
    }
  }

  /** Where the stream must get to, and what the source held there. */
  public static final class CatchUpTarget {
    public final long lsn;
    public final long fenceCount;
    public final long checksum;

    CatchUpTarget(long lsn, long fenceCount, long checksum) {
      this.lsn = lsn;
      this.fenceCount = fenceCount;
      this.checksum = checksum;
    }
  }
}
