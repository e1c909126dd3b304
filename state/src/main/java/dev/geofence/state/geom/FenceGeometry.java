package dev.geofence.state.geom;

import java.nio.DoubleBuffer;
import java.util.Arrays;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.LinearRing;
import org.locationtech.jts.geom.Polygon;

/**
 * An areal fence shape (Polygon or MultiPolygon, holes allowed) held on flat primitive arrays, so
 * that a million fences cost a few object headers each rather than one object per vertex.
 *
 * <p>Layout: {@code xy} holds the vertices of every ring as {@code x0, y0, x1, y1, ...}, each ring
 * closed (its last vertex repeats its first). Ring {@code r} spans vertices {@code
 * ringStarts[r] .. ringStarts[r + 1] - 1}. Polygon {@code p} spans rings {@code polygonStarts[p] ..
 * polygonStarts[p + 1] - 1}; its first ring is the shell, the others are holes. The envelope is
 * precomputed because every query tests it first.
 *
 * <p>Instances are only created from geometries that passed {@link FenceGeometryReader}'s checks
 * (finite, in range, closed rings, valid), which is what lets {@link PointInFence} decide coverage
 * by crossing parity over all rings. A fence builds what speeds up its checks on its first query:
 * a {@link CoverageGrid} (16 x 16 cells, finer for a big fence) and, from {@value
 * EdgeBands#MIN_VERTICES} vertices on, its {@link EdgeBands}, so that a check of a fence of n
 * vertices reads a few of its edges rather than all n. Immutable and thread-safe (the lazily
 * built parts are equal whoever builds them, and safe to see half-built); the arrays are never
 * exposed for writing.
 */
public final class FenceGeometry {

  private static final int[] SINGLE_POLYGON = {0, 1};

  private final double[] xy;
  private final int[] ringStarts;
  private final int[] polygonStarts;
  private final double minX;
  private final double minY;
  private final double maxX;
  private final double maxY;
  /**
   * The {@link CoverageGrid}, built on the first query that reaches this fence (most fences of a
   * restored index may never be asked, and bulk loads should not pay for them), or {@link
   * #NO_GRID} when the fence is too small to gain from one. A racing first query may build it
   * twice; both builds are equal, and a partly visible grid only sends points to the kernel.
   */
  private long[] grid;

  /**
   * The {@link EdgeBands} of a big fence, built on the first query that needs them; null until
   * then and for smaller fences. Its fields are final, so a racing reader sees it whole.
   */
  private EdgeBands edgeBands;

  private static final long[] NO_GRID = new long[0];

  private FenceGeometry(double[] xy, int[] ringStarts, int[] polygonStarts) {
    this.xy = xy;
    this.ringStarts = ringStarts;
    this.polygonStarts = polygonStarts;
    double x0 = Double.POSITIVE_INFINITY;
    double y0 = Double.POSITIVE_INFINITY;
    double x1 = Double.NEGATIVE_INFINITY;
    double y1 = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < xy.length; i += 2) {
      x0 = Math.min(x0, xy[i]);
      x1 = Math.max(x1, xy[i]);
      y0 = Math.min(y0, xy[i + 1]);
      y1 = Math.max(y1, xy[i + 1]);
    }
    this.minX = x0;
    this.minY = y0;
    this.maxX = x1;
    this.maxY = y1;
    this.grid = vertexCount() < CoverageGrid.MIN_VERTICES ? NO_GRID : null;
  }

  /**
   * Copies a JTS Polygon or MultiPolygon. The caller vouches for its validity: this is the last
   * step of {@link FenceGeometryReader}, and of decoding a fence already checked once.
   */
  static FenceGeometry fromJts(Geometry geometry) {
    int polygons = geometry.getNumGeometries();
    int rings = 0;
    for (int p = 0; p < polygons; p++) {
      rings += 1 + ((Polygon) geometry.getGeometryN(p)).getNumInteriorRing();
    }
    double[] xy = new double[2 * geometry.getNumPoints()];
    int[] ringStarts = new int[rings + 1];
    // The shared {0, 1} only for a lone ring: a polygon with holes spans all of its rings.
    int[] polygonStarts = rings == 1 ? SINGLE_POLYGON : new int[polygons + 1];
    int ring = 0;
    int vertex = 0;
    for (int p = 0; p < polygons; p++) {
      Polygon polygon = (Polygon) geometry.getGeometryN(p);
      if (polygonStarts != SINGLE_POLYGON) {
        polygonStarts[p] = ring;
      }
      for (int r = -1; r < polygon.getNumInteriorRing(); r++) {
        LinearRing linearRing = r < 0 ? polygon.getExteriorRing() : polygon.getInteriorRingN(r);
        ringStarts[ring++] = vertex;
        for (Coordinate c : linearRing.getCoordinates()) {
          xy[2 * vertex] = c.x;
          xy[2 * vertex + 1] = c.y;
          vertex++;
        }
      }
    }
    ringStarts[rings] = vertex;
    if (polygonStarts != SINGLE_POLYGON) {
      polygonStarts[polygons] = rings;
    }
    return new FenceGeometry(xy, ringStarts, polygonStarts);
  }

  /**
   * Rebuilds a geometry from its flat arrays, as written by a snapshot codec. Checks the structure
   * (offsets in bounds, rings closed with at least 4 vertices) so a corrupt snapshot fails here
   * rather than answering queries wrongly.
   *
   * @throws IllegalArgumentException if the arrays do not describe closed rings
   */
  public static FenceGeometry fromArrays(double[] xy, int[] ringStarts, int[] polygonStarts) {
    check(xy, ringStarts, polygonStarts);
    int[] polygons = polygon(polygonStarts);
    return new FenceGeometry(xy.clone(), ringStarts.clone(), polygons == SINGLE_POLYGON ? polygons : polygons.clone());
  }

  /**
   * {@link #fromArrays}, taking the arrays over rather than copying them: for a decoder that has
   * just allocated them and keeps no reference (a restore reads every fence through it).
   *
   * @throws IllegalArgumentException if the arrays do not describe closed rings
   */
  public static FenceGeometry ofOwnedArrays(double[] xy, int[] ringStarts, int[] polygonStarts) {
    check(xy, ringStarts, polygonStarts);
    return new FenceGeometry(xy, ringStarts, polygon(polygonStarts));
  }

  private static int[] polygon(int[] polygonStarts) {
    return Arrays.equals(polygonStarts, SINGLE_POLYGON) ? SINGLE_POLYGON : polygonStarts;
  }

  private static void check(double[] xy, int[] ringStarts, int[] polygonStarts) {
    int rings = ringStarts.length - 1;
    if (xy.length % 2 != 0 || rings < 1 || ringStarts[0] != 0 || ringStarts[rings] != xy.length / 2) {
      throw new IllegalArgumentException("ring offsets do not cover the coordinate array");
    }
    if (polygonStarts.length < 2
        || polygonStarts[0] != 0
        || polygonStarts[polygonStarts.length - 1] != rings) {
      throw new IllegalArgumentException("polygon offsets do not cover the rings");
    }
    for (int p = 1; p < polygonStarts.length; p++) {
      if (polygonStarts[p] <= polygonStarts[p - 1]) {
        throw new IllegalArgumentException("polygon " + (p - 1) + " has no shell");
      }
    }
    for (int r = 0; r < rings; r++) {
      int start = ringStarts[r];
      int end = ringStarts[r + 1] - 1;
      if (end - start < 3) {
        throw new IllegalArgumentException("ring " + r + " has fewer than 4 vertices");
      }
      if (xy[2 * start] != xy[2 * end] || xy[2 * start + 1] != xy[2 * end + 1]) {
        throw new IllegalArgumentException("ring " + r + " is not closed");
      }
    }
  }

  /**
   * Whether a fence of this many vertices is big: it builds edge bands and a grid finer than the
   * coarse one on its first query, which only a fence held as an object of its own can keep.
   */
  public static boolean isBig(int vertexCount) {
    return vertexCount >= EdgeBands.MIN_VERTICES;
  }

  /** Whether the point lies inside or on the boundary of this fence (PostGIS {@code ST_Covers}). */
  public boolean covers(double x, double y) {
    return PointInFence.covers(this, x, y, true);
  }

  /**
   * The same answer as {@link #covers}, for a caller that keeps a {@link CoverageGrid#COARSE}
   * grid of this fence itself and asks only about points that grid left open: skips this fence's
   * own grid unless the fence is big enough for a finer one.
   */
  public boolean coversNearBoundary(double x, double y) {
    return PointInFence.covers(this, x, y, isBig(vertexCount()));
  }

  /**
   * Reads one value from every cache line of this fence's coordinates and ring offsets, for a
   * caller about to check many fences: touching all of them first lets their cache misses
   * overlap, where checking one fence after another would wait for each in turn ({@code
   * FenceIndex}'s batch query does this for the fences its grids leave open). Returns a value
   * made of what it read, so that the reads cannot be optimized away.
   */
  public long prefetch() {
    long sum = ringStarts[0];
    for (int i = 0; i < xy.length; i += 8) {
      // Integer adds: a chain of floating-point adds would hold back the loads behind it.
      sum += Double.doubleToRawLongBits(xy[i]);
    }
    return sum;
  }

  public double minX() {
    return minX;
  }

  public double minY() {
    return minY;
  }

  public double maxX() {
    return maxX;
  }

  public double maxY() {
    return maxY;
  }

  /** Number of stored vertices, each ring's closing vertex included (as JTS counts them). */
  public int vertexCount() {
    return xy.length / 2;
  }

  public int ringCount() {
    return ringStarts.length - 1;
  }

  public int polygonCount() {
    return polygonStarts.length - 1;
  }

  /** Copy of the interleaved coordinates. */
  public double[] coordinates() {
    return xy.clone();
  }

  /**
   * Puts the interleaved coordinates ({@code 2 * vertexCount()} values) into {@code out}: for a
   * serializer, which would otherwise copy them twice per write.
   */
  public void putCoordinates(DoubleBuffer out) {
    out.put(xy);
  }

  /** Copy of the ring offsets (in vertices; one more entry than rings). */
  public int[] ringStarts() {
    return ringStarts.clone();
  }

  /** Copy of the polygon offsets (in rings; one more entry than polygons). */
  public int[] polygonStarts() {
    return polygonStarts.clone();
  }

  // Package-private views for the kernel, which must not copy on the hot path.
  double[] xy() {
    return xy;
  }

  int[] rings() {
    return ringStarts;
  }

  /** The coverage grid, built on first use; null when there is none. */
  long[] grid() {
    long[] g = grid;
    if (g == null) {
      int size = CoverageGrid.sizeFor(this);
      g = new long[CoverageGrid.words(size)];
      if (!CoverageGrid.build(this, minX, minY, maxX, maxY, size, g, 0)) {
        g = NO_GRID;
      }
      grid = g;
    }
    return g == NO_GRID ? null : g;
  }

  /** The edge bands of a big fence, built on first use; null for a smaller one. */
  EdgeBands edgeBands() {
    EdgeBands bands = edgeBands;
    if (bands == null && isBig(vertexCount())) {
      bands = EdgeBands.build(this);
      edgeBands = bands;
    }
    return bands;
  }

  @Override
  public boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (!(o instanceof FenceGeometry)) {
      return false;
    }
    FenceGeometry that = (FenceGeometry) o;
    return Arrays.equals(xy, that.xy)
        && Arrays.equals(ringStarts, that.ringStarts)
        && Arrays.equals(polygonStarts, that.polygonStarts);
  }

  @Override
  public int hashCode() {
    return 31 * Arrays.hashCode(xy) + Arrays.hashCode(ringStarts);
  }

  @Override
  public String toString() {
    return "FenceGeometry{polygons="
        + polygonCount()
        + ", rings="
        + ringCount()
        + ", vertices="
        + vertexCount()
        + ", envelope=["
        + minX
        + " "
        + minY
        + ", "
        + maxX
        + " "
        + maxY
        + "]}";
  }
}
