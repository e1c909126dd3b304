package dev.geofence.connectors.source;

import static dev.geofence.connectors.cdc.FenceTableColumns.quote;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.readiness.Lsn;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Reads one subtask's share of the source of truth for a rebuild: the live fences, the tombstones
 * and the bucket fingerprints of the buckets in the subtask's key groups ({@link
 * FenceBuckets#inKeyGroups}), in one REPEATABLE READ transaction, so that all three are of the same
 * instant. Subtasks own disjoint buckets, so the whole job reads each fence once in total; each
 * query selects by {@code fence_bucket(id)}, which the migration indexes.
 *
 * <p>Rows come out as snapshot {@link FenceChange}s, exactly as the CDC snapshot would deliver them
 * (a tombstone is a delete of its seq, timed at its {@code deleted_at}), so the operator merges them
 * with the live stream by seq like any other edit. A bucket fingerprint carries its row version in
 * {@code seq}.
 */
public final class BucketRead {

  /**
   * What a read saw: where the source's WAL was when it began, the live fences and tombstones it
   * delivered, and how long it took.
   */
  public record Result(long lsn, long fences, long tombstones, long millis) {}

  private static final int FETCH_SIZE = 2000;

  private BucketRead() {}

  /**
   * Reads the buckets of key groups {@code [keyGroupStart, keyGroupEnd]} and hands every row to
   * {@code out}, on the calling thread, as it is read.
   */
  public static Result read(Connection db, FenceTableColumns columns, int maxParallelism, int keyGroupStart, int keyGroupEnd,
      Consumer<FenceChange> out) throws SQLException {
    return read(db, columns, ownedBuckets(maxParallelism, keyGroupStart, keyGroupEnd), out);
  }

  /** Reads the given buckets as {@link #read(Connection, FenceTableColumns, int, int, int, Consumer)} reads a subtask's. */
  public static Result readBuckets(Connection db, FenceTableColumns columns, int[] buckets, Consumer<FenceChange> out)
      throws SQLException {
    return read(db, columns, java.util.Arrays.stream(buckets).boxed().toArray(Integer[]::new), out);
  }

  private static Result read(Connection db, FenceTableColumns columns, Integer[] bucketIds, Consumer<FenceChange> out)
      throws SQLException {
    long started = System.nanoTime();
    boolean autoCommit = db.getAutoCommit();
    db.setAutoCommit(false);
    db.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    db.setReadOnly(true);
    try {
      // The transaction's snapshot is taken by this first statement, so every row read below
      // committed before this LSN (the insert position: with synchronous_commit = off the write
      // position can lie before a visible commit): the stream's records up to it are in the read.
      long lsn;
      try (Statement s = db.createStatement(); ResultSet r = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
        r.next();
        lsn = Lsn.parse(r.getString(1));
      }
      Array buckets = db.createArrayOf("int4", bucketIds);
      // Tombstones first: of a fence deleted and re-created, the delete then reaches a reader that
      // held the fence before both (its objects EXIT), and the re-creation follows it by seq.
      long tombstones = readTombstones(db, columns, buckets, out);
      long fences = readFences(db, columns, buckets, out);
      readFingerprints(db, columns, buckets, out);
      db.commit();
      return new Result(lsn, fences, tombstones, (System.nanoTime() - started) / 1_000_000);
    } catch (SQLException e) {
      db.rollback();
      throw e;
    } finally {
      db.setReadOnly(false);
      db.setAutoCommit(autoCommit);
    }
  }

  static Integer[] ownedBuckets(int maxParallelism, int keyGroupStart, int keyGroupEnd) {
    List<Integer> owned = new ArrayList<>();
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      if (FenceBuckets.inKeyGroups(b, maxParallelism, keyGroupStart, keyGroupEnd)) {
        owned.add(b);
      }
    }
    return owned.toArray(new Integer[0]);
  }

  private static long readFences(Connection db, FenceTableColumns c, Array buckets, Consumer<FenceChange> out) throws SQLException {
    String geometryType = null;
    boolean hasTenant = false;
    try (PreparedStatement s = db.prepareStatement("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
        + " WHERE attrelid = ?::regclass AND attname IN (?, ?) AND attnum > 0 AND NOT attisdropped")) {
      s.setString(1, c.qualified(c.fencesTable()));
      s.setString(2, c.geometry());
      s.setString(3, c.tenant() == null ? c.geometry() : c.tenant());
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          if (r.getString(1).equals(c.geometry())) {
            geometryType = r.getString(2);
          } else {
            hasTenant = true;
          }
        }
      }
    }
    if (geometryType == null) {
      throw new SQLException("the fences table " + c.schema() + "." + c.fencesTable() + " has no column " + c.geometry());
    }
    // PostGIS's type as EWKB, as the CDC source delivers it; bytea as is; text as text.
    String geometry = quote(c.geometry());
    boolean binary = geometryType.equals("bytea");
    if (geometryType.startsWith("geometry") || geometryType.startsWith("geography")) {
      geometry = "ST_AsEWKB(" + geometry + "::geometry)";
      binary = true;
    }
    // As in the change stream: a table without the tenant column has no tenants.
    String tenant = hasTenant ? quote(c.tenant()) + "::text" : "NULL";
    String sql = "SELECT " + quote(c.id()) + "::text, " + quote(c.seq()) + ", " + geometry + ", " + tenant
        + " FROM " + c.qualified(c.fencesTable())
        + " WHERE fence_bucket(" + quote(c.id()) + "::text) = ANY(?)";
    long n = 0;
    try (PreparedStatement s = db.prepareStatement(sql)) {
      s.setArray(1, buckets);
      s.setFetchSize(FETCH_SIZE);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          FenceChange change = snapshotChange(FenceChange.Kind.FENCE);
          change.fenceId = r.getString(1);
          change.seq = r.getLong(2);
          if (binary) {
            change.geometryBytes = r.getBytes(3);
          } else {
            change.geometryText = r.getString(3);
          }
          change.tenant = r.getString(4);
          out.accept(change);
          n++;
        }
      }
    }
    return n;
  }

  private static long readTombstones(Connection db, FenceTableColumns c, Array buckets, Consumer<FenceChange> out) throws SQLException {
    String sql = "SELECT id, seq, (extract(epoch FROM deleted_at) * 1000)::bigint FROM "
        + c.qualified(c.tombstonesTable()) + " WHERE fence_bucket(id) = ANY(?)";
    long n = 0;
    try (PreparedStatement s = db.prepareStatement(sql)) {
      s.setArray(1, buckets);
      s.setFetchSize(FETCH_SIZE);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          FenceChange change = snapshotChange(FenceChange.Kind.FENCE);
          change.fenceId = r.getString(1);
          change.seq = r.getLong(2);
          change.delete = true;
          change.commitTime = r.getLong(3);
          out.accept(change);
          n++;
        }
      }
    }
    return n;
  }

  private static void readFingerprints(Connection db, FenceTableColumns c, Array buckets, Consumer<FenceChange> out) throws SQLException {
    String sql = "SELECT bucket, fence_count, checksum, version FROM " + c.qualified(c.bucketStatsTable())
        + " WHERE bucket = ANY(?)";
    try (PreparedStatement s = db.prepareStatement(sql)) {
      s.setArray(1, buckets);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          FenceChange change = snapshotChange(FenceChange.Kind.BUCKET_STATS);
          change.bucket = r.getInt(1);
          change.fenceCount = r.getLong(2);
          change.checksum = r.getLong(3);
          change.seq = r.getLong(4);
          out.accept(change);
        }
      }
    }
  }

  private static FenceChange snapshotChange(FenceChange.Kind kind) {
    FenceChange change = new FenceChange();
    change.kind = kind;
    change.snapshot = true;
    return change;
  }
}
