package dev.geofence.job.operator;

import dev.geofence.connectors.cdc.FenceChange;

/**
 * A bucket's fingerprint in keyed state, as the index last took it from the stream: the source's
 * count and checksum of the bucket's live fences at fingerprint {@code version}, and where in the
 * source's history that version was committed. Serialized by {@link StoredStateSerializers}.
 */
public record StoredFingerprint(int bucket, long fenceCount, long checksum, long version, long lsn, long commitTime) {

  /** The fingerprint a {@code BUCKET_STATS} change of the stream carries (its version in {@code seq}). */
  public static StoredFingerprint of(FenceChange stats) {
    return new StoredFingerprint(stats.bucket, stats.fenceCount, stats.checksum, stats.seq, stats.lsn, stats.commitTime);
  }
}
