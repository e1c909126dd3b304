package dev.geofence.state.geom;

import dev.geofence.state.geom.BadGeometryException.Reason;

/**
 * The structural rules every ring of a fence must meet before JTS builds it: finite coordinates,
 * none or at least 4 points, and closed. Non-finite points are named first, because a NaN would
 * otherwise also make the ring look open.
 */
final class RingCheck {

  private RingCheck() {}

  /**
   * @param xy interleaved x, y of the ring's points
   * @param size number of points
   */
  static void check(double[] xy, int size) throws BadGeometryException {
    for (int i = 0; i < size; i++) {
      if (!Double.isFinite(xy[2 * i]) || !Double.isFinite(xy[2 * i + 1])) {
        throw new BadGeometryException(
            Reason.NON_FINITE_COORDINATE,
            "ring point " + i + " is (" + xy[2 * i] + " " + xy[2 * i + 1] + ")");
      }
    }
    if (size > 0 && size < 4) {
      throw new BadGeometryException(
          Reason.RING_TOO_SHORT, "a ring has " + size + " points, at least 4 are needed");
    }
    int last = 2 * (size - 1);
    if (size > 0 && (xy[0] != xy[last] || xy[1] != xy[last + 1])) {
      throw new BadGeometryException(
          Reason.RING_NOT_CLOSED,
          "a ring starts at (" + xy[0] + " " + xy[1] + ") but ends at (" + xy[last] + " " + xy[last + 1] + ")");
    }
  }
}
