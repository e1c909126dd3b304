package dev.geofence.state.readiness;

/**
 * The phases of a subtask's warm-up (docs/design.md#phases), exported as the gauge {@code
 * index_load_phase} by {@link #code()} and logged by name on every change.
 */
public enum LoadPhase {
  /** The operator is being set up. */
  STARTING(0, "starting"),
  /** Fences are read from restored keyed state. */
  RESTORING(1, "restoring"),
  /** The restored fences are bulk-loaded into the in-memory index. */
  INDEXING(2, "indexing"),
  /** The replication slot is checked against the restored position (retried while unreachable). */
  GAP_CHECK(3, "gap-check"),
  /** The change stream has not yet reached the source's WAL position read at the gap check. */
  CATCHING_UP(4, "catching-up"),
  /** Some owned bucket's fences do not yet match the source's fingerprint (loading, or edits in flight). */
  VERIFYING(5, "verifying"),
  /** Provably complete: locations are evaluated. */
  READY(6, "ready"),
  /** The fences are being (or are waiting to be) rebuilt from the source of truth. */
  REBUILDING(7, "rebuilding"),
  /** A fresh start: the fences are read from the source of truth, each subtask its own buckets. */
  LOADING(8, "loading"),
  /**
   * Caught up, yet some owned buckets stayed mismatched past the bound: they are read again from
   * the source (or wait for their next try, with backoff, after a re-read that did not match or did
   * not reach the source). Locations of this subtask wait meanwhile.
   */
  REREADING(9, "re-reading");

  private final int code;
  private final String label;

  LoadPhase(int code, String label) {
    this.code = code;
    this.label = label;
  }

  public int code() {
    return code;
  }

  /** The phase of a gauge value, or null for a code this release does not know. */
  public static LoadPhase ofCode(int code) {
    for (LoadPhase phase : values()) {
      if (phase.code == code) {
        return phase;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    return label;
  }
}
