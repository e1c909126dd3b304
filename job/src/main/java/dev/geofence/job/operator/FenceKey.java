package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.state.checksum.FenceBuckets;
import java.util.Objects;

/**
 * The key fences are partitioned by: a fence id whose hash code places it in Flink key group
 * {@code bucket(id) mod max-parallelism}, where {@link FenceBuckets} is the bucket PostgreSQL
 * keeps a fingerprint for. A subtask therefore owns whole buckets, and can check its fences
 * against the source's per-bucket fingerprints, and read exactly its own fences in a rebuild.
 *
 * <p>Flink assigns key group {@code murmurHash(hashCode) mod maxParallelism}. The hash code is
 * chosen by running that murmur hash backwards from a value whose low 12 bits are the bucket (its
 * other bits spread fences of a bucket apart for hash tables), so for any max-parallelism that
 * divides {@value FenceBuckets#COUNT} the key group is the bucket's. Flink cannot change that
 * function without breaking every savepoint's key groups, and a test pins it.
 *
 * <p>A Flink POJO: the id is its only field.
 */
public final class FenceKey {


  public String id;
  private transient int hash;
  private transient boolean hashed;

  public FenceKey() {}

  public FenceKey(String id) {
    this.id = Objects.requireNonNull(id, "fence id");
  }

  /**
   * The key of a record of the fence stream: a fence's id, or for a bucket fingerprint (and a
   * heartbeat's copy for key group g, carried as bucket g) the bucket's key.
   */
  public static FenceKey of(FenceChange change) {
    return change.kind == FenceChange.Kind.FENCE ? new FenceKey(change.fenceId) : ofBucket(change.bucket);
  }

  /**
   * The key of bucket {@code b}: of its fingerprint record and its fences' stored versions, in the
   * same key group as the bucket's fence keys. Its id starts with NUL, which no fence id can
   * (PostgreSQL text cannot hold it).
   */
  public static FenceKey ofBucket(int bucket) {
    return new FenceKey(FenceBuckets.key(bucket));
  }

  /** The bucket this key belongs to. */
  public int bucket() {
    return FenceBuckets.ofKey(id);
  }

  /** Whether this is the key of a bucket's fingerprint record rather than of a fence. */
  public boolean isBucket() {
    return FenceBuckets.isBucketKey(id);
  }

  @Override
  public int hashCode() {
    if (!hashed) {
      int spread = (id.hashCode() << 12) & 0x7FFFF000;
      hash = murmurPreimage(spread | bucket());
      hashed = true;
    }
    return hash;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof FenceKey && ((FenceKey) o).id.equals(id);
  }

  @Override
  public String toString() {
    return id;
  }

  /**
   * The int whose Flink murmur hash ({@code MathUtils.murmurHash}) is {@code target}, which must
   * not be negative: each step of the hash undone in reverse order.
   */
  static int murmurPreimage(int target) {
    int h = target;
    // bitMix, backwards
    h ^= h >>> 16;
    h *= inverse(0xc2b2ae35);
    h ^= (h >>> 13) ^ (h >>> 26);
    h *= inverse(0x85ebca6b);
    h ^= h >>> 16;
    // code ^= 4; code = code * 5 + 0xe6546b64; rotl 13; * 0x1b873593; rotl 15; * 0xcc9e2d51
    h ^= 4;
    h = (h - 0xe6546b64) * inverse(5);
    h = Integer.rotateRight(h, 13);
    h *= inverse(0x1b873593);
    h = Integer.rotateRight(h, 15);
    h *= inverse(0xcc9e2d51);
    return h;
  }

  /** The multiplicative inverse of an odd int modulo 2^32 (Newton's iteration). */
  private static int inverse(int odd) {
    int x = odd;
    for (int i = 0; i < 5; i++) {
      x *= 2 - odd * x;
    }
    return x;
  }
}
