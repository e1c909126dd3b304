package dev.geofence.state.checksum;

/**
 * The bucket of a fence: the low 12 bits of the first 4 bytes of md5(id), one of {@value #COUNT}.
 * PostgreSQL computes the same ({@code fence_bucket(id)} in the migration) and keeps a fingerprint
 * per bucket, so a subtask owning some buckets can check exactly its own fences. Bucket b lives in
 * Flink key group {@code b mod maxParallelism} (the job's keys make it so), which is why the max
 * parallelism must divide {@value #COUNT}. The one place of both rules. Stateless but for a cache
 * per thread of the last ids' buckets.
 */
public final class FenceBuckets {

  /** Number of buckets; a power of two, so any power-of-two key-group count up to it divides it. */
  public static final int COUNT = 4096;

  private FenceBuckets() {}

  public static int of(String fenceId) {
    Object[] recent = RECENT.get();
    String[] ids = (String[]) recent[0];
    int[] buckets = (int[]) recent[1];
    int slot = fenceId.hashCode() & (RECENT_SIZE - 1);
    if (fenceId.equals(ids[slot])) {
      return buckets[slot];
    }
    int bucket = (int) Md5.firstBytes(fenceId, 4) & (COUNT - 1);
    ids[slot] = fenceId;
    buckets[slot] = bucket;
    return bucket;
  }

  // One edit asks for its fence's bucket about eight times (its key group, the fence set, the
  // index's slot, the fingerprints), and one MD5 costs more than the rest of those lookups: a
  // catch-up spent 7 % of its operator's time here (2026-12-06 journal). So each thread keeps the
  // buckets of its last ids, in a table indexed by the id's hash, which a String caches. The
  // table holds JDK types only, so a thread that outlives the job keeps no class of it loaded.
  private static final int RECENT_SIZE = 256;
  private static final ThreadLocal<Object[]> RECENT =
      ThreadLocal.withInitial(() -> new Object[] {new String[RECENT_SIZE], new int[RECENT_SIZE]});

  /** The Flink key group of bucket {@code bucket} at {@code maxParallelism}. */
  public static int keyGroup(int bucket, int maxParallelism) {
    return bucket % maxParallelism;
  }

  /** Whether bucket {@code bucket} lives in key groups {@code [keyGroupStart, keyGroupEnd]}. */
  public static boolean inKeyGroups(int bucket, int maxParallelism, int keyGroupStart, int keyGroupEnd) {
    int group = keyGroup(bucket, maxParallelism);
    return group >= keyGroupStart && group <= keyGroupEnd;
  }

  /**
   * The key under which bucket {@code bucket}'s own records (its fingerprint, its fences' stored
   * versions) are kept beside its fences' keys: it starts with NUL, which no fence id can
   * (PostgreSQL text cannot hold it). Written into every savepoint: never to change.
   */
  public static String key(int bucket) {
    if (bucket < 0 || bucket >= COUNT) {
      throw new IllegalArgumentException("bucket " + bucket + " is outside [0, " + COUNT + ")");
    }
    return BUCKET_KEY_PREFIX + bucket;
  }

  /** Whether {@code key} is a bucket's ({@link #key}) rather than a fence's id. */
  public static boolean isBucketKey(String key) {
    return key.startsWith(BUCKET_KEY_PREFIX);
  }

  /** The bucket a key belongs to: a bucket's own key's, or a fence id's bucket. */
  public static int ofKey(String key) {
    return isBucketKey(key) ? Integer.parseInt(key.substring(BUCKET_KEY_PREFIX.length())) : of(key);
  }

  private static final String BUCKET_KEY_PREFIX = "\u0000bucket:";

  /** Checks that subtasks can own whole buckets: {@code maxParallelism} divides {@value #COUNT}. */
  public static void checkMaxParallelism(int maxParallelism) {
    if (maxParallelism < 1 || COUNT % maxParallelism != 0) {
      throw new IllegalArgumentException("the job's max parallelism must divide " + COUNT
          + " (a power of two up to it), so that subtasks own whole fence buckets; it is " + maxParallelism);
    }
  }
}
