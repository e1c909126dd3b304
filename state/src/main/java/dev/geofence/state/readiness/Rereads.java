package dev.geofence.state.readiness;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * When a bucket that stays mismatched is read again from the source. The fence clock applies
 * every edit committed before it, so a bucket still mismatched once the clock is more than a
 * heartbeat interval past the newest change the stream brought of it (an edit, or a fingerprint)
 * differs for real: the stream never carried one of its edits, or the restored state lacks one.
 * Measured from the newest change, not the newest fingerprint: an edit applied on arrival leaves
 * its bucket mismatched until its transaction's fingerprint, the next record of the stream, comes,
 * and the clock may move between the two. Such a bucket is read again, whether or not its subtask
 * was ever ready. A bucket that does not match after its re-read (the source's own fingerprint
 * disagrees with its fences, or the source did not answer) is tried again with backoff, {@link
 * #FIRST_RETRY_MS} doubling up to {@link #LONGEST_RETRY_MS}, for as long as it stays mismatched;
 * once it matches, its next mismatch starts afresh. Not thread-safe.
 */
public final class Rereads {

  /** The buckets overdue for a re-read, and how far the clock is past the oldest of their newest changes. */
  public record Overdue(int[] buckets, long longestMillis) {}

  /** How long after its first re-read a bucket that still does not match is read again. */
  public static final long FIRST_RETRY_MS = 2_000;
  /** The longest wait between two re-reads of a bucket: a bucket that never matches costs one read per this. */
  public static final long LONGEST_RETRY_MS = 300_000;

  /** The commit time of the newest change of each bucket the stream brought. */
  private final Map<Integer, Long> streamedTimes = new HashMap<>();
  /** Re-reads of each bucket since it last matched, and when it may be read again (processing time). */
  private final Map<Integer, Integer> attempts = new HashMap<>();
  private final Map<Integer, Long> retryAt = new HashMap<>();
  private long count;
  private long unmatchedAfter;

  /**
   * The stream brought a change of {@code bucket} (an edit of one of its fences, or its
   * fingerprint) committed at {@code commitTime}; a restore says the same of the newest it had.
   */
  public void streamed(int bucket, long commitTime) {
    streamedTimes.merge(bucket, commitTime, Math::max);
  }

  /**
   * Of the {@code unmatched} buckets, those due for a re-read when the clock is at {@code clockTime}
   * and the processing time is {@code now}, taken as re-read now; null if none is. Buckets not among
   * {@code unmatched} match again, and start afresh.
   *
   * @param patienceMillis how far the clock may be past a bucket's newest change before it is overdue
   */
  public Overdue overdue(int[] unmatched, long clockTime, long patienceMillis, long now) {
    if (!attempts.isEmpty()) {
      Map<Integer, Integer> still = new HashMap<>();
      for (int b : unmatched) {
        Integer tried = attempts.get(b);
        if (tried != null) {
          still.put(b, tried);
        }
      }
      attempts.keySet().retainAll(still.keySet());
      retryAt.keySet().retainAll(still.keySet());
    }
    int[] due = new int[unmatched.length];
    int n = 0;
    long longest = 0;
    for (int b : unmatched) {
      Long at = streamedTimes.get(b);
      if (at != null && clockTime - at > patienceMillis && now >= retryAt.getOrDefault(b, Long.MIN_VALUE)) {
        due[n++] = b;
        longest = Math.max(longest, clockTime - at);
      }
    }
    if (n == 0) {
      return null;
    }
    int[] buckets = Arrays.copyOf(due, n);
    for (int b : buckets) {
      int tried = attempts.merge(b, 1, Integer::sum);
      retryAt.put(b, now + backoff(tried));
    }
    count += n;
    return new Overdue(buckets, longest);
  }

  /** The wait after the {@code tried}-th re-read of a bucket before its next. */
  static long backoff(int tried) {
    return tried > 20 ? LONGEST_RETRY_MS : Math.min(LONGEST_RETRY_MS, FIRST_RETRY_MS << (tried - 1));
  }

  /**
   * A re-read ended and these of its buckets still do not match (or the source did not answer, so
   * none was read): they are tried again after their backoff, if they stay mismatched.
   */
  public void stillUnmatched(int... buckets) {
    unmatchedAfter += buckets.length;
  }

  /** Whether some bucket has been re-read and not matched since (being read, or waiting for its next try). */
  public boolean retrying() {
    return !attempts.isEmpty();
  }

  /** Buckets re-read so far. */
  public long count() {
    return count;
  }

  /** Buckets whose re-read did not leave them matching, or did not reach the source, so far. */
  public long unmatchedAfterReread() {
    return unmatchedAfter;
  }
}
