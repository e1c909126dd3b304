package dev.geofence.state.geom;

/**
 * A coarse raster of a fence's envelope, {@value #SIZE} x {@value #SIZE} cells, each marked as
 * wholly inside, wholly outside, or crossed by the boundary. A point that falls in an inside or
 * outside cell is answered from 64 bytes, without reading the fence's coordinates; only points in
 * boundary cells go on to the exact kernel. At a million fences the coordinates do not fit in any
 * cache, so this saves the memory traffic that otherwise dominates a check.
 *
 * <p>Exactness: a cell is marked inside or outside only if no segment comes within a margin of it
 * (tested conservatively, segment by segment), so the whole cell, widened by the margin, lies on
 * one side of the boundary; the margin exceeds the rounding of the cell lookup, so the point's
 * cell is always one that truly contains it. Neighbouring clear cells share a side, so each
 * connected group of clear cells is classified once, by the exact kernel at one cell's centre.
 *
 * <p>Encoding: 2 bits per cell in 8 longs; 0 means "ask the kernel". The array is filled before
 * it is published, and a reader that races with a lazy build sees each cell either final or 0,
 * which is always safe.
 */
final class CoverageGrid {

  static final int SIZE = 16;
  static final long OUTSIDE = 1;
  static final long INSIDE = 2;

  /** Fences with fewer vertices are cheap to test exactly; a grid would not pay for itself. */
  static final int MIN_VERTICES = 24;

  private CoverageGrid() {}

  /** Builds the grid of a fence, or returns null when it is too small or too thin to raster. */
  static long[] build(FenceGeometry fence) {
    double width = fence.maxX() - fence.minX();
    double height = fence.maxY() - fence.minY();
    double cellW = width / SIZE;
    double cellH = height / SIZE;
    double marginX = margin(cellW, fence.minX(), fence.maxX());
    double marginY = margin(cellH, fence.minY(), fence.maxY());
    if (!(marginX < cellW / 4 && marginY < cellH / 4)) {
      return null;
    }
    boolean[] crossed = new boolean[SIZE * SIZE];
    double[] xy = fence.xy();
    int[] rings = fence.rings();
    for (int r = 0; r < rings.length - 1; r++) {
      for (int i = 2 * rings[r]; i < 2 * (rings[r + 1] - 1); i += 2) {
        markSegment(fence, crossed, xy[i], xy[i + 1], xy[i + 2], xy[i + 3], cellW, cellH, marginX, marginY);
      }
    }
    long[] grid = new long[SIZE * SIZE * 2 / 64];
    int[] stack = new int[SIZE * SIZE];
    boolean[] seen = crossed.clone();
    for (int start = 0; start < SIZE * SIZE; start++) {
      if (seen[start]) {
        continue;
      }
      int cx = start % SIZE;
      int cy = start / SIZE;
      long side =
          PointInFence.coversExactly(fence, fence.minX() + (cx + 0.5) * cellW, fence.minY() + (cy + 0.5) * cellH)
              ? INSIDE
              : OUTSIDE;
      int top = 0;
      stack[top++] = start;
      seen[start] = true;
      while (top > 0) {
        int cell = stack[--top];
        grid[cell >>> 5] |= side << ((cell & 31) << 1);
        int x = cell % SIZE;
        int y = cell / SIZE;
        if (x > 0 && !seen[cell - 1]) {
          seen[cell - 1] = true;
          stack[top++] = cell - 1;
        }
        if (x < SIZE - 1 && !seen[cell + 1]) {
          seen[cell + 1] = true;
          stack[top++] = cell + 1;
        }
        if (y > 0 && !seen[cell - SIZE]) {
          seen[cell - SIZE] = true;
          stack[top++] = cell - SIZE;
        }
        if (y < SIZE - 1 && !seen[cell + SIZE]) {
          seen[cell + SIZE] = true;
          stack[top++] = cell + SIZE;
        }
      }
    }
    return grid;
  }

  /**
   * The cell's mark for a point inside the fence's envelope: {@link #INSIDE}, {@link #OUTSIDE}, or
   * 0 when the kernel must decide.
   */
  static long lookup(long[] grid, FenceGeometry fence, double px, double py) {
    int cx = (int) ((px - fence.minX()) * SIZE / (fence.maxX() - fence.minX()));
    int cy = (int) ((py - fence.minY()) * SIZE / (fence.maxY() - fence.minY()));
    int cell = Math.min(cy, SIZE - 1) * SIZE + Math.min(cx, SIZE - 1);
    return (grid[cell >>> 5] >>> ((cell & 31) << 1)) & 3;
  }

  /**
   * A margin well above the rounding of {@link #lookup}: a few ulps of the coordinates' magnitude
   * (from the subtraction) plus a sliver of the cell (from the division).
   */
  private static double margin(double cell, double min, double max) {
    return 8 * Math.ulp(Math.max(Math.abs(min), Math.abs(max))) + cell * 1e-9;
  }

  private static void markSegment(
      FenceGeometry fence, boolean[] crossed, double x1, double y1, double x2, double y2,
      double cellW, double cellH, double marginX, double marginY) {
    // One cell more on each side than the segment's box reaches, so rounding here cannot skip a
    // cell; the box test below keeps the extra cells honest.
    int fromX = clamp((int) Math.floor((Math.min(x1, x2) - fence.minX()) / cellW) - 1);
    int toX = clamp((int) Math.floor((Math.max(x1, x2) - fence.minX()) / cellW) + 1);
    int fromY = clamp((int) Math.floor((Math.min(y1, y2) - fence.minY()) / cellH) - 1);
    int toY = clamp((int) Math.floor((Math.max(y1, y2) - fence.minY()) / cellH) + 1);
    double dx = x2 - x1;
    double dy = y2 - y1;
    for (int cy = fromY; cy <= toY; cy++) {
      double lowY = fence.minY() + cy * cellH - marginY;
      double highY = fence.minY() + (cy + 1) * cellH + marginY;
      for (int cx = fromX; cx <= toX; cx++) {
        if (crossed[cy * SIZE + cx]) {
          continue;
        }
        double lowX = fence.minX() + cx * cellW - marginX;
        double highX = fence.minX() + (cx + 1) * cellW + marginX;
        if (Math.max(x1, x2) < lowX || Math.min(x1, x2) > highX || Math.max(y1, y2) < lowY || Math.min(y1, y2) > highY) {
          continue;
        }
        // The segment's box overlaps the widened cell; the segment misses it only if all four
        // corners lie strictly on one side of its line.
        int sides = side(dx, dy, lowX - x1, lowY - y1)
            + side(dx, dy, highX - x1, lowY - y1)
            + side(dx, dy, lowX - x1, highY - y1)
            + side(dx, dy, highX - x1, highY - y1);
        if (sides != 4 && sides != -4) {
          crossed[cy * SIZE + cx] = true;
        }
      }
    }
  }

  private static int side(double dx, double dy, double px, double py) {
    double cross = dx * py - dy * px;
    return cross > 0 ? 1 : cross < 0 ? -1 : 0;
  }

  private static int clamp(int cell) {
    return Math.max(0, Math.min(SIZE - 1, cell));
  }
}
