package dev.geofence.state.readiness;

import dev.geofence.state.checksum.FenceBuckets;
import java.util.Arrays;

/**
 * Proves that the change stream lost nothing of a subtask's buckets, from the versions of their
 * {@code fence_bucket_stats} rows. The source bumps a bucket's version by one in every transaction
 * that edits one of its fences, as that transaction commits, and the stream carries each bump. So:
 *
 * <ul>
 *   <li>a streamed version more than one past the last one known proves lost edits at once, even
 *       of a fence never edited again (which a seq gap would never show);
 *   <li>after a restore whose slot had moved past the restored position, the versions the source
 *       held at the catch-up target must all have arrived by the time the stream passes it: a
 *       version missing then was skipped with the edits before the slot's position.
 * </ul>
 *
 * Versions from a snapshot, a rebuild's read or restored state are known without proof. Not
 * thread-safe.
 */
public final class BucketVersions {

  private final long[] known = new long[FenceBuckets.COUNT];
  /** The versions read rather than streamed, for the backlog: the stream may run ahead of the check. */
  private final long[] read = new long[FenceBuckets.COUNT];
  private long[] target;
  private long backlog;

  public BucketVersions() {
    Arrays.fill(known, -1);
    Arrays.fill(read, -1);
  }

  /** A version read rather than streamed: a snapshot, a rebuild, or restored state. */
  public void known(int bucket, long version) {
    known[bucket] = Math.max(known[bucket], version);
    read[bucket] = Math.max(read[bucket], version);
  }

  /**
   * A version the stream delivered.
   *
   * @return why the stream cannot be trusted, or null
   */
  public String streamed(int bucket, long version) {
    long last = known[bucket];
    known[bucket] = Math.max(last, version);
    if (last >= 0 && version > last + 1) {
      return "bucket " + bucket + "'s fingerprint went from version " + last + " to " + version
          + " in the stream: the edits in between were skipped";
    }
    return null;
  }

  /**
   * The versions the source held at the catch-up target, -1 for buckets not to prove; they must
   * all have arrived when the stream passes the target.
   */
  public void expectAtTarget(long[] versions) {
    if (versions.length != FenceBuckets.COUNT) {
      throw new IllegalArgumentException("one version per bucket, " + FenceBuckets.COUNT + ", got " + versions.length);
    }
    target = versions.clone();
    backlog = backlogTo(versions);
  }

  /**
   * The transactions between the versions read here and {@code versions} (one per transaction and
   * bucket; a bucket without a version on either side counts none), as {@link #backlog()} counts
   * them, without setting a target.
   */
  public long backlogTo(long[] versions) {
    long transactions = 0;
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      if (versions[b] >= 0 && read[b] >= 0) {
        transactions += Math.max(0, versions[b] - read[b]);
      }
    }
    return transactions;
  }

  /**
   * The transactions that edited the buckets to prove between the versions read here (restored)
   * and those at the target, as counted when the target was set (one per transaction and bucket;
   * a bucket with no version read counts none): what a catch-up replays, including what the stream
   * delivered before the target was set.
   */
  public long backlog() {
    return backlog;
  }

  public boolean proofPending() {
    return target != null;
  }

  /**
   * The stream has passed the catch-up target: every version the source held then has arrived,
   * or the stream skipped edits.
   *
   * @return why the restored index cannot be trusted, or null once proven
   */
  public String targetReached() {
    long[] expected = target;
    target = null;
    if (expected == null) {
      return null;
    }
    int missing = 0;
    int example = -1;
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      if (expected[b] > known[b]) {
        missing++;
        example = example < 0 ? b : example;
      }
    }
    if (missing == 0) {
      return null;
    }
    return missing + " buckets never received their versions at the slot's position (bucket " + example + " is at "
        + expected[example] + " at the source, " + known[example] + " here): the edits between the restored position"
        + " and the slot's confirmed one were skipped";
  }

  /** A rebuild read the buckets: nothing is left to prove. */
  public void proven() {
    target = null;
  }
}
