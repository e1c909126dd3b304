package dev.geofence.state.checksum;

/**
 * The bucket of a fence: the low 12 bits of the first 4 bytes of md5(id), one of {@value #COUNT}.
 * PostgreSQL computes the same ({@code fence_bucket(id)} in the migration) and keeps a fingerprint
 * per bucket, so a subtask owning some buckets can check exactly its own fences. Stateless.
 */
public final class FenceBuckets {

  /** Number of buckets; a power of two, so any power-of-two key-group count up to it divides it. */
  public static final int COUNT = 4096;

  private FenceBuckets() {}

  public static int of(String fenceId) {
    return (int) Md5.firstBytes(fenceId, 4) & (COUNT - 1);
  }
}
