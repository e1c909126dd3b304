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
 * <p>A segment whose y-range does not contain the point's y contributes nothing under this rule,
 * so the count over any set of segments that includes all those that do is the count over all of
 * them: this is what lets {@link EdgeBands} scan only the segments of one horizontal band.
 *
 * <p>The envelope is tested first, then the fence's {@link CoverageGrid}, which answers most
 * points without touching the coordinates, then a big fence's {@link EdgeBands}.
 *
 * <p>Odd parity over all rings at once is correct for valid geometry, where holes lie inside their
 * shell and the parts of a MultiPolygon do not overlap; {@link FenceGeometryReader} guarantees that
 * before a {@link FenceGeometry} exists. Stateless and thread-safe.
 */
public final class PointInFence {

  /** What {@link #crossings} returns for a point on one of the segments. */
  static final int ON_BOUNDARY = -1;

  private PointInFence() {}

  /**
   * @param useGrid whether to ask the fence's own coverage grid; callers that keep a coarse grid
   *     of their own skip it for fences whose grid would be no finer
   */
  static boolean covers(FenceGeometry fence, double px, double py, boolean useGrid) {
    if (px < fence.minX() || px > fence.maxX() || py < fence.minY() || py > fence.maxY()) {
      return false;
    }
    if (useGrid) {
      long[] grid = fence.grid();
      if (grid != null) {
        long mark = CoverageGrid.lookup(grid, 0, CoverageGrid.sizeOf(grid),
            fence.minX(), fence.minY(), fence.maxX(), fence.maxY(), px, py);
        if (mark != 0) {
          return mark == CoverageGrid.INSIDE;
        }
      }
    }
    EdgeBands bands = fence.edgeBands();
    return bands != null ? bands.covers(fence.xy(), px, py) : coversExactly(fence, px, py);
  }

  /** The ray-crossing test alone, over every segment of every ring. */
  static boolean coversExactly(FenceGeometry fence, double px, double py) {
    return coversRings(fence.xy(), fence.rings(), 0, fence.ringCount(), px, py);
  }

  /**
   * The ray-crossing test over rings {@code firstRing .. endRing - 1} of flat arrays laid out as
   * {@link FenceGeometry}'s are: for a caller that keeps many fences' rings in shared arrays and
   * reads them in place.
   */
  public static boolean coversRings(double[] xy, int[] ringStarts, int firstRing, int endRing, double px, double py) {
    int count = 0;
    for (int r = firstRing; r < endRing; r++) {
      // Only each segment's end vertex is compared with the point: the ring is closed, so its
      // first vertex is the end vertex of its last segment.
      int c = crossings(xy, 2 * ringStarts[r], 2 * (ringStarts[r + 1] - 1), px, py);
      if (c == ON_BOUNDARY) {
        return true;
      }
      count += c;
    }
    return (count & 1) == 1;
  }

  /**
   * Crossings of the ray from (px, py) to +x with the segments starting at the vertices whose x
   * lies at {@code xy[from], xy[from + 2], ...} before {@code to} (each segment ends at the next
   * vertex), or {@link #ON_BOUNDARY} if the point lies on one of them.
   */
  static int crossings(double[] xy, int from, int to, double px, double py) {
    int crossings = 0;
    for (int i = from; i < to; i += 2) {
      double y1 = xy[i + 1];
      double y2 = xy[i + 3];
      boolean above1 = y1 > py;
      if (above1 == (y2 > py)) {
        // Not straddling the ray's line, which is most segments: the point can lie on it only at
        // its end vertex or along it when it is horizontal at the point's y. (At its start
        // vertex, the point is the end vertex of the ring's previous segment.)
        if (y2 == py) {
          double x2 = xy[i + 2];
          if (px == x2 || (y1 == py && px >= Math.min(xy[i], x2) && px <= Math.max(xy[i], x2))) {
            return ON_BOUNDARY;
          }
        }
        continue;
      }
      double x1 = xy[i];
      double x2 = xy[i + 2];
      // Wholly left of the point: it cannot cross a ray going right, nor hold the point.
      if (x1 < px && x2 < px) {
        continue;
      }
      int orientation = CGAlgorithmsDD.orientationIndex(x1, y1, x2, y2, px, py);
      if (orientation == 0) {
        return ON_BOUNDARY;
      }
      // Count only when the point is left of the segment taken upwards.
      if (above1) {
        orientation = -orientation;
      }
      if (orientation > 0) {
        crossings++;
      }
    }
    return crossings;
  }
}
