package dev.geofence.state.readiness;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * When a bucket that stays mismatched is read again from the source. The fence clock applies
 * every edit committed before it, so a bucket still mismatched once the clock is more than a
 * heartbeat interval past its fingerprint's commit time differs for real: the stream never carried
 * one of its edits. Such a bucket is read again, once per fingerprint version (a source whose own
 * fingerprint disagrees with its fences is re-read again only at a newer one), and after the source
 * was found unreachable none is before the retry interval has passed. Not thread-safe.
 */
public final class Rereads {

  /** The buckets overdue for a re-read, and how far the clock is past the oldest of their fingerprints. */
  public record Overdue(int[] buckets, long longestMillis) {}

  private final Map<Integer, Long> fingerprintTimes = new HashMap<>();
  private final Map<Integer, Long> fingerprintVersions = new HashMap<>();
  private final Map<Integer, Long> rereadVersions = new HashMap<>();
  private long notBefore = Long.MIN_VALUE;
  private long count;

  /**
   * A bucket's fingerprint took effect.
   *
   * @param commitTime when the stream's transaction committed it, or null for a read's, which has
   *     none: the stream's last one still says how old the bucket's fingerprint is
   */
  public void fingerprint(int bucket, long version, Long commitTime) {
    fingerprintVersions.put(bucket, version);
    if (commitTime != null) {
      fingerprintTimes.put(bucket, commitTime);
    }
  }

  /**
   * Of the {@code unmatched} buckets, those due for a re-read when the clock is at {@code clockTime}
   * and the processing time is {@code now}, taken as re-read at their fingerprints' versions; null
   * if none is.
   *
   * @param patienceMillis how far the clock may be past a fingerprint before its bucket is overdue
   */
  public Overdue overdue(int[] unmatched, long clockTime, long patienceMillis, long now) {
    if (now < notBefore) {
      return null;
    }
    int[] due = new int[unmatched.length];
    int n = 0;
    long longest = 0;
    for (int b : unmatched) {
      Long at = fingerprintTimes.get(b);
      if (at != null && clockTime - at > patienceMillis && !fingerprintVersions.get(b).equals(rereadVersions.get(b))) {
        due[n++] = b;
        longest = Math.max(longest, clockTime - at);
      }
    }
    if (n == 0) {
      return null;
    }
    int[] buckets = Arrays.copyOf(due, n);
    for (int b : buckets) {
      rereadVersions.put(b, fingerprintVersions.get(b));
    }
    count += n;
    return new Overdue(buckets, longest);
  }

  /**
   * A re-read of {@code buckets} found the source unreachable: they were not read, so they are due
   * again at the same versions, if still mismatched, from {@code retryAt} on.
   */
  public void unreachable(int[] buckets, long retryAt) {
    notBefore = retryAt;
    for (int b : buckets) {
      rereadVersions.remove(b);
    }
  }

  /** Buckets re-read so far. */
  public long count() {
    return count;
  }
}
