package dev.geofence.bench;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.testing.Shapes;
import java.lang.ref.Reference;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.Point;
import org.locationtech.jts.geom.Polygon;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
import org.locationtech.jts.index.strtree.STRtree;

/**
 * The fence index against the JTS baseline ({@code STRtree} over {@code PreparedGeometry}), side
 * by side in one run: build time from fences already in memory, single-thread point-check
 * throughput, and heap bytes per stored vertex. Both answer the same queries over the same fences,
 * and the run reports whether their answers agree.
 *
 * <p>Fences are star-shaped polygons of {@code --vertices} vertices (radius 200 m to 2 km) spread
 * over a square that grows with their number, so a random point is covered by about one fence at
 * every size. The first pass over the query points is reported apart from the steady state, since
 * both indexes build per-fence structures on first use. Run with {@code bench/run index [--sizes 10000,100000,1200000] [--vertices 96]
 * [--seconds 5]}.
 */
public final class IndexBenchmark {

  private static final double MIN_RADIUS = 0.002;
  private static final double MAX_RADIUS = 0.02;
  private static final int QUERY_POINTS = 1 << 20;
  private static final int AGREEMENT_SAMPLE = 20_000;

  private final int fences;
  private final int vertices;
  private final double seconds;
  private final double side;
  private final GeometryFactory factory = new GeometryFactory();

  private IndexBenchmark(int fences, int vertices, double seconds) {
    this.fences = fences;
    this.vertices = vertices;
    this.seconds = seconds;
    // Mean area of a star of radii uniform in [rMin, rMax] is about pi * E[r^2] * 0.9.
    double meanSquare = (MAX_RADIUS * MAX_RADIUS + MAX_RADIUS * MIN_RADIUS + MIN_RADIUS * MIN_RADIUS) / 3;
    this.side = Math.sqrt(fences * Math.PI * meanSquare * 0.9);
  }

  public static void main(String[] args) {
    int[] sizes = {10_000, 100_000, 1_200_000};
    int vertices = 96;
    double seconds = 5;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--sizes":
          String[] parts = args[++i].split(",");
          sizes = new int[parts.length];
          for (int p = 0; p < parts.length; p++) {
            sizes[p] = Integer.parseInt(parts[p].strip().replace("_", ""));
          }
          break;
        case "--vertices":
          vertices = Integer.parseInt(args[++i]);
          break;
        case "--seconds":
          seconds = Double.parseDouble(args[++i]);
          break;
        default:
          throw new IllegalArgumentException(
              "unknown option " + args[i] + "; use --sizes N,N,... --vertices N --seconds S");
      }
    }
    System.out.printf(
        Locale.ROOT,
        "Fence index vs JTS STRtree + PreparedGeometry; %d vertices per fence; java %s; %d cores; max heap %d MiB%n",
        vertices, System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
        Runtime.getRuntime().maxMemory() >> 20);
    List<String> rows = new ArrayList<>();
    for (int size : sizes) {
      rows.addAll(new IndexBenchmark(size, vertices, seconds).run());
    }
    System.out.println();
    System.out.println(
        "| fences | index | build s | first-pass checks/s | steady checks/s, 1 thread | hits/check | heap B/vertex built | after queries | vs JTS: steady throughput | build speed | memory |");
    System.out.println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    rows.forEach(System.out::println);
  }

  /** What one index measured. */
  private static final class Result {
    double buildSeconds;
    double coldChecksPerSecond;
    double checksPerSecond;
    double hitsPerCheck;
    long heapBuilt;
    long heapQueried;
    int[] answers;
  }

  private List<String> run() {
    double[] queries = queryPoints();
    long[] storedVertices = {0};
    // Each index lives only inside its own method, so each heap figure stands alone.
    Result ours = measureOurs(queries, storedVertices);
    progress("geofence", ours, storedVertices[0]);
    Result jts = measureJts(queries);
    progress("jts", jts, storedVertices[0]);
    int disagreements = 0;
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      disagreements += ours.answers[q] == jts.answers[q] ? 0 : 1;
    }
    System.out.printf(Locale.ROOT, "  answers compared on %,d points: %d differ%n", AGREEMENT_SAMPLE, disagreements);
    if (disagreements > 0) {
      throw new IllegalStateException(disagreements + " answers differ from JTS: the figures are void");
    }
    long v = storedVertices[0];
    List<String> rows = new ArrayList<>();
    rows.add(String.format(
        Locale.ROOT, "| %,d | geofence | %.2f | %,.0f | %,.0f | %.2f | %.1f | %.1f | %.1fx | %.1fx | %.2fx |",
        fences, ours.buildSeconds, ours.coldChecksPerSecond, ours.checksPerSecond, ours.hitsPerCheck,
        (double) ours.heapBuilt / v, (double) ours.heapQueried / v,
        ours.checksPerSecond / jts.checksPerSecond, jts.buildSeconds / ours.buildSeconds,
        (double) ours.heapQueried / jts.heapQueried));
    rows.add(String.format(
        Locale.ROOT, "| %,d | JTS STRtree + PreparedGeometry | %.2f | %,.0f | %,.0f | %.2f | %.1f | %.1f | 1x | 1x | 1x |",
        fences, jts.buildSeconds, jts.coldChecksPerSecond, jts.checksPerSecond, jts.hitsPerCheck,
        (double) jts.heapBuilt / v, (double) jts.heapQueried / v));
    return rows;
  }

  private Result measureOurs(double[] queries, long[] storedVertices) {
    Result result = new Result();
    long heapBefore = usedHeap();
    FenceGeometry[] geometries = new FenceGeometry[fences];
    Shapes shapes = new Shapes(factory, 1);
    for (int i = 0; i < fences; i++) {
      geometries[i] = flat(shape(shapes));
      storedVertices[0] += geometries[i].vertexCount();
    }
    long t0 = System.nanoTime();
    FenceIndex index = new FenceIndex();
    for (int i = 0; i < fences; i++) {
      index.upsert("fence-" + i, null, geometries[i]);
    }
    index.prepareForQuery();
    result.buildSeconds = (System.nanoTime() - t0) / 1e9;
    geometries = null;
    result.heapBuilt = usedHeap() - heapBefore;
    measure(result, (x, y) -> {
      int[] count = {0};
      index.forEachCovering(x, y, null, id -> count[0]++);
      return count[0];
    }, queries);
    result.heapQueried = usedHeap() - heapBefore;
    // Keeps the index alive through the heap reading; the JIT may otherwise free it before.
    Reference.reachabilityFence(index);
    return result;
  }

  private Result measureJts(double[] queries) {
    Result result = new Result();
    long heapBefore = usedHeap();
    Polygon[] polygons = new Polygon[fences];
    Shapes shapes = new Shapes(factory, 1);
    for (int i = 0; i < fences; i++) {
      polygons[i] = shape(shapes);
    }
    long t0 = System.nanoTime();
    STRtree tree = new STRtree();
    for (Polygon polygon : polygons) {
      tree.insert(polygon.getEnvelopeInternal(), PreparedGeometryFactory.prepare(polygon));
    }
    tree.build();
    result.buildSeconds = (System.nanoTime() - t0) / 1e9;
    polygons = null;
    result.heapBuilt = usedHeap() - heapBefore;
    measure(result, (x, y) -> jtsCount(tree, x, y), queries);
    // PreparedGeometry builds its point locators lazily, on first use: they count too.
    result.heapQueried = usedHeap() - heapBefore;
    Reference.reachabilityFence(tree);
    return result;
  }

  private Polygon shape(Shapes shapes) {
    SplittableRandom random = shapes.random();
    double cx = random.nextDouble() * side;
    double cy = random.nextDouble() * side;
    double rMax = MIN_RADIUS + random.nextDouble() * (MAX_RADIUS - MIN_RADIUS);
    return shapes.star(cx, cy, 0.8 * rMax, rMax, vertices);
  }

  private static FenceGeometry flat(Polygon polygon) {
    Coordinate[] coordinates = polygon.getExteriorRing().getCoordinates();
    double[] xy = new double[2 * coordinates.length];
    for (int i = 0; i < coordinates.length; i++) {
      xy[2 * i] = coordinates[i].x;
      xy[2 * i + 1] = coordinates[i].y;
    }
    return FenceGeometry.fromArrays(xy, new int[] {0, coordinates.length}, new int[] {0, 1});
  }

  private double[] queryPoints() {
    SplittableRandom random = new SplittableRandom(99);
    double[] points = new double[2 * QUERY_POINTS];
    for (int i = 0; i < points.length; i++) {
      points[i] = random.nextDouble() * side;
    }
    return points;
  }

  private int jtsCount(STRtree tree, double x, double y) {
    Point point = factory.createPoint(new Coordinate(x, y));
    int count = 0;
    for (Object candidate : tree.query(new Envelope(x, x, y, y))) {
      if (((PreparedGeometry) candidate).covers(point)) {
        count++;
      }
    }
    return count;
  }

  private interface Check {
    int hits(double x, double y);
  }

  /**
   * One pass over all query points first, timed as the cold rate: both indexes build per-fence
   * structures lazily (our coverage grids, JTS's point locators) on a fence's first query. Then
   * as many steady-state checks as fit in the configured time.
   */
  private void measure(Result result, Check check, double[] points) {
    result.answers = new int[AGREEMENT_SAMPLE];
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      result.answers[q] = check.hits(points[2 * q], points[2 * q + 1]);
    }
    long start = System.nanoTime();
    for (int q = 0; q < QUERY_POINTS; q++) {
      check.hits(points[2 * q], points[2 * q + 1]);
    }
    result.coldChecksPerSecond = QUERY_POINTS / ((System.nanoTime() - start) / 1e9);
    long[] steady = run(check, points, (long) (seconds * 1e9));
    result.checksPerSecond = steady[0] / (steady[2] / 1e9);
    result.hitsPerCheck = (double) steady[1] / steady[0];
  }

  private static long[] run(Check check, double[] points, long nanos) {
    long checks = 0;
    long hits = 0;
    long start = System.nanoTime();
    long elapsed;
    int q = 0;
    do {
      for (int i = 0; i < 4096; i++) {
        hits += check.hits(points[2 * q], points[2 * q + 1]);
        q = (q + 1) & (QUERY_POINTS - 1);
      }
      checks += 4096;
      elapsed = System.nanoTime() - start;
    } while (elapsed < nanos);
    return new long[] {checks, hits, elapsed};
  }

  private void progress(String name, Result r, long storedVertices) {
    System.out.printf(
        Locale.ROOT,
        "%,d fences, %s: build %.2f s, first pass %,.0f checks/s, steady %,.0f checks/s, %.2f hits/check, %.1f B/vertex built, %.1f after queries%n",
        fences, name, r.buildSeconds, r.coldChecksPerSecond, r.checksPerSecond, r.hitsPerCheck,
        (double) r.heapBuilt / storedVertices, (double) r.heapQueried / storedVertices);
  }

  private static long usedHeap() {
    Runtime runtime = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    // Full collections until the figure settles, so garbage is not counted as retained.
    for (int i = 0; i < 5; i++) {
      System.gc();
      long now = runtime.totalMemory() - runtime.freeMemory();
      if (Math.abs(used - now) < (1 << 20)) {
        return now;
      }
      used = now;
    }
    return used;
  }
}
