package dev.geofence.state.geom;

/**
 * The edges of a big fence grouped by horizontal band, so that the ray-crossing test of a point
 * reads only the edges its horizontal line can meet instead of all of them: the role of JTS's
 * {@code IndexedPointInAreaLocator} (an interval tree over the edges' y-ranges), here as a flat
 * table that a query reaches with one multiplication.
 *
 * <p>The fence's y-range is cut into bands of equal height. Each band lists the runs of
 * consecutive edges (of one ring, in ring order) whose y-range overlaps it, so a query scans a
 * few short stretches of the coordinate array rather than picking edges one by one. The band of
 * a y is {@code floor((y - minY) * bands / height)}, which never decreases as y grows, so an edge
 * whose y-range contains the point's y is always listed in the point's band: the band holds every
 * edge the ray-crossing rule could count, and {@link PointInFence#crossings} over it gives the
 * exact answer of a scan over all edges.
 *
 * <p>Size: the number of bands is chosen from the fence's own shape, so that the edges listed
 * per band stay a small multiple of the times a horizontal line crosses the boundary (the
 * least any ray-crossing test must read) and the runs stay below about one per two vertices:
 * at most about 5 bytes per vertex. Built once, lazily, for fences of at least {@value
 * #MIN_VERTICES} vertices. Immutable and thread-safe.
 */
final class EdgeBands {

  /** Fences with fewer vertices scan all their edges about as fast, and keep no bands. */
  static final int MIN_VERTICES = 256;

  private final double minY;
  private final double scale;
  private final int lastBand;
  /** Band b's runs are {@code bandStarts[b] .. bandStarts[b + 1] - 1}. */
  private final int[] bandStarts;
  /** Per run, the coordinate index of its first edge's start and the end (exclusive) of its starts. */
  private final int[] runs;

  private EdgeBands(double minY, double scale, int lastBand, int[] bandStarts, int[] runs) {
    this.minY = minY;
    this.scale = scale;
    this.lastBand = lastBand;
    this.bandStarts = bandStarts;
    this.runs = runs;
  }

  static EdgeBands build(FenceGeometry fence) {
    double[] xy = fence.xy();
    int[] rings = fence.rings();
    double height = fence.maxY() - fence.minY();
    // How many times a horizontal line meets the boundary, on average: total rise and fall over
    // the height. Bands much thinner than the boundary's vertical steps would only repeat runs.
    double rise = 0;
    int edges = 0;
    for (int r = 0; r < rings.length - 1; r++) {
      for (int i = 2 * rings[r]; i < 2 * (rings[r + 1] - 1); i += 2) {
        rise += Math.abs(xy[i + 3] - xy[i + 1]);
        edges++;
      }
    }
    double passes = Math.max(2, rise / height);
    int bands = (int) Math.max(1, Math.min(edges / 2.0, edges / (2 * passes)));
    double scale = height > 0 ? bands / height : 0;
    EdgeBands sizing = new EdgeBands(fence.minY(), scale, bands - 1, null, null);

    // Two passes over the edges: count each band's runs, then fill them. A run goes on while
    // the band's last run ends where the next edge starts.
    int[] bandStarts = new int[bands + 1];
    int[] runs = null;
    int[] next = null;
    for (int pass = 0; pass < 2; pass++) {
      int[] lastEnd = new int[bands];
      java.util.Arrays.fill(lastEnd, -1);
      for (int r = 0; r < rings.length - 1; r++) {
        for (int i = 2 * rings[r]; i < 2 * (rings[r + 1] - 1); i += 2) {
          int low = sizing.band(Math.min(xy[i + 1], xy[i + 3]));
          int high = sizing.band(Math.max(xy[i + 1], xy[i + 3]));
          for (int b = low; b <= high; b++) {
            boolean starts = lastEnd[b] != i;
            if (next == null) {
              bandStarts[b + 1] += starts ? 1 : 0;
            } else {
              if (starts) {
                runs[2 * next[b]++] = i;
              }
              runs[2 * next[b] - 1] = i + 2;
            }
            lastEnd[b] = i + 2;
          }
        }
      }
      if (next == null) {
        for (int b = 0; b < bands; b++) {
          bandStarts[b + 1] += bandStarts[b];
        }
        runs = new int[2 * bandStarts[bands]];
        next = java.util.Arrays.copyOf(bandStarts, bands);
      }
    }
    return new EdgeBands(fence.minY(), scale, bands - 1, bandStarts, runs);
  }

  /** The band of a y in the fence's y-range. */
  private int band(double y) {
    return Math.min(lastBand, (int) ((y - minY) * scale));
  }

  /** Whether the fence covers the point, which must lie inside the fence's envelope. */
  boolean covers(double[] xy, double px, double py) {
    int b = band(py);
    int count = 0;
    for (int k = bandStarts[b]; k < bandStarts[b + 1]; k++) {
      int c = PointInFence.crossings(xy, runs[2 * k], runs[2 * k + 1], px, py);
      if (c == PointInFence.ON_BOUNDARY) {
        return true;
      }
      count += c;
    }
    return (count & 1) == 1;
  }
}
