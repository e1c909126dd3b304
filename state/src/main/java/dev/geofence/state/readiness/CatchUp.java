package dev.geofence.state.readiness;

/**
 * How a restored subtask that the gap check found covered brings its fences up to the source
 * (docs/design.md#catch-up): by replaying the change stream from its restored position, by
 * reading the fences that changed since then, or by loading its buckets anew as a fresh start
 * does, its restored fences set aside; {@link #AUTO} lets {@link CatchUpChoice} take the cheapest.
 */
public enum CatchUp {
  /** The cheapest path by the estimates, a read or a load only where no location older than it will come. */
  AUTO,
  /** Replay every edit since the restored position. */
  REPLAY,
  /** Read the fences whose seq differs from the restored one; locations stamped before the read are dead letters. */
  READ,
  /**
   * Load every fence of the subtask's buckets anew, as a fresh start does, the restored fences set
   * aside first (their members kept); locations stamped before the load are dead letters.
   */
  LOAD;

  /** The word logs, metrics and {@code hydration_history} use. */
  public String label() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }
}
