package dev.geofence.state.checksum;

/**
 * The order-independent fingerprint of a fence set that the source of truth keeps in {@code
 * fence_stats}: the number of live fences and the XOR over them of {@link #hash(String, long)}.
 * Equal count and checksum at the same LSN mean the index holds exactly the source's fences at
 * exactly their versions.
 *
 * <p>XOR makes the value independent of order and lets an edit update it in O(1): an upsert
 * removes the old version's hash and adds the new one, a delete removes it. Not thread-safe.
 */
public final class FenceChecksum {

  private long count;
  private long checksum;

  /**
   * h(id, seq): the first 8 bytes of md5(id || ':' || seq) as a signed big-endian 64-bit integer.
   * In PostgreSQL: {@code ('x' || substr(md5(id || ':' || seq::text), 1, 16))::bit(64)::bigint}.
   * The id is hashed as UTF-8, the server encoding the migration requires.
   */
  public static long hash(String id, long seq) {
    return Md5.firstBytes(id + ':' + seq, 8);
  }

  /** Adds a live fence version. */
  public void add(String id, long seq) {
    count++;
    checksum ^= hash(id, seq);
  }

  /** Removes a live fence version that was added before. */
  public void remove(String id, long seq) {
    count--;
    checksum ^= hash(id, seq);
  }

  public long count() {
    return count;
  }

  public long checksum() {
    return checksum;
  }

  /** Whether this fingerprint equals the source's {@code fence_stats} values. */
  public boolean matches(long expectedCount, long expectedChecksum) {
    return count == expectedCount && checksum == expectedChecksum;
  }

  @Override
  public String toString() {
    return "FenceChecksum{count=" + count + ", checksum=" + checksum + "}";
  }
}
