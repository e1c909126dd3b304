package dev.geofence.state.geom;

/**
 * A fence geometry that cannot be used, with the {@link Reason} it was refused. The message names
 * the reason and the detail, in words meant for a dead-letter row.
 */
public final class BadGeometryException extends Exception {

  private static final long serialVersionUID = 1L;

  /** Why a geometry was refused; stable names, written to dead-letter rows. */
  public enum Reason {
    /** The bytes or text are not WKB, EWKB, WKT or GeoJSON of a geometry. */
    UNPARSEABLE,
    /** The geometry has no points. */
    EMPTY,
    /** The geometry is a point, a line or a collection: it cannot contain anything. */
    NOT_AREAL,
    /** A coordinate is NaN or infinite. */
    NON_FINITE_COORDINATE,
    /** A longitude outside [-180, 180] or a latitude outside [-90, 90]. */
    OUT_OF_RANGE_COORDINATE,
    /** The geometry declares a spatial reference other than WGS 84 (SRID 4326). */
    UNSUPPORTED_SRID,
    /** A ring with fewer than 4 points. */
    RING_TOO_SHORT,
    /** A ring whose last point differs from its first. */
    RING_NOT_CLOSED,
    /** More vertices than the configured cap. */
    TOO_MANY_VERTICES,
    /** Self-intersecting or otherwise invalid, refused by the {@code reject} policy. */
    INVALID_POLYGON,
    /** Invalid, and nothing areal was left after repair. */
    UNREPAIRABLE
  }

  private final Reason reason;

  public BadGeometryException(Reason reason, String detail) {
    super(reason + ": " + detail);
    this.reason = reason;
  }

  public Reason reason() {
    return reason;
  }
}
