package dev.geofence.state.ledger;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.edit.FenceEdit;

/**
 * What waits in the {@link Schedule} under a key until the clock lets it through: a fence's edit
 * (under the fence's id), or a bucket's fingerprint (under the bucket's key). Exactly one is given.
 */
public record Queued(FenceEdit edit, BucketFingerprint fingerprint) {

  public Queued {
    if ((edit == null) == (fingerprint == null)) {
      throw new IllegalArgumentException("a queued change is an edit or a fingerprint, and only one");
    }
  }

  public static Queued of(FenceEdit edit) {
    return new Queued(edit, null);
  }

  public static Queued of(BucketFingerprint fingerprint) {
    return new Queued(null, fingerprint);
  }

  /** When the source committed it, epoch milliseconds. */
  public long commitTime() {
    return edit != null ? edit.commitTimeMillis() : fingerprint.commitTime();
  }

  /** The key it waits under: the fence's id, or the bucket's key ({@link FenceBuckets#key}). */
  public String key() {
    return edit != null ? edit.fenceId() : FenceBuckets.key(fingerprint.bucket());
  }
}
