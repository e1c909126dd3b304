package dev.geofence.savepoints;

import static dev.geofence.connectors.cdc.FenceTableColumns.quote;

import dev.geofence.connectors.cdc.FenceTableColumns;
import dev.geofence.state.checksum.FenceBuckets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A savepoint's fences against the source of truth, as of the savepoint (issue 5, {@code verify}).
 * The source keeps no history, but every edit bumps its bucket's fingerprint version: a bucket whose
 * version at the source equals the savepoint's has had no edit since, so its fences must be equal
 * id by id and seq by seq; a bucket edited since (a higher version) is reported and not compared.
 * Equal means: no bucket unedited since differs, and none is older at the source than in the
 * savepoint.
 *
 * @param differences fences the source holds and the savepoint lacks, the savepoint holds and the
 *     source lacks, or at another seq, by fence id
 * @param bucketsEditedSince buckets edited at the source since the savepoint: not compared
 * @param bucketsBehind buckets whose fingerprint at the source is older than the savepoint's (or
 *     absent from it)
 */
public record SavepointVerification(
    List<Difference> differences, int bucketsEditedSince, List<Integer> bucketsBehind,
    long sourceFences, long sourceChecksum, long savepointFences, long savepointChecksum) {

  /**
   * A fence the comparison found different, with both seqs (0: absent or deleted there).
   *
   * @param kind {@code missing} (in the source, not the savepoint), {@code extra} (the other way
   *     round) or {@code stale} (another seq)
   */
  public record Difference(String kind, String fenceId, long savepointSeq, long sourceSeq) {

    @Override
    public String toString() {
      return kind + " " + fenceId + " (savepoint seq " + savepointSeq + ", source seq " + sourceSeq + ")";
    }
  }

  public boolean equal() {
    return differences.isEmpty() && bucketsBehind.isEmpty();
  }

  /** Compares, reading the source's fences and fingerprints in one consistent read. */
  public static SavepointVerification verify(SavepointInspection savepoint, Connection db, FenceTableColumns columns)
      throws SQLException {
    long[] sourceVersions = new long[FenceBuckets.COUNT];
    Map<String, Long> sourceLive = new HashMap<>();
    long sourceFences = 0;
    long sourceChecksum = 0;
    boolean autoCommit = db.getAutoCommit();
    db.setAutoCommit(false);
    db.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    try (Statement s = db.createStatement()) {
      // The whole table's count and checksum are the buckets' sum and XOR (the fence_stats view).
      try (ResultSet r = s.executeQuery(
          "SELECT bucket, version, fence_count, checksum FROM " + columns.qualified(columns.bucketStatsTable()))) {
        while (r.next()) {
          sourceVersions[r.getInt(1)] = r.getLong(2);
          sourceFences += r.getLong(3);
          sourceChecksum ^= r.getLong(4);
        }
      }
      s.setFetchSize(10_000);
      try (ResultSet r = s.executeQuery("SELECT " + quote(columns.id()) + "::text, " + quote(columns.seq()) + " FROM "
          + columns.qualified(columns.fencesTable()))) {
        while (r.next()) {
          sourceLive.put(r.getString(1), r.getLong(2));
        }
      }
      db.commit();
    } finally {
      db.setAutoCommit(autoCommit);
    }
    boolean[] compared = new boolean[FenceBuckets.COUNT];
    List<Integer> behind = new ArrayList<>();
    int editedSince = 0;
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      long mine = savepoint.bucketVersions[b];
      if (mine < 0 || sourceVersions[b] < mine) {
        behind.add(b);
      } else if (sourceVersions[b] > mine) {
        editedSince++;
      } else {
        compared[b] = true;
      }
    }
    Map<String, Difference> found = new TreeMap<>();
    sourceLive.forEach((id, seq) -> {
      if (compared[FenceBuckets.of(id)]) {
        Long held = savepoint.liveSeqs.get(id);
        if (held == null) {
          found.put(id, new Difference("missing", id, 0, seq));
        } else if (!held.equals(seq)) {
          found.put(id, new Difference("stale", id, held, seq));
        }
      }
    });
    savepoint.liveSeqs.forEach((id, seq) -> {
      if (compared[FenceBuckets.of(id)] && !sourceLive.containsKey(id)) {
        found.put(id, new Difference("extra", id, seq, 0));
      }
    });
    return new SavepointVerification(List.copyOf(found.values()), editedSince, List.copyOf(behind),
        sourceFences, sourceChecksum, savepoint.fences, savepoint.checksum);
  }

  /** The comparison for people, at most {@code limit} differences listed. */
  public String report(int limit) {
    StringBuilder out = new StringBuilder();
    out.append(equal() ? "equal" : "DIFFERENT").append(" as of the savepoint: ")
        .append(differences.size()).append(" fences differ, ")
        .append(bucketsBehind.size()).append(" buckets behind the savepoint at the source, ")
        .append(bucketsEditedSince).append(" buckets edited since (not compared)")
        .append(System.lineSeparator())
        .append("  savepoint: ").append(savepointFences).append(" fences, checksum ").append(savepointChecksum)
        .append("; source now: ").append(sourceFences).append(" fences, checksum ").append(sourceChecksum)
        .append(System.lineSeparator());
    differences.stream().limit(limit).forEach(d -> out.append("  ").append(d).append(System.lineSeparator()));
    if (differences.size() > limit) {
      out.append("  ... and ").append(differences.size() - limit).append(" more").append(System.lineSeparator());
    }
    return out.toString();
  }
}
