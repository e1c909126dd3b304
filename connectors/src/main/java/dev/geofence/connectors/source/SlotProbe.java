package dev.geofence.connectors.source;

import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.readiness.Lsn;
import dev.geofence.state.readiness.SlotState;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;

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
   * The catch-up target: the versions (and fence counts) of the given key groups' bucket
   * fingerprints, then the source's WAL position. Read in that order, every version read was
   * committed before the position: once the stream has passed it, each of those versions must have
   * arrived. The position is the WAL insert position: with
   * {@code synchronous_commit = off} a transaction is visible before its WAL is written, so the
   * write position ({@code pg_current_wal_lsn()}) can lie before it.
   *
   * <p>Then it writes the heartbeat row: the stream passes the position only with a record beyond
   * it, which without edits is the next heartbeat, up to a heartbeat interval later (0.6 to 0.8 s
   * of a 6 s restore with no edits, 2026-12-06). Written here, its commit follows the position, and
   * the stream passes it as soon as it has decoded the backlog.
   */
  public static CatchUpTarget catchUpTarget(
      Connection connection, FenceTableColumns columns, int maxParallelism, int keyGroupStart, int keyGroupEnd) throws SQLException {
    BucketStats stats = bucketStats(connection, columns, maxParallelism, keyGroupStart, keyGroupEnd);
    long lsn;
    try (Statement s = connection.createStatement(); ResultSet r = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
      r.next();
      lsn = Lsn.parse(r.getString(1));
    }
    try (Statement s = connection.createStatement()) {
      s.executeUpdate(FenceSource.heartbeatSql(columns));
    }
    return new CatchUpTarget(lsn, stats.fenceCount(), stats.versions());
  }

  /**
   * The versions and live fence counts of the given key groups' bucket fingerprints, as the source
   * holds them now (no position, nothing written): what a restore estimates its catch-up from
   * before it reads the fences ({@code StateRestore}), and the catch-up target's versions.
   */
  public static BucketStats bucketStats(Connection connection, FenceTableColumns columns, int maxParallelism, int keyGroupStart,
      int keyGroupEnd) throws SQLException {
    long[] versions = new long[FenceBuckets.COUNT];
    Arrays.fill(versions, -1);
    long fences = 0;
    try (PreparedStatement s = connection.prepareStatement(
        "SELECT bucket, version, fence_count FROM " + columns.qualified(columns.bucketStatsTable()) + " WHERE bucket = ANY(?)")) {
      s.setArray(1, connection.createArrayOf("int4", BucketRead.ownedBuckets(maxParallelism, keyGroupStart, keyGroupEnd)));
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          versions[r.getInt(1)] = r.getLong(2);
          fences += r.getLong(3);
        }
      }
    }
    return new BucketStats(fences, versions);
  }

  /** The live fences of the buckets asked for, and per bucket its fingerprint's version (-1 for buckets not asked for). */
  public record BucketStats(long fenceCount, long[] versions) {}

  /**
   * Where the stream must get to, and what the source held there: the live fences of the buckets
   * asked for, and per bucket its fingerprint's version (-1 for buckets not asked for).
   */
  public record CatchUpTarget(long lsn, long fenceCount, long[] bucketVersions) {}
}
