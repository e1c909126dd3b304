package dev.geofence.state.geom;

/**
 * A raster of a box around a fence, {@code size} x {@code size} cells, each marked as wholly
 * inside, wholly outside, or crossed by the boundary. A point that falls in an inside or outside
 * cell is answered from the grid alone, without reading the fence's coordinates; only points in
 * boundary cells go on to the exact kernel. At a million fences the coordinates do not fit in any
 * cache, so this saves the memory traffic that otherwise dominates a check.
 *
 * <p>Two uses: an index ({@code FenceIndex}) keeps a {@value #COARSE} x {@value #COARSE} grid of
 * every fence (64 bytes) next to the fence's box, and a fence keeps its own grid, as fine as its
 * vertex count pays for ({@link #sizeFor}): a country outline of 200,000 vertices gets 512 x 512
 * cells (64 KB, a third of a byte per vertex), so even a point near its long boundary is mostly
 * answered without reading an edge.
 *
 * <p>Exactness: a cell is marked inside or outside only if no segment comes within a margin of it
 * (tested conservatively, segment by segment), so the whole cell, widened by the margin, lies on
 * one side of the boundary; the margin exceeds the rounding of the cell lookup, so the point's
 * cell is always one that truly contains it. This holds for any box that contains the fence.
 * Neighbouring clear cells share a side, so each connected group of clear cells is classified
 * once, by the exact kernel at one cell's centre.
 *
 * <p>Encoding: 2 bits per cell, {@code size * size / 32} longs from an offset in a caller's array;
 * 0 means "ask the kernel", {@link #UNBUILT} (never written by {@link #build}) is free for callers
 * that fill their grids lazily. A grid is filled before it is published, and a reader that races
 * with a lazy build sees each cell either final or 0, which is always safe. Stateless.
 */
public final class CoverageGrid {

  /** Cells per side of the coarse grid that callers keep beside a fence's box. */
  public static final int COARSE = 16;

  /** Longs of the coarse grid. */
  public static final int COARSE_WORDS = COARSE * COARSE / 32;

  public static final long OUTSIDE = 1;
  public static final long INSIDE = 2;
  /** A mark {@link #build} never writes: callers may fill a grid with it to mean "not built". */
  public static final long UNBUILT = 3;

  /** Fences with fewer vertices are cheap to test exactly; a grid would not pay for itself. */
  public static final int MIN_VERTICES = 24;

  private static final int MAX_SIZE = 512;

  private CoverageGrid() {}

  /**
   * The side of a fence's own grid: {@value #COARSE} cells below {@link EdgeBands#MIN_VERTICES}
   * vertices, then the power of two nearest below twice the square root of the vertex count (up
   * to 512 cells, 64 KB), so that the cells a long boundary crosses stay a small share of all
   * cells; halved while rastering the segments would visit more than a few dozen cells per vertex,
   * which only long segments across a fine grid do.
   */
  static int sizeFor(FenceGeometry fence) {
    int vertices = fence.vertexCount();
    if (vertices < EdgeBands.MIN_VERTICES) {
      return COARSE;
    }
    int size = Math.max(COARSE, Math.min(MAX_SIZE, Integer.highestOneBit((int) (2 * Math.sqrt(vertices)))));
    while (size > COARSE && rasterCost(fence, size) > 32L * vertices + 4L * size * size) {
      size /= 2;
    }
    return size;
  }

  /** Cells {@link #markSegment} visits for all segments at this size. */
  private static long rasterCost(FenceGeometry fence, int size) {
    double cellW = (fence.maxX() - fence.minX()) / size;
    double cellH = (fence.maxY() - fence.minY()) / size;
    double[] xy = fence.xy();
    int[] rings = fence.rings();
    long cells = 0;
    for (int r = 0; r < rings.length - 1; r++) {
      for (int i = 2 * rings[r]; i < 2 * (rings[r + 1] - 1); i += 2) {
        long w = Math.min(size, (long) (Math.abs(xy[i + 2] - xy[i]) / cellW) + 3);
        long h = Math.min(size, (long) (Math.abs(xy[i + 3] - xy[i + 1]) / cellH) + 3);
        cells += w * h;
      }
    }
    return cells;
  }

  /** The side of a grid from its length in longs (sides are powers of two). */
  static int sizeOf(long[] grid) {
    return 1 << ((Integer.numberOfTrailingZeros(grid.length) + 5) / 2);
  }

  /** Longs a grid of {@code size} x {@code size} cells occupies. */
  static int words(int size) {
    return size * size / 32;
  }

  /**
   * Writes the grid of the fence over the given box (which must contain the fence) into {@code
   * grid[offset ...]}. Leaves zeros, which send every point to the kernel, and returns false when
   * the box is too thin to raster. Callers skip fences under {@link #MIN_VERTICES} vertices.
   */
  public static boolean build(FenceGeometry fence, double minX, double minY, double maxX, double maxY, int size, long[] grid, int offset) {
    int words = words(size);
    java.util.Arrays.fill(grid, offset, offset + words, 0L);
    double cellW = (maxX - minX) / size;
    double cellH = (maxY - minY) / size;
    double marginX = margin(cellW, minX, maxX);
    double marginY = margin(cellH, minY, maxY);
    if (!(marginX < cellW / 4 && marginY < cellH / 4)) {
      return false;
    }
    boolean[] crossed = new boolean[size * size];
    double[] xy = fence.xy();
    int[] rings = fence.rings();
    for (int r = 0; r < rings.length - 1; r++) {
      for (int i = 2 * rings[r]; i < 2 * (rings[r + 1] - 1); i += 2) {
        markSegment(crossed, size, minX, minY, xy[i], xy[i + 1], xy[i + 2], xy[i + 3], cellW, cellH, marginX, marginY);
      }
    }
    int[] stack = new int[size * size];
    boolean[] seen = crossed.clone();
    for (int start = 0; start < size * size; start++) {
      if (seen[start]) {
        continue;
      }
      int cx = start % size;
      int cy = start / size;
      // A big fence answers this through its edge bands, so a fine grid's many groups stay cheap.
      long side =
          PointInFence.covers(fence, minX + (cx + 0.5) * cellW, minY + (cy + 0.5) * cellH, false)
              ? INSIDE
              : OUTSIDE;
      int top = 0;
      stack[top++] = start;
      seen[start] = true;
      while (top > 0) {
        int cell = stack[--top];
        grid[offset + (cell >>> 5)] |= side << ((cell & 31) << 1);
        int x = cell % size;
        int y = cell / size;
        if (x > 0 && !seen[cell - 1]) {
          seen[cell - 1] = true;
          stack[top++] = cell - 1;
        }
        if (x < size - 1 && !seen[cell + 1]) {
          seen[cell + 1] = true;
          stack[top++] = cell + 1;
        }
        if (y > 0 && !seen[cell - size]) {
          seen[cell - size] = true;
          stack[top++] = cell - size;
        }
        if (y < size - 1 && !seen[cell + size]) {
          seen[cell + size] = true;
          stack[top++] = cell + size;
        }
      }
    }
    return true;
  }

  /**
   * The cell's mark for a point inside the grid's box: {@link #INSIDE}, {@link #OUTSIDE}, 0 when
   * the kernel must decide, or whatever else the caller stored there.
   */
  public static long lookup(long[] grid, int offset, int size, double minX, double minY, double maxX, double maxY, double px, double py) {
    int cx = (int) ((px - minX) * size / (maxX - minX));
    int cy = (int) ((py - minY) * size / (maxY - minY));
    int cell = Math.min(cy, size - 1) * size + Math.min(cx, size - 1);
    return (grid[offset + (cell >>> 5)] >>> ((cell & 31) << 1)) & 3;
  }

  /**
   * A margin well above the rounding of {@link #lookup}: a few ulps of the coordinates' magnitude
   * (from the subtraction) plus a sliver of the cell (from the division).
   */
  private static double margin(double cell, double min, double max) {
    return 8 * Math.ulp(Math.max(Math.abs(min), Math.abs(max))) + cell * 1e-9;
  }

  private static void markSegment(
      boolean[] crossed, int size, double minX, double minY, double x1, double y1, double x2, double y2,
      double cellW, double cellH, double marginX, double marginY) {
    // One cell more on each side than the segment's box reaches, so rounding here cannot skip a
    // cell; the box test below keeps the extra cells honest.
    int fromX = clamp((int) Math.floor((Math.min(x1, x2) - minX) / cellW) - 1, size);
    int toX = clamp((int) Math.floor((Math.max(x1, x2) - minX) / cellW) + 1, size);
    int fromY = clamp((int) Math.floor((Math.min(y1, y2) - minY) / cellH) - 1, size);
    int toY = clamp((int) Math.floor((Math.max(y1, y2) - minY) / cellH) + 1, size);
    double dx = x2 - x1;
    double dy = y2 - y1;
    for (int cy = fromY; cy <= toY; cy++) {
      double lowY = minY + cy * cellH - marginY;
      double highY = minY + (cy + 1) * cellH + marginY;
      for (int cx = fromX; cx <= toX; cx++) {
        if (crossed[cy * size + cx]) {
          continue;
        }
        double lowX = minX + cx * cellW - marginX;
        double highX = minX + (cx + 1) * cellW + marginX;
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
          crossed[cy * size + cx] = true;
        }
      }
    }
  }

  private static int side(double dx, double dy, double px, double py) {
    double cross = dx * py - dy * px;
    return cross > 0 ? 1 : cross < 0 ? -1 : 0;
  }

  private static int clamp(int cell, int size) {
    return Math.max(0, Math.min(size - 1, cell));
  }
}
