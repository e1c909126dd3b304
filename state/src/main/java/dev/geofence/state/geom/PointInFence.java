package dev.geofence.state.geom;

import org.locationtech.jts.algorithm.CGAlgorithmsDD;

/**
 * The exact containment kernel: decides whether a point lies in a fence's interior or on its
 * boundary, which is PostGIS {@code ST_Covers} and JTS {@code covers} for a point.
 *
 * <p>It counts the crossings of a horizontal ray from the point to +x with every ring of the fence,
 * following JTS's {@code RayCrossingCounter} rule for each segment: a segment counts when it
 * straddles the ray's line, with its upper endpoint strictly above and its lower endpoint on or
 * below, so a ray through a shared vertex is counted once. The side of the point is decided by
 * {@link CGAlgorithmsDD#orientationIndex(double, double, double, double, double, double)}, a
 * floating-point filter falling back to double-double arithmetic, so the answer is exact for the
 * stored coordinates: a point on an edge or vertex is reported as covered, never lost to rounding.
 *
 * <p>The envelope is tested first, then the fence's {@link CoverageGrid}, which answers most
 * points without touching the coordinates.
 *
 * <p>Odd parity over all rings at once is correct for valid geometry, where holes lie inside their
 * shell and the parts of a MultiPolygon do not overlap; {@link FenceGeometryReader} guarantees that
 * before a {@link FenceGeometry} exists. Stateless and thread-safe.
 */
final class PointInFence {

  private PointInFence() {}

  static boolean covers(FenceGeometry fence, double px, double py) {
    if (px < fence.minX() || px > fence.maxX() || py < fence.minY() || py > fence.maxY()) {
      return false;
    }
    long[] grid = fence.grid();
    if (grid != null) {
      long mark = CoverageGrid.lookup(grid, fence, px, py);
      if (mark != 0) {
        return mark == CoverageGrid.INSIDE;
      }
    }
    return coversExactly(fence, px, py);
  }

  /** The ray-crossing test alone, over every segment; the point must be inside the envelope. */
  static boolean coversExactly(FenceGeometry fence, double px, double py) {
    double[] xy = fence.xy();
    int[] ringStarts = fence.rings();
    int crossings = 0;
    for (int r = 0; r < ringStarts.length - 1; r++) {
      int last = 2 * (ringStarts[r + 1] - 1);
      for (int i = 2 * ringStarts[r]; i < last; i += 2) {
        double x1 = xy[i];
        double y1 = xy[i + 1];
        double x2 = xy[i + 2];
        double y2 = xy[i + 3];
        // Wholly left of the point: it cannot cross a ray going right.
        if (x1 < px && x2 < px) {
          continue;
        }
        // Only the segment's end vertex is compared: each ring is closed, so its first vertex is
        // the end vertex of its last segment.
        if (px == x2 && py == y2) {
          return true;
        }
        if (y1 == py && y2 == py) {
          if (px >= Math.min(x1, x2) && px <= Math.max(x1, x2)) {
            return true;
          }
          continue;
        }
        if ((y1 > py && y2 <= py) || (y2 > py && y1 <= py)) {
          int orientation = CGAlgorithmsDD.orientationIndex(x1, y1, x2, y2, px, py);
          if (orientation == 0) {
            return true;
          }
          // Count only when the point is left of the segment taken upwards.
          if (y2 < y1) {
            orientation = -orientation;
          }
          if (orientation > 0) {
            crossings++;
          }
        }
      }
    }
    return (crossings & 1) == 1;
  }
}
