package dev.geofence.connectors.source;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.cdc.FenceSource;
import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.edit.HeldFences;
import dev.geofence.state.readiness.Lsn;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The catch-up by reading what changed (docs/design.md#catch-up): of one subtask's buckets, in one
 * REPEATABLE READ transaction, the {@code (id, seq)} of every live fence (no geometry), compared
 * with the seqs the subtask holds; then whole only the rows whose seq differs or that the
 * subtask does not hold, the tombstones of held fences deleted since, and the bucket rows. Rows
 * come out as {@link BucketRead}'s do (snapshot {@link FenceChange}s, merged with the stream by
 * seq), and the bucket rows read in the same transaction are the proof, as after a rebuild.
 *
 * <p>Costs what changed rather than how often: at 1.2 M fences an hour's 144,000 edits changed
 * 54,720 fences, read in 0.4 s after a key pass of 2.8 s (docs/performance.md, "Catch-up").
 *
 * <p>Given the restored state's transaction horizon (a heartbeat's, {@code fence_heartbeat.horizon}),
 * the key pass scans only the rows written by a transaction at or after it (by each row's {@code
 * xmin}: an update writes a new row version): every other row was committed before the heartbeat
 * the state holds, so the state holds it at its seq. The rows are still read from the heap, but
 * the bucket function and the transfer are spared for all but those rows, and those it reads whole
 * in the same scan, since nearly all of them changed. Held fences the source has no row of at all
 * are then not told: every delete under the source contract leaves a
 * tombstone, read as before; a row removed with the triggers disabled (outside the contract,
 * docs/source-contract.md) is seen only by a pass over every row.
 */
public final class ChangedRead {

  private static final Logger LOG = LoggerFactory.getLogger(ChangedRead.class);

  /**
   * What the read saw: where the source's WAL was when it began; the position a stream may start
   * from and lose nothing the read does not hold (0 when the read could not be paired with one);
   * the time every change it holds was committed by; the live fences its key pass scanned, whether
   * the pass was narrowed by the transaction horizon, the rows it read whole, the tombstones of held
   * fences, the held live fences the source has no row of at all (none told by a narrowed pass),
   * how long the key pass took (0 for a load, which has none) and how long the whole read took.
   */
  public record Result(long lsn, long streamFrom, long readTime, long keys, boolean narrowed, long changed, long tombstones,
      List<String> missing, long keyPassMillis, long millis) {}

  /** Rows per fetch of the key pass (an id and a seq each); whole rows come as {@link BucketRead#query} fetches them. */
  private static final int KEYS_FETCH_SIZE = 10_000;
  /** How long the read waits for the transactions committing as its stream position was read to become visible. */
  private static final long PAIRING_PATIENCE_MS = 2_000;
  private static final long PAIRING_POLL_MS = 10;
  /** Ids per query of the rows read whole. */
  private static final int IDS_PER_QUERY = 2_000;
  /**
   * How many transactions old a horizon may be to narrow the key pass: rows are compared by the
   * age of their 32-bit transaction ids, which wrap around at 2^31; far inside that.
   */
  static final long NARROWING_AGE_LIMIT = 1L << 30;

  private ChangedRead() {}

  /**
   * Reads the buckets of key groups {@code [keyGroupStart, keyGroupEnd]} against {@code held} (the
   * subtask's live fences and their seqs as of the read's start) and hands every row to read whole
   * to {@code out}, on the calling thread. If {@code whole}, the catch-up's load: every
   * fence and tombstone of the buckets read whole, bucket by bucket as a fresh start reads them,
   * with no key pass, for a subtask that set its fences aside; {@code held} (what it held before)
   * then only holds back a tombstone no newer than the version held, whose members entered after
   * that delete, and tells the held fences gone.
   *
   * @param horizon the restored state's transaction horizon, which narrows the key pass; 0 for none
   */
  public static Result read(Connection db, FenceTableColumns columns, int maxParallelism, int keyGroupStart, int keyGroupEnd,
      HeldFences held, long horizon, boolean whole, Consumer<FenceChange> out) throws SQLException, InterruptedException {
    long started = System.nanoTime();
    Integer[] owned = BucketRead.ownedBuckets(maxParallelism, keyGroupStart, keyGroupEnd);
    // The pairing's first statements run outside the read's transaction, in autocommit.
    boolean autoCommit = db.getAutoCommit();
    try {
      Result result = pairedRead(db, columns, owned, held, horizon, whole, out, started);
      heartbeat(db, columns);
      return result;
    } finally {
      db.setAutoCommit(autoCommit);
    }
  }

  /**
   * The 64-bit ids of the 32-bit transaction ids {@code ids} (pg_locks gives no other), each the one
   * nearest {@code reference} (a 64-bit id of the same moment): running transactions lie within 2^31
   * of it, which PostgreSQL's wraparound protection guarantees.
   */
  static String[] fullXids(long reference, Array ids) throws SQLException {
    if (ids == null) {
      return new String[0];
    }
    Object[] xids = (Object[]) ids.getArray();
    String[] full = new String[xids.length];
    for (int i = 0; i < xids.length; i++) {
      full[i] = Long.toString(fullXid(reference, Long.parseLong((String) xids[i])));
    }
    return full;
  }

  static long fullXid(long reference, long xid) {
    return reference + (int) (xid - (reference & 0xFFFF_FFFFL));
  }

  /**
   * Writes the heartbeat row once the read has ended: the subtask is ready once the stream passes
   * the read's position, which with no edit takes the next heartbeat, up to a heartbeat interval
   * after the stream starts (0.6 to 2.1 s of an hour-old savepoint's catch-up, 2026-12-07). This
   * one commits after the read, so the stream carries it as soon as it starts. Not written, the
   * read stands and the job's own heartbeat comes later.
   */
  private static void heartbeat(Connection db, FenceTableColumns columns) {
    try (Statement s = db.createStatement()) {
      s.executeUpdate(FenceSource.heartbeatSql(columns));
    } catch (SQLException e) {
      LOG.warn("The heartbeat row was not written after the read ({}): the stream passes the read at the job's next heartbeat",
          e.getMessage());
    }
  }

  private static Result pairedRead(Connection db, FenceTableColumns columns, Integer[] owned, HeldFences held,
      long horizon, boolean whole, Consumer<FenceChange> out, long started) throws SQLException, InterruptedException {
    // The stream position the read pairs with: every transaction whose commit record lies before it
    // must be visible to the read's snapshot, so that a stream started there loses none. A commit
    // record is written before its transaction becomes visible, so the transactions running just
    // after this position was read must have ended before the snapshot is taken (checked below).
    // They are those holding their own id's lock, which a transaction releases only once visible: a
    // snapshot's list of running ids would leave out one at or past its xmax, which is what the
    // newest transaction is while its commit waits for its flush or a synchronous standby.
    String lsnBefore;
    String[] running;
    db.setAutoCommit(true);
    try (Statement s = db.createStatement()) {
      try (ResultSet r = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
        r.next();
        lsnBefore = r.getString(1);
      }
      try (ResultSet r = s.executeQuery("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, (SELECT"
          + " array_agg(transactionid::text) FROM pg_locks WHERE locktype = 'transactionid' AND mode = 'ExclusiveLock' AND granted)")) {
        r.next();
        running = fullXids(r.getLong(1), r.getArray(2));
      }
    }
    long waitUntil = System.currentTimeMillis() + PAIRING_PATIENCE_MS;
    return BucketRead.inReadTransaction(db, () -> {
      // The snapshot is taken by this first statement: every change it holds committed before this
      // LSN and before this instant (the clock read after the snapshot was taken), which is the
      // oldest event time a location may have to be evaluated against what it reads. The snapshot's
      // next transaction id bounds the horizon that may narrow the key pass.
      long lsn;
      long readTime;
      boolean paired;
      long nextXid;
      while (true) {
        try (PreparedStatement s = db.prepareStatement("SELECT pg_current_wal_insert_lsn()::text,"
            + " (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 1,"
            + " NOT EXISTS (SELECT 1 FROM unnest(?::text[]) t(x)"
            + " WHERE NOT pg_visible_in_snapshot(x::xid8, pg_current_snapshot()) AND pg_xact_status(x::xid8) IS DISTINCT FROM 'aborted'),"
            + " pg_snapshot_xmax(pg_current_snapshot())::text::bigint")) {
          s.setArray(1, db.createArrayOf("text", running));
          try (ResultSet r = s.executeQuery()) {
            r.next();
            lsn = Lsn.parse(r.getString(1));
            readTime = r.getLong(2);
            paired = r.getBoolean(3);
            nextXid = r.getLong(4);
          }
        }
        if (paired || System.currentTimeMillis() > waitUntil) {
          break;
        }
        // A transaction that was committing when the position was read is not visible yet: again.
        db.rollback();
        Thread.sleep(PAIRING_POLL_MS);
      }
      Array buckets = db.createArrayOf("int4", owned);
      BucketRead.FencesQuery fences = BucketRead.fencesQuery(db, columns);
      if (whole) {
        Set<String> unmet = liveIds(held);
        long[] counts = loadWhole(db, columns, fences, owned, held, unmet, out);
        BucketRead.readFingerprints(db, columns, buckets, out);
        return new Result(lsn, paired ? Lsn.parse(lsnBefore) : 0, readTime, counts[0], false, counts[0], counts[1],
            new ArrayList<>(unmet), 0, (System.nanoTime() - started) / 1_000_000);
      }
      long since = narrowing(horizon, nextXid);
      // A narrowed pass does not report the held fences with no row (ADR 0019): none to track.
      Set<String> unmet = since >= 0 ? new HashSet<>() : liveIds(held);
      // Tombstones of held fences first: of one deleted and re-created since, the delete reaches the
      // subtask before the new row (its members EXIT), as in a rebuild.
      long[] tombstones = new long[1];
      BucketRead.query(db, BucketRead.tombstonesQuery(columns), buckets, r -> {
        FenceChange tombstone = BucketRead.tombstone(r);
        long seq = held.seqOf(tombstone.fenceId);
        if (seq > 0 && seq < tombstone.seq) {
          unmet.remove(tombstone.fenceId);
          out.accept(tombstone);
          tombstones[0]++;
        }
      });
      long keyPassStarted = System.nanoTime();
      long keys;
      long changed;
      long keyPassMillis;
      if (since >= 0) {
        // Narrowed, the pass reads the changed rows whole as it meets them: its time includes theirs.
        long[] counts = narrowedPass(db, fences, buckets, since, held, out);
        keyPassMillis = (System.nanoTime() - keyPassStarted) / 1_000_000;
        keys = counts[0];
        changed = counts[1];
      } else {
        // The key pass over every row: the held fences it does not meet have no row at the source.
        List<String> ids = new ArrayList<>();
        keys = keyPass(db, fences, buckets, held, unmet, ids);
        keyPassMillis = (System.nanoTime() - keyPassStarted) / 1_000_000;
        readWhole(db, fences, ids, out);
        changed = ids.size();
      }
      BucketRead.readFingerprints(db, columns, buckets, out);
      return new Result(lsn, paired ? Lsn.parse(lsnBefore) : 0, readTime, keys, since >= 0, changed, tombstones[0],
          new ArrayList<>(unmet), keyPassMillis, (System.nanoTime() - started) / 1_000_000);
    });
  }

  /**
   * Reads every live fence and tombstone of {@code owned} whole, as a fresh start does, holding back
   * each tombstone no newer than the live version {@code held} has of its fence (a delete before
   * that version, which its members entered after); the ids of the rows it hands on leave {@code
   * unmet} (a held fence is looked up only for a tombstone: a load reads every fence of its
   * buckets). Returns how many live fences and tombstones went to {@code out}.
   */
  private static long[] loadWhole(Connection db, FenceTableColumns columns, BucketRead.FencesQuery fences, Integer[] owned,
      HeldFences held, Set<String> unmet, Consumer<FenceChange> out) throws SQLException {
    long[] counts = new long[2];
    BucketRead.readBucketsWhole(db, columns, fences, owned, change -> {
      if (!change.delete || held.seqOf(change.fenceId) < change.seq) {
        unmet.remove(change.fenceId);
        counts[change.delete ? 1 : 0]++;
        out.accept(change);
      }
    });
    return counts;
  }

  /**
   * The ids of the live fences of {@code held}, for a read to take out those it meets a row of: the
   * rest have no row at the source. Held fences, not the rows met: a load decided before the
   * restore holds a few thousand fences and reads 600,000 per subtask at the benchmarks' size,
   * whose ids a set of the rows met kept to the read's end; without it a day-old savepoint was
   * ready 2.3 s sooner (docs/performance/journal.md, "2026-12-07: a day-old load's set of every
   * fence it met").
   */
  private static Set<String> liveIds(HeldFences held) {
    Set<String> ids = new LinkedHashSet<>();
    held.forEachLive((id, seq) -> ids.add(id));
    return ids;
  }

  /**
   * The 32-bit transaction id of {@code horizon} to narrow the key pass by, or -1 to scan every
   * row: no horizon, or one not behind the read's snapshot (whose next transaction id is {@code
   * nextXid}) by less than {@link #NARROWING_AGE_LIMIT} transactions (a horizon of another
   * history, or too old to compare).
   */
  private static long narrowing(long horizon, long nextXid) {
    return horizon > 0 && horizon <= nextXid && nextXid - horizon < NARROWING_AGE_LIMIT ? horizon & 0xFFFF_FFFFL : -1;
  }

  /**
   * Scans the ids and seqs of every live fence of {@code buckets}: those not held at that seq go to
   * {@code changed}, every one out of {@code unmet}; returns how many were scanned.
   */
  private static long keyPass(Connection db, BucketRead.FencesQuery fences, Array buckets, HeldFences held, Set<String> unmet,
      List<String> changed) throws SQLException {
    String sql = "SELECT " + fences.id() + ", " + fences.seq() + " FROM " + fences.table() + " WHERE fence_bucket(" + fences.id()
        + ") = ANY(?)";
    long n = 0;
    try (PreparedStatement s = db.prepareStatement(sql)) {
      s.setArray(1, buckets);
      s.setFetchSize(KEYS_FETCH_SIZE);
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          String id = r.getString(1);
          if (held.seqOf(id) != r.getLong(2)) {
            changed.add(id);
          }
          unmet.remove(id);
          n++;
        }
      }
    }
    return n;
  }

  /**
   * The pass narrowed by the transaction horizon: scans the live fences of {@code buckets} written
   * at or after transaction {@code since}, and hands on whole, in the same scan, those not held at
   * their seq. Nearly every row it scans changed since the state (all but those written between
   * the horizon and the state's position), so it reads them whole as it meets them rather than
   * looking each up again by its key: after an hour's edits at 1.2 M fences, that second read took
   * 2.4 s of a subtask's 5 s read, 27,000 lookups by the primary key against one scan of the heap
   * (docs/performance/journal.md, "2026-12-07: the narrowed pass reads the changed rows whole").
   * Both ages are taken against the same transaction counter, so a row is scanned exactly when its
   * transaction is not older than the horizon's. Returns how many rows it scanned and handed on.
   */
  private static long[] narrowedPass(Connection db, BucketRead.FencesQuery fences, Array buckets, long since, HeldFences held,
      Consumer<FenceChange> out) throws SQLException {
    long[] counts = new long[2];
    // The horizon is a number the read computed (narrowing), written into the statement as one.
    counts[0] = BucketRead.query(db, fences.ofBuckets() + " AND age(xmin) <= age('" + since + "'::xid)", buckets, r -> {
      if (held.seqOf(r.getString(1)) != r.getLong(2)) {
        counts[1]++;
        out.accept(fences.row(r));
      }
    });
    return counts;
  }

  /** Reads the rows of {@code ids} whole, {@value #IDS_PER_QUERY} to a query, by the table's primary key. */
  private static void readWhole(Connection db, BucketRead.FencesQuery fences, List<String> ids, Consumer<FenceChange> out)
      throws SQLException {
    String sql = fences.select() + " WHERE " + fences.id() + " = ANY(?)";
    for (int from = 0; from < ids.size(); from += IDS_PER_QUERY) {
      String[] chunk = ids.subList(from, Math.min(ids.size(), from + IDS_PER_QUERY)).toArray(new String[0]);
      BucketRead.query(db, sql, db.createArrayOf("text", chunk), r -> out.accept(fences.row(r)));
    }
  }
}
