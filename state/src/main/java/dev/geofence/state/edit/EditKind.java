package dev.geofence.state.edit;

/** What a fence edit does. */
public enum EditKind {
  /** Creates or replaces the fence with the edit's geometry. */
  UPSERT,
  /** Removes the fence, leaving a tombstone with the edit's seq. */
  DELETE,
  /**
   * An upsert whose geometry was refused (and dead-lettered). It still consumes its seq, so the
   * next edit is not taken for a gap and the checksum still matches the source, but the previous
   * geometry, if any, stays in force.
   */
  REFUSED_UPSERT,
  /**
   * An upsert that leaves the geometry as it was: its tenant and dwell delay take effect, the
   * geometry in force stays. The change stream carries no geometry for an update that did not
   * change it where PostgreSQL keeps it out of line (over about 2 KB, some 130 vertices).
   */
  UPSERT_KEEPING_GEOMETRY
}
