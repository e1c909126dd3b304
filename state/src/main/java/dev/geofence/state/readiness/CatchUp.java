package dev.geofence.state.readiness;

/**
 * How a restored subtask that the gap check found covered brings its fences up to the source
 * (docs/design.md#catch-up): by replaying the change stream from its restored position, or by
 * reading the fences that changed since then; {@link #AUTO} lets {@link CatchUpChoice} take the
 * cheaper.
 */
public enum CatchUp {
  /** The cheaper path by the estimates, the read only where no location older than it will come. */
  AUTO,
  /** Replay every edit since the restored position. */
  REPLAY,
  /** Read the fences whose seq differs from the restored one; locations stamped before the read are dead letters. */
  READ;

  /** The word logs, metrics and {@code hydration_history} use. */
  public String label() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }
}
