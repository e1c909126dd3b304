package dev.geofence.state.edit;

/** Where an edit was read, which decides whether a jump in seq is a gap. */
public enum EditOrigin {
  /**
   * A read of the fence's current row (the CDC snapshot phase, a rebuild): it carries the full
   * state as of the read, so any seq above the stored one is simply newer.
   */
  SNAPSHOT,
  /** A change from the replication stream: seqs must follow on contiguously. */
  STREAM
}
