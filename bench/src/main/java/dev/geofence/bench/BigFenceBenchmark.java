package dev.geofence.bench;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.shape.Shapes;
import java.lang.ref.Reference;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.locationtech.jts.algorithm.locate.IndexedPointInAreaLocator;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.Location;
import org.locationtech.jts.geom.Polygon;

/**
 * Big fences (city and country outlines of 10^3 to 10^5 vertices): the kernel's check of one
 * fence, {@link FenceGeometry#covers} (envelope, the fence's own coverage grid, then its edge
 * bands), against JTS's {@link IndexedPointInAreaLocator} on the same fence and the same 20,000
 * points spread uniformly over its box, one core, the points' answers compared one by one.
 *
 * <p>Two fences per vertex count N: a star of 97 lobes (radius {@code R (0.75 + 0.25 cos 97t)}, R
 * half a degree) sampled at N evenly spaced angles, so its boundary winds through most of its box
 * and a horizontal line crosses it up to a few hundred times; and the same star made rough, as a
 * coastline is, each radius moved by up to 2 % at random, so that near the boundary a horizontal
 * line crosses thousands of short edges. Reported per side: the first query (which builds the
 * per-fence structures both sides make lazily), checks per second after it ({@link Measure}), and
 * the heap those structures take per vertex, measured over enough copies of the fence to hold
 * about four million vertices.
 */
final class BigFenceBenchmark {

  static final int[] DEFAULT_VERTICES = {1_000, 20_000, 200_000};

  private static final int POINTS = 20_000;
  private static final int LOBES = 97;
  private static final long COPY_VERTICES = 4_000_000;
  /** The two shapes: smooth lobes, and lobes roughened by up to 2 % of the radius. */
  private static final double[] ROUGHNESS = {0, 0.02};

  private BigFenceBenchmark() {}

  static void run(int[] vertexCounts, double seconds, int windows) {
    System.out.printf(Locale.ROOT, "Big fences: FenceGeometry.covers vs JTS IndexedPointInAreaLocator, %,d points in the fence's box%n", POINTS);
    GeometryFactory factory = new GeometryFactory();
    List<String> rows = new ArrayList<>();
    for (int n : vertexCounts) {
      for (double roughness : ROUGHNESS) {
        String shape = roughness == 0 ? "97 lobes" : "97 lobes, rough";
        Polygon polygon = lobedStar(factory, n, roughness);
        double[] xs = new double[POINTS];
        double[] ys = new double[POINTS];
        SplittableRandom random = new SplittableRandom(n);
        var env = polygon.getEnvelopeInternal();
        for (int i = 0; i < POINTS; i++) {
          xs[i] = env.getMinX() + random.nextDouble() * env.getWidth();
          ys[i] = env.getMinY() + random.nextDouble() * env.getHeight();
        }

        FenceGeometry fence = IndexBenchmark.flat(polygon);
        long t0 = System.nanoTime();
        fence.covers(xs[0], ys[0]);
        double oursFirst = (System.nanoTime() - t0) / 1e6;
        IndexedPointInAreaLocator locator = new IndexedPointInAreaLocator(polygon);
        t0 = System.nanoTime();
        locator.locate(new Coordinate(xs[0], ys[0]));
        double jtsFirst = (System.nanoTime() - t0) / 1e6;

        int differ = 0;
        int inside = 0;
        Coordinate c = new Coordinate();
        for (int i = 0; i < POINTS; i++) {
          c.x = xs[i];
          c.y = ys[i];
          boolean expected = locator.locate(c) != Location.EXTERIOR;
          differ += fence.covers(xs[i], ys[i]) == expected ? 0 : 1;
          inside += expected ? 1 : 0;
        }
        if (differ > 0) {
          throw new IllegalStateException(differ + " answers differ from JTS at " + n + " vertices: the figures are void");
        }
        int[] cursor = {0};
        Measure.Rate ours = Measure.rate(() -> {
          int hits = 0;
          for (int k = 0; k < 1024; k++) {
            int i = cursor[0]++ % POINTS;
            hits += fence.covers(xs[i], ys[i]) ? 1 : 0;
          }
          return 1024 + (hits >>> 31);
        }, seconds, windows);
        Measure.Rate jts = Measure.rate(() -> {
          Coordinate p = new Coordinate();
          int hits = 0;
          for (int k = 0; k < 1024; k++) {
            int i = cursor[0]++ % POINTS;
            p.x = xs[i];
            p.y = ys[i];
            hits += locator.locate(p) != Location.EXTERIOR ? 1 : 0;
          }
          return 1024 + (hits >>> 31);
        }, seconds, windows);
        double[] bytes = structureBytesPerVertex(polygon, n, xs, ys);
        System.out.printf(Locale.ROOT, "%,d vertices, %s (%.0f %% of the points inside): ours first query %.2f ms, %s, %.2f B/vertex; "
                + "JTS first query %.2f ms, %s, %.2f B/vertex; answers compared on %,d points: 0 differ%n",
            n, shape, 100.0 * inside / POINTS, oursFirst, IndexBenchmark.describe(ours), bytes[0], jtsFirst, IndexBenchmark.describe(jts),
            bytes[1], POINTS);
        rows.add(String.format(Locale.ROOT, "| %,d | %s | FenceGeometry.covers (grid, edge bands) | %.2f | %,.0f | %,.0f | %.2f | %.1fx |",
            n, shape, oursFirst, ours.median(), ours.perCpuSecond(), bytes[0], ours.median() / jts.median()));
        rows.add(String.format(Locale.ROOT, "| %,d | %s | JTS IndexedPointInAreaLocator | %.2f | %,.0f | %,.0f | %.2f | 1x |",
            n, shape, jtsFirst, jts.median(), jts.perCpuSecond(), bytes[1]));
      }
    }
    System.out.println();
    System.out.println("| vertices | shape | check | first query ms (builds) | checks/s | per CPU-second | structures B/vertex | vs JTS |");
    System.out.println("|---:|---|---|---:|---:|---:|---:|---:|");
    rows.forEach(System.out::println);
  }

  /**
   * Heap per vertex of what each side builds on its first query, over copies of the fence: the
   * heap after the first queries less the heap of the bare geometries.
   */
  private static double[] structureBytesPerVertex(Polygon polygon, int n, double[] xs, double[] ys) {
    int copies = (int) Math.max(1, COPY_VERTICES / n);
    long vertices = (long) copies * polygon.getNumPoints();
    FenceGeometry template = IndexBenchmark.flat(polygon);
    FenceGeometry[] fences = new FenceGeometry[copies];
    for (int i = 0; i < copies; i++) {
      fences[i] = FenceGeometry.fromArrays(template.coordinates(), template.ringStarts(), template.polygonStarts());
    }
    long bare = Measure.usedHeap();
    for (FenceGeometry fence : fences) {
      fence.covers(xs[0], ys[0]);
    }
    double ours = (double) (Measure.usedHeap() - bare) / vertices;
    Reference.reachabilityFence(fences);
    fences = null;

    Polygon[] polygons = new Polygon[copies];
    for (int i = 0; i < copies; i++) {
      polygons[i] = (Polygon) polygon.copy();
    }
    IndexedPointInAreaLocator[] locators = new IndexedPointInAreaLocator[copies];
    bare = Measure.usedHeap();
    for (int i = 0; i < copies; i++) {
      locators[i] = new IndexedPointInAreaLocator(polygons[i]);
      locators[i].locate(new Coordinate(xs[0], ys[0]));
    }
    double jts = (double) (Measure.usedHeap() - bare) / vertices;
    Reference.reachabilityFence(locators);
    Reference.reachabilityFence(polygons);
    return new double[] {ours, jts};
  }

  private static Polygon lobedStar(GeometryFactory factory, int n, double roughness) {
    return new Shapes(factory, 7).lobedStar(10, 50, 0.5, n, LOBES, roughness);
  }
}
