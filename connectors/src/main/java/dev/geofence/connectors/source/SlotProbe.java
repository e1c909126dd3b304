package dev.geofence.connectors.source;

import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.SlotState;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

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
}
