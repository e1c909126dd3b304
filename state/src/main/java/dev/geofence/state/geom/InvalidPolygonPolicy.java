package dev.geofence.state.geom;

/**
 * What to do with a polygon that parses but is not valid (self-intersecting ring, bow-tie,
 * overlapping parts). Real data is full of them, so neither choice ever drops one silently.
 */
public enum InvalidPolygonPolicy {
  /** Use JTS {@code GeometryFixer}'s result and report the repair as a warning. The default. */
  REPAIR,
  /** Refuse the geometry with {@link BadGeometryException.Reason#INVALID_POLYGON}. */
  REJECT
}
