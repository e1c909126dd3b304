package dev.geofence.connectors.source;

import static dev.geofence.connectors.cdc.FenceTableColumns.quote;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.readiness.Lsn;
import java.io.IOException;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.types.StringValue;

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
 *
 * <p>Fences and tombstones come out in the order the job's keyed state keeps them on RocksDB: key
 * group by key group ({@code bucket mod max-parallelism}), each key group's buckets in ascending
 * order, a bucket's rows by the bytes of their ids as Flink's string serializer writes them (the
 * job's map key; a fence's tombstone before its re-created row). A load written in that order
 * flushes files that do not overlap, which RocksDB moves down its levels without rewriting them,
 * where rows in the table's order had it compact the whole load again (docs/performance/journal.md,
 * "2026-12-03: a load in RocksDB's key order"). Buckets are read {@value #BUCKETS_PER_QUERY} to a
 * query in that order, and a query's rows (that share of the table) are held to sort them.
 */
public final class BucketRead {

  /**
   * What a read saw: where the source's WAL was when it began, its snapshot's transaction horizon
   * (every transaction with a lower id had ended, so what it committed is in the read: a state
   * written from the read may narrow a later catch-up's key pass by it, as by a heartbeat's,
   * docs/design.md#catch-up), the live fences and tombstones it delivered, and how long it took.
   */
  public record Result(long lsn, long horizon, long fences, long tombstones, long millis) {}

  private static final int FETCH_SIZE = 2000;
  /** Buckets per query: few queries, and few rows held at once to be put in order. */
  private static final int BUCKETS_PER_QUERY = 32;
  /** The order of a bucket's rows in the job's state: by key, then a tombstone before the live row of its id. */
  private static final Comparator<Keyed> STATE_ORDER = ((Comparator<Keyed>) (a, b) -> Arrays.compareUnsigned(a.key, b.key))
      .thenComparing(k -> !k.change.delete);

  private BucketRead() {}

  /**
   * Reads the buckets of key groups {@code [keyGroupStart, keyGroupEnd]} and hands every row to
   * {@code out}, on the calling thread, as it is read.
   */
  public static Result read(Connection db, FenceTableColumns columns, int maxParallelism, int keyGroupStart, int keyGroupEnd,
      Consumer<FenceChange> out) throws SQLException {
    return read(db, columns, ownedBuckets(maxParallelism, keyGroupStart, keyGroupEnd), out);
  }

  /**
   * Reads the given buckets as {@link #read(Connection, FenceTableColumns, int, int, int, Consumer)}
   * reads a subtask's, in ascending order.
   */
  public static Result readBuckets(Connection db, FenceTableColumns columns, int[] buckets, Consumer<FenceChange> out)
      throws SQLException {
    return read(db, columns, Arrays.stream(buckets).sorted().boxed().toArray(Integer[]::new), out);
  }

  /** Reads {@code bucketIds}, which are in the order the rows are to come out in. */
  private static Result read(Connection db, FenceTableColumns columns, Integer[] bucketIds, Consumer<FenceChange> out)
      throws SQLException {
    long started = System.nanoTime();
    return inReadTransaction(db, () -> {
      // The transaction's snapshot is taken by this first statement, so every row read below
      // committed before this LSN (the insert position: with synchronous_commit = off the write
      // position can lie before a visible commit): the stream's records up to it are in the read.
      long lsn;
      long horizon;
      try (Statement s = db.createStatement(); ResultSet r = s.executeQuery(
          "SELECT pg_current_wal_insert_lsn()::text, pg_snapshot_xmin(pg_current_snapshot())::text::bigint")) {
        r.next();
        lsn = Lsn.parse(r.getString(1));
        horizon = r.getLong(2);
      }
      long[] counts = readBucketsWhole(db, columns, fencesQuery(db, columns), bucketIds, out);
      readFingerprints(db, columns, db.createArrayOf("int4", bucketIds), out);
      return new Result(lsn, horizon, counts[0], counts[1], (System.nanoTime() - started) / 1_000_000);
    });
  }

  /**
   * Reads the fences and tombstones of {@code bucketIds} in that order, {@value #BUCKETS_PER_QUERY}
   * buckets to a query, within the caller's transaction; returns how many live fences and
   * tombstones were read.
   */
  static long[] readBucketsWhole(Connection db, FenceTableColumns columns, FencesQuery fences, Integer[] bucketIds,
      Consumer<FenceChange> out) throws SQLException {
    long[] counts = new long[2];
    for (int from = 0; from < bucketIds.length; from += BUCKETS_PER_QUERY) {
      Integer[] chunk = Arrays.copyOfRange(bucketIds, from, Math.min(bucketIds.length, from + BUCKETS_PER_QUERY));
      readChunk(db, columns, fences, chunk, counts, out);
    }
    return counts;
  }

  /** Work done inside one transaction. */
  interface InTransaction<R, X extends Exception> {
    R run() throws SQLException, X;
  }

  /**
   * Runs {@code work} in one read-only REPEATABLE READ transaction, committed after it and rolled
   * back if it fails, the connection's autocommit as it was before.
   */
  static <R, X extends Exception> R inReadTransaction(Connection db, InTransaction<R, X> work) throws SQLException, X {
    boolean autoCommit = db.getAutoCommit();
    db.setAutoCommit(false);
    db.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    db.setReadOnly(true);
    try {
      R result = work.run();
      db.commit();
      return result;
    } catch (Throwable e) {
      // Whatever ended the work (a consumer's own exception, the task closing), the transaction
      // ends before the connection is reset: a reset inside it would throw in its place.
      try {
        db.rollback();
      } catch (SQLException rollback) {
        e.addSuppressed(rollback);
      }
      throw e;
    } finally {
      db.setReadOnly(false);
      db.setAutoCommit(autoCommit);
    }
  }

  /** The buckets of key groups {@code [keyGroupStart, keyGroupEnd]}, key group by key group, each's in ascending order. */
  static Integer[] ownedBuckets(int maxParallelism, int keyGroupStart, int keyGroupEnd) {
    List<Integer> owned = new ArrayList<>();
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      if (FenceBuckets.inKeyGroups(b, maxParallelism, keyGroupStart, keyGroupEnd)) {
        owned.add(b);
      }
    }
    owned.sort(Comparator.comparingInt((Integer b) -> FenceBuckets.keyGroup(b, maxParallelism)).thenComparingInt(b -> b));
    return owned.toArray(new Integer[0]);
  }

  /** A row of a result set, taken. */
  interface RowReader {
    void read(ResultSet row) throws SQLException;
  }

  /** Runs {@code sql} with the buckets as its one parameter and reads its rows: how many. */
  static long query(Connection db, String sql, Array buckets, RowReader reader) throws SQLException {
    long n = 0;
    try (PreparedStatement s = db.prepareStatement(sql)) {
      s.setArray(1, buckets);
      s.setFetchSize(FETCH_SIZE);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          reader.read(r);
          n++;
        }
      }
    }
    return n;
  }

  /** A row and its fence id's bytes as the job's state keys it. */
  private record Keyed(byte[] key, FenceChange change) {
    Keyed(FenceChange change) throws SQLException {
      this(stateKey(change.fenceId), change);
    }
  }

  private static byte[] stateKey(String fenceId) throws SQLException {
    DataOutputSerializer bytes = new DataOutputSerializer(2 * fenceId.length() + 4);
    try {
      StringValue.writeString(fenceId, bytes);
    } catch (IOException e) {
      throw new SQLException("fence id " + fenceId + " cannot be written as a key", e);
    }
    return bytes.getCopyOfBuffer();
  }

  /**
   * The query of live fences (id, seq, geometry, tenant, bucket, dwell delay) without its condition;
   * the id as text to compare with, the seq column and the table, quoted; and whether the geometry
   * is bytes.
   */
  record FencesQuery(String select, String id, String seq, String table, boolean binary) {
    /** The fences of the buckets its one parameter lists. */
    String ofBuckets() {
      return select + " WHERE fence_bucket(" + id + ") = ANY(?)";
    }

    /** The fence row of one live fence, as {@link #ofBuckets} reads it. */
    FenceChange row(ResultSet r) throws SQLException {
      FenceChange change = snapshotChange(FenceChange.Kind.FENCE);
      change.fenceId = r.getString(1);
      change.seq = r.getLong(2);
      if (binary) {
        change.geometryBytes = r.getBytes(3);
      } else {
        change.geometryText = r.getString(3);
      }
      change.tenant = r.getString(4);
      // Debezium's microseconds, still the double it computes them in: cast to a whole number as it
      // casts them, then converted as the change stream converts them.
      double dwellDelay = r.getDouble(6);
      change.dwellDelay = r.wasNull() ? null : FenceChange.dwellDelayOfMicros((long) dwellDelay);
      return change;
    }
  }

  /**
   * Reads the fences and tombstones of a few buckets, and hands them out bucket by bucket in
   * {@code chunk}'s order, each bucket's in {@link #STATE_ORDER}. Counts live fences in {@code
   * counts[0]}, tombstones in {@code counts[1]}.
   */
  private static void readChunk(Connection db, FenceTableColumns c, FencesQuery fences, Integer[] chunk, long[] counts,
      Consumer<FenceChange> out) throws SQLException {
    Array buckets = db.createArrayOf("int4", chunk);
    Map<Integer, List<Keyed>> byBucket = new HashMap<>();
    // A bucket's tombstones wait for its fences: of a fence deleted and re-created, the delete then
    // reaches a reader that held the fence before both (its objects EXIT), and the re-creation
    // follows it by seq.
    counts[1] += query(db, tombstonesQuery(c), buckets, r -> byBucket.computeIfAbsent(r.getInt(4), b -> new ArrayList<>())
        .add(new Keyed(tombstone(r))));
    counts[0] += query(db, fences.ofBuckets(), buckets, r -> byBucket.computeIfAbsent(r.getInt(5), b -> new ArrayList<>())
        .add(new Keyed(fences.row(r))));
    for (Integer bucket : chunk) {
      List<Keyed> rows = byBucket.remove(bucket);
      if (rows != null) {
        rows.sort(STATE_ORDER);
        rows.forEach(row -> out.accept(row.change));
      }
    }
  }

  /** The tombstones (id, seq, deleted at, bucket) of the buckets its one parameter lists. */
  static String tombstonesQuery(FenceTableColumns c) {
    return "SELECT id, seq, (extract(epoch FROM deleted_at) * 1000)::bigint, fence_bucket(id) FROM "
        + c.qualified(c.tombstonesTable()) + " WHERE fence_bucket(id) = ANY(?)";
  }

  /** A tombstone of {@link #tombstonesQuery}: a delete of its seq, timed at its {@code deleted_at}. */
  static FenceChange tombstone(ResultSet r) throws SQLException {
    FenceChange change = snapshotChange(FenceChange.Kind.FENCE);
    change.fenceId = r.getString(1);
    change.seq = r.getLong(2);
    change.delete = true;
    change.commitTime = r.getLong(3);
    return change;
  }

  static FencesQuery fencesQuery(Connection db, FenceTableColumns c) throws SQLException {
    String geometryType = null;
    boolean hasTenant = false;
    boolean hasDwellDelay = false;
    try (PreparedStatement s = db.prepareStatement("SELECT attname, format_type(atttypid, atttypmod),"
        + " atttypid = 'interval'::regtype FROM pg_attribute"
        + " WHERE attrelid = ?::regclass AND attname IN (?, ?, ?) AND attnum > 0 AND NOT attisdropped")) {
      s.setString(1, c.qualified(c.fencesTable()));
      s.setString(2, c.geometry());
      s.setString(3, c.tenant() == null ? c.geometry() : c.tenant());
      s.setString(4, c.dwellDelay() == null ? c.geometry() : c.dwellDelay());
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          String column = r.getString(1);
          if (column.equals(c.geometry())) {
            geometryType = r.getString(2);
          } else if (column.equals(c.tenant())) {
            hasTenant = true;
          } else if (r.getBoolean(3)) {
            hasDwellDelay = true;
          } else {
            throw new SQLException("the fences table " + c.schema() + "." + c.fencesTable() + " has a dwell delay column "
                + column + " of type " + r.getString(2) + ", not interval");
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
    // Likewise a table without the dwell delay column has no fence of its own delay.
    String dwellDelay = hasDwellDelay ? debeziumMicros(quote(c.dwellDelay())) : "NULL";
    String id = quote(c.id()) + "::text";
    return new FencesQuery("SELECT " + id + ", " + quote(c.seq()) + ", " + geometry + ", " + tenant + ", fence_bucket(" + id
        + "), " + dwellDelay + " FROM " + c.qualified(c.fencesTable()), id, quote(c.seq()), c.qualified(c.fencesTable()), binary);
  }

  /**
   * The microseconds Debezium makes of an {@code interval} in the change stream, as the double it
   * computes before casting it to a whole number: a fence a rebuild reads has the dwell delay the
   * stream gives it. Debezium 1.9 parses the interval's text (IntervalStyle postgres, the default)
   * into PostgreSQL's fields, the seconds as {@code whole + micros / 1e6} (pgjdbc's PGInterval),
   * and adds them up in doubles with months of 365.25 / 12 days (MicroDuration.durationMicros); the
   * same operations here, in the same order on the same IEEE doubles, give the same number, which
   * exact arithmetic would not always: '1.005 seconds' is 1004999.9999999999 there, so 1004 ms.
   * (EXTRACT(EPOCH ...) counts months as 30 days.)
   */
  static String debeziumMicros(String interval) {
    String seconds = "trunc(extract(second FROM " + interval + "))";
    return "((((((12 * extract(year FROM " + interval + ") + extract(month FROM " + interval + "))::float8 * 30.4375"
        + " + extract(day FROM " + interval + ")::float8) * 24 + extract(hour FROM " + interval + ")::float8) * 60"
        + " + extract(minute FROM " + interval + ")::float8) * 60"
        + " + (" + seconds + "::float8 + (extract(microseconds FROM " + interval + ") - 1000000 * " + seconds + ")::float8"
        + " / 1000000)) * 1000000)";
  }

  static void readFingerprints(Connection db, FenceTableColumns c, Array buckets, Consumer<FenceChange> out) throws SQLException {
    String sql = "SELECT bucket, fence_count, checksum, version FROM " + c.qualified(c.bucketStatsTable())
        + " WHERE bucket = ANY(?)";
    query(db, sql, buckets, r -> {
      FenceChange change = snapshotChange(FenceChange.Kind.BUCKET_STATS);
      change.bucket = r.getInt(1);
      change.fenceCount = r.getLong(2);
      change.checksum = r.getLong(3);
      change.seq = r.getLong(4);
      out.accept(change);
    });
  }

  static FenceChange snapshotChange(FenceChange.Kind kind) {
    FenceChange change = new FenceChange();
    change.kind = kind;
    change.snapshot = true;
    return change;
  }
}
