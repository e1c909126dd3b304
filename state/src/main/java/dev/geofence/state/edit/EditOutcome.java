package dev.geofence.state.edit;

/** The effect of one (possibly coalesced) edit against the stored version of its fence. */
public enum EditOutcome {
  /** seq == stored + 1 (or newer, from a snapshot read): applied. */
  APPLIED,
  /**
   * seq > stored + 1 in the stream: applied, since an upsert carries the full state, but the
   * stream lost an edit and can no longer be trusted; the index must be rebuilt.
   */
  GAP,
  /** seq == stored: a redelivery; no effect. */
  DUPLICATE,
  /** seq < stored: an older version arriving late; no effect. */
  STALE;

  public boolean changesState() {
    return this == APPLIED || this == GAP;
  }
}
