package dev.geofence.state.readiness;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import java.util.Arrays;

/**
 * Readiness of one subtask's fence index: for every bucket the subtask owns, the fingerprint of
 * the fences it holds (count and XOR of h(id, seq)) against the fingerprint the source keeps for
 * the bucket ({@code fence_bucket_stats}). The index is ready when every owned bucket has been
 * heard from and all of them match; the source updates a bucket's row in the same transaction as
 * its fences, and the stream delivers it after them, so the comparison is at the same LSN.
 *
 * <p>A subtask owns the buckets of its key groups ({@link FenceBuckets#inKeyGroups}).
 * Updates are O(1): a count of unmatched buckets is kept. Not thread-safe.
 */
public final class BucketFingerprints {

  private final boolean[] owned;
  private final int ownedCount;
  private final long[] count = new long[FenceBuckets.COUNT];
  private final long[] checksum = new long[FenceBuckets.COUNT];
  private final boolean[] heard = new boolean[FenceBuckets.COUNT];
  private final long[] expectedCount = new long[FenceBuckets.COUNT];
  private final long[] expectedChecksum = new long[FenceBuckets.COUNT];
  private final long[] expectedVersion = new long[FenceBuckets.COUNT];
  private final boolean[] unmatched = new boolean[FenceBuckets.COUNT];
  private int unmatchedCount;
  /** Told when every owned bucket comes to match, or one stops matching. */
  private Runnable matchChanged = () -> {};
  private long loaded;
  private long expected;

  /**
   * @param keyGroupStart first key group of the subtask's range (inclusive)
   * @param keyGroupEnd last key group of the subtask's range (inclusive)
   */
  public BucketFingerprints(int maxParallelism, int keyGroupStart, int keyGroupEnd) {
    FenceBuckets.checkMaxParallelism(maxParallelism);
    this.owned = new boolean[FenceBuckets.COUNT];
    int n = 0;
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      owned[b] = FenceBuckets.inKeyGroups(b, maxParallelism, keyGroupStart, keyGroupEnd);
      if (owned[b]) {
        // Not heard from yet: unmatched until its fingerprint arrives.
        unmatched[b] = true;
        n++;
      }
    }
    this.ownedCount = n;
    this.unmatchedCount = n;
  }

  /** A live fence version now held. */
  public void add(String fenceId, long seq) {
    add(FenceBuckets.of(fenceId), fenceId, seq);
  }

  /**
   * A live fence version now held, counted in bucket {@code b}: the bucket a restore read it from
   * (the job stores every fence in the bucket of its id), so that its id is not hashed again.
   */
  public void add(int b, String fenceId, long seq) {
    count[b]++;
    checksum[b] ^= FenceChecksum.hash(fenceId, seq);
    loaded++;
    recheck(b);
  }

  /**
   * A bucket's live fences as a segment counted them ({@code FenceSegment#liveCount} and {@code
   * #checksum}), added at once: a restore of segments hashes no fence.
   */
  public void add(int b, long fences, long fencesChecksum) {
    count[b] += fences;
    checksum[b] ^= fencesChecksum;
    loaded += fences;
    recheck(b);
  }

  /**
   * No fence held any more, in any bucket (the source's fingerprints stay expected): a catch-up's
   * load counts them all again as it reads them.
   */
  public void clearHeld() {
    Arrays.fill(count, 0);
    Arrays.fill(checksum, 0);
    loaded = 0;
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      recheck(b);
    }
  }

  /** A live fence version no longer held. */
  public void remove(String fenceId, long seq) {
    int b = FenceBuckets.of(fenceId);
    count[b]--;
    checksum[b] ^= FenceChecksum.hash(fenceId, seq);
    loaded--;
    recheck(b);
  }

  /**
   * The source's fingerprint of a bucket, as of the change stream's position. A fingerprint older
   * than the one held (a lower {@code version} of the bucket's row) is ignored: after a rebuild read
   * the table, the stream may still deliver the rows it read past.
   *
   * @return whether it was taken
   */
  public boolean expect(int bucket, long fenceCount, long fenceChecksum, long version) {
    if (heard[bucket] && version < expectedVersion[bucket]) {
      return false;
    }
    if (owned[bucket]) {
      expected += fenceCount - (heard[bucket] ? expectedCount[bucket] : 0);
    }
    heard[bucket] = true;
    expectedCount[bucket] = fenceCount;
    expectedChecksum[bucket] = fenceChecksum;
    expectedVersion[bucket] = version;
    recheck(bucket);
    return true;
  }

  /** Runs {@code action} whenever {@link #ready()} changes. */
  public void onMatchChanged(Runnable action) {
    this.matchChanged = action;
  }

  private void recheck(int b) {
    boolean bad = owned[b] && (!heard[b] || count[b] != expectedCount[b] || checksum[b] != expectedChecksum[b]);
    if (bad != unmatched[b]) {
      unmatched[b] = bad;
      unmatchedCount += bad ? 1 : -1;
      if (unmatchedCount == (bad ? 1 : 0)) {
        matchChanged.run();
      }
    }
  }

  /** Every owned bucket heard from and matching. */
  public boolean ready() {
    return unmatchedCount == 0;
  }

  public int unmatched() {
    return unmatchedCount;
  }

  /** The owned buckets that do not match (or have not been heard from), in order. */
  public int[] unmatchedBuckets() {
    int[] buckets = new int[unmatchedCount];
    for (int b = 0, i = 0; b < FenceBuckets.COUNT && i < buckets.length; b++) {
      if (unmatched[b]) {
        buckets[i++] = b;
      }
    }
    return buckets;
  }

  public int ownedBuckets() {
    return ownedCount;
  }

  /** Fences the source says the owned buckets hold, as far as they have been heard from. */
  public long expectedFences() {
    return expected;
  }

  /** Fences held over fences expected, 1 when nothing is expected. */
  public double completeness() {
    return expected == 0 ? 1.0 : Math.min(1.0, (double) loaded / expected);
  }
}
