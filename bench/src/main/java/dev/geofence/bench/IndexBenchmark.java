package dev.geofence.bench;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.index.PackedRTree;
import dev.geofence.state.shape.Shapes;
import dev.geofence.state.time.StayRules;
import java.lang.ref.Reference;
import java.util.ArrayList;
import java.util.Arrays;
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
 * by side in one run: build time from fences already in memory, single-thread point checks per
 * second, and heap bytes per stored vertex. Both answer the same queries over the same fences, and
 * the run fails if any answer differs.
 *
 * <p>Fences are star-shaped polygons of {@code --fence-vertices} vertices (radius 200 m to 2 km)
 * spread over a square that grows with their number, so a random point is covered by about 0.9
 * fences at every size. Both sides get the same 1,048,576 uniformly random points in the same
 * order, the same warm-up (a check of the answers, then one timed pass over all points, in which
 * both build per-fence structures lazily: our coverage grids, JTS's point locators) and the same
 * timed windows ({@link Measure}), after a discarded run of both at 20,000 fences that warms the JIT
 * for every measured path. Ours is measured through the single-point query and through
 * the batch query at batch sizes 1, 64 and 1024 (consecutive points of the same sequence), also
 * with each batch first sorted along a Hilbert curve by the caller, for each tree packing of
 * {@code --packing}.
 *
 * <p>{@code --vertices N,...} adds the big-fence rows of {@link BigFenceBenchmark}. Run with
 * {@code bench/run index [--sizes 10000,100000,1200000] [--fence-vertices 96] [--packing
 * str,hilbert] [--vertices 1000,20000,200000] [--seconds 5]}; with neither {@code --sizes} nor
 * {@code --vertices}, both run at their defaults.
 */
public final class IndexBenchmark {

  private static final double MIN_RADIUS = 0.002;
  private static final double MAX_RADIUS = 0.02;
  private static final int QUERY_POINTS = 1 << 20;
  private static final int AGREEMENT_SAMPLE = 20_000;
  private static final int WINDOWS = 5;
  private static final int WARM_UP_FENCES = 20_000;
  private static final int[] BATCHES = {1, 64, 1024};
  /** Batch sizes also measured with the points sorted along a Hilbert curve by the caller. */
  private static final int[] SORTED_BATCHES = {64, 1024};

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
    int[] sizes = null;
    int[] bigVertices = null;
    int vertices = 96;
    double seconds = 5;
    List<PackedRTree.Packing> packings = List.of(PackedRTree.Packing.STR, PackedRTree.Packing.HILBERT);
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--sizes":
          sizes = ints(args[++i]);
          break;
        case "--vertices":
          bigVertices = ints(args[++i]);
          break;
        case "--fence-vertices":
          vertices = Integer.parseInt(args[++i]);
          break;
        case "--packing":
          packings = new ArrayList<>();
          for (String p : args[++i].split(",")) {
            packings.add(PackedRTree.Packing.valueOf(p.strip().toUpperCase(Locale.ROOT)));
          }
          break;
        case "--seconds":
          seconds = Double.parseDouble(args[++i]);
          break;
        default:
          throw new IllegalArgumentException("unknown option " + args[i]
              + "; use --sizes N,N,... --fence-vertices N --packing str,hilbert --vertices N,N,... --seconds S");
      }
    }
    if (sizes == null && bigVertices == null) {
      sizes = new int[] {10_000, 100_000, 1_200_000};
      bigVertices = BigFenceBenchmark.DEFAULT_VERTICES;
    }
    System.out.printf(
        Locale.ROOT, "java %s; %d cores; max heap %d MiB; load average %s; %.1f s per figure in %d windows%n",
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(),
        Runtime.getRuntime().maxMemory() >> 20, Measure.load(), seconds, WINDOWS);
    if (sizes != null) {
      System.out.printf(Locale.ROOT, "Fence index vs JTS STRtree + PreparedGeometry; %d vertices per fence%n", vertices);
      // The same warm-up for both sides before any figure: a small run through every code path
      // that is measured, so that no build or first pass is timed while the JIT compiles.
      new IndexBenchmark(WARM_UP_FENCES, vertices, 0.5).quietly(packings);
      List<String> rows = new ArrayList<>();
      for (int size : sizes) {
        rows.addAll(new IndexBenchmark(size, vertices, seconds).run(packings));
      }
      System.out.println();
      System.out.println(
          "| fences | index | build s | first pass checks/s | single-point checks/s | batch of 1 | batch of 64 | batch of 1024 "
              + "| sorted batch of 64 | sorted batch of 1024 | µs per batch of 64 / 1024 | hits/check | heap B/vertex built "
              + "| after queries | vs JTS: single | batch of 1024 | per CPU-second: single | batch of 1024 | vs JTS: single | batch of 1024 |");
      System.out.println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
      rows.forEach(System.out::println);
    }
    if (bigVertices != null) {
      BigFenceBenchmark.run(bigVertices, seconds, WINDOWS);
    }
    System.out.printf(Locale.ROOT, "load average at the end %s%n", Measure.load());
  }

  private static int[] ints(String list) {
    return Arrays.stream(list.split(",")).mapToInt(p -> Integer.parseInt(p.strip().replace("_", ""))).toArray();
  }

  /** What one index measured. */
  private static final class Result {
    double buildSeconds;
    long buildGcMillis;
    double firstPass;
    Measure.Rate single;
    Measure.Rate[] batches = new Measure.Rate[BATCHES.length];
    Measure.Rate[] sortedBatches = new Measure.Rate[SORTED_BATCHES.length];
    double hitsPerCheck;
    long vertices;
    long heapBuilt;
    long heapQueried;
    /** Per sample point, a hash of its sorted fence ids: compared, and small enough not to weigh on the heap figures. */
    int[] answers;
    int[] batchAnswers;
  }

  /** A run whose figures are thrown away. */
  private void quietly(List<PackedRTree.Packing> packings) {
    java.io.PrintStream out = System.out;
    System.setOut(new java.io.PrintStream(java.io.OutputStream.nullOutputStream()));
    try {
      run(packings);
    } finally {
      System.setOut(out);
    }
  }

  private List<String> run(List<PackedRTree.Packing> packings) {
    double[] xs = new double[QUERY_POINTS];
    double[] ys = new double[QUERY_POINTS];
    SplittableRandom random = new SplittableRandom(99);
    for (int i = 0; i < QUERY_POINTS; i++) {
      xs[i] = random.nextDouble() * side;
      ys[i] = random.nextDouble() * side;
    }
    List<Result> ours = new ArrayList<>();
    // Each index lives only inside its own method, so each heap figure stands alone.
    for (PackedRTree.Packing packing : packings) {
      Result r = measureOurs(packing, xs, ys);
      progress("geofence, " + packing.name().toLowerCase(Locale.ROOT) + " packing", r);
      ours.add(r);
    }
    Result jts = measureJts(xs, ys);
    progress("JTS", jts);
    for (Result r : ours) {
      int differ = 0;
      for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
        differ += r.answers[q] == jts.answers[q] && r.batchAnswers[q] == jts.answers[q] ? 0 : 1;
      }
      System.out.printf(Locale.ROOT, "  answers compared on %,d points (single-point and batch queries): %d differ%n",
          AGREEMENT_SAMPLE, differ);
      if (differ > 0) {
        throw new IllegalStateException(differ + " answers differ from JTS: the figures are void");
      }
    }
    List<String> rows = new ArrayList<>();
    for (int i = 0; i < ours.size(); i++) {
      Result r = ours.get(i);
      rows.add(String.format(
          Locale.ROOT, "| %,d | geofence, %s packing | %.2f | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %.0f / %.0f | %.2f | %.1f | %.1f | %.1fx | %.1fx | %,.0f | %,.0f | %.1fx | %.1fx |",
          fences, packings.get(i).name(), r.buildSeconds, r.firstPass, r.single.median(),
          r.batches[0].median(), r.batches[1].median(), r.batches[2].median(),
          r.sortedBatches[0].median(), r.sortedBatches[1].median(),
          1e6 * BATCHES[1] / r.batches[1].median(), 1e6 * BATCHES[2] / r.batches[2].median(), r.hitsPerCheck,
          (double) r.heapBuilt / r.vertices, (double) r.heapQueried / r.vertices,
          r.single.median() / jts.single.median(), r.batches[2].median() / jts.single.median(),
          r.single.perCpuSecond(), r.batches[2].perCpuSecond(),
          r.single.perCpuSecond() / jts.single.perCpuSecond(), r.batches[2].perCpuSecond() / jts.single.perCpuSecond()));
    }
    rows.add(String.format(
        Locale.ROOT, "| %,d | JTS STRtree + PreparedGeometry | %.2f | %,.0f | %,.0f | | | | | | | %.2f | %.1f | %.1f | 1x | | %,.0f | | 1x | |",
        fences, jts.buildSeconds, jts.firstPass, jts.single.median(), jts.hitsPerCheck,
        (double) jts.heapBuilt / jts.vertices, (double) jts.heapQueried / jts.vertices, jts.single.perCpuSecond()));
    return rows;
  }

  private Result measureOurs(PackedRTree.Packing packing, double[] xs, double[] ys) {
    Result result = new Result();
    long heapBefore = Measure.usedHeap();
    FenceGeometry[] geometries = new FenceGeometry[fences];
    Shapes shapes = new Shapes(factory, 1);
    for (int i = 0; i < fences; i++) {
      geometries[i] = flat(shape(shapes));
      result.vertices += geometries[i].vertexCount();
    }
    long gc0 = Measure.gcMillis();
    long t0 = System.nanoTime();
    FenceIndex index = new FenceIndex(
        PackedRTree.DEFAULT_NODE_SIZE, FenceIndex.DEFAULT_OVERLAY_RATIO, FenceIndex.DEFAULT_MIN_OVERLAY, packing);
    for (int i = 0; i < fences; i++) {
      index.upsert("fence-" + i, null, StayRules.NO_FENCE_DELAY, geometries[i]);
    }
    index.prepareForQuery();
    result.buildSeconds = (System.nanoTime() - t0) / 1e9;
    result.buildGcMillis = Measure.gcMillis() - gc0;
    geometries = null;
    result.heapBuilt = Measure.usedHeap() - heapBefore;

    List<String> found = new ArrayList<>();
    result.answers = new int[AGREEMENT_SAMPLE];
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      found.clear();
      index.forEachCovering(xs[q], ys[q], null, found::add);
      result.answers[q] = answer(found);
    }
    long[] hits = {0};
    Cursor single = new Cursor();
    result.firstPass = Measure.once(() -> {
      for (int q = 0; q < QUERY_POINTS; q++) {
        index.forEachCovering(xs[q], ys[q], null, id -> hits[0]++);
      }
      return QUERY_POINTS;
    });
    hits[0] = 0;
    long checksBefore = single.checks;
    result.single = Measure.rate(() -> {
      for (int i = 0; i < 4096; i++) {
        int q = single.next(1);
        index.forEachCovering(xs[q], ys[q], null, id -> hits[0]++);
      }
      return 4096;
    }, seconds, WINDOWS);
    result.hitsPerCheck = (double) hits[0] / (single.checks - checksBefore);

    for (int b = 0; b < BATCHES.length; b++) {
      result.batches[b] = measureBatches(index, xs, ys, BATCHES[b], false, hits);
    }
    for (int b = 0; b < SORTED_BATCHES.length; b++) {
      result.sortedBatches[b] = measureBatches(index, xs, ys, SORTED_BATCHES[b], true, hits);
    }
    result.heapQueried = Measure.usedHeap() - heapBefore;
    result.batchAnswers = batchAnswers(index, xs, ys);
    // Keeps the index alive through the heap reading; the JIT may otherwise free it before.
    Reference.reachabilityFence(index);
    return result;
  }

  /**
   * Batches of consecutive points of the sequence, copied into the caller's arrays as an operator
   * would fill them; when {@code sorted}, also put in order along a Hilbert curve over the fences'
   * square first, inside the timed loop, so the figure includes what the sorting costs.
   */
  private Measure.Rate measureBatches(FenceIndex index, double[] xs, double[] ys, int size, boolean sorted, long[] hits) {
    double[] bx = new double[size];
    double[] by = new double[size];
    long[] keys = new long[size];
    double scale = 65535 / side;
    Cursor cursor = new Cursor();
    FenceIndex.CoveringConsumer count = (point, id) -> hits[0]++;
    return Measure.rate(() -> {
      int done = 0;
      while (done < 4096) {
        int from = cursor.next(size);
        if (sorted) {
          for (int i = 0; i < size; i++) {
            long h = PackedRTree.hilbert((int) (xs[from + i] * scale), (int) (ys[from + i] * scale));
            keys[i] = (h << 20) | i;
          }
          Arrays.sort(keys);
          for (int i = 0; i < size; i++) {
            int k = (int) (keys[i] & 0xfffff);
            bx[i] = xs[from + k];
            by[i] = ys[from + k];
          }
        } else {
          System.arraycopy(xs, from, bx, 0, size);
          System.arraycopy(ys, from, by, 0, size);
        }
        index.forEachCovering(bx, by, null, size, count);
        done += size;
      }
      return done;
    }, seconds, WINDOWS);
  }

  /** The sample's answers through the batch query, in batches of the largest size. */
  private static int[] batchAnswers(FenceIndex index, double[] xs, double[] ys) {
    int size = BATCHES[BATCHES.length - 1];
    List<List<String>> found = new ArrayList<>();
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      found.add(new ArrayList<>());
    }
    for (int from = 0; from < AGREEMENT_SAMPLE; from += size) {
      int n = Math.min(size, AGREEMENT_SAMPLE - from);
      int offset = from;
      index.forEachCovering(Arrays.copyOfRange(xs, from, from + n), Arrays.copyOfRange(ys, from, from + n), null, n,
          (point, id) -> found.get(offset + point).add(id));
    }
    int[] answers = new int[AGREEMENT_SAMPLE];
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      answers[q] = answer(found.get(q));
    }
    return answers;
  }

  /** Where the next batch of the point sequence starts; wraps around. */
  private static final class Cursor {
    int position;
    long checks;

    int next(int size) {
      if (position + size > QUERY_POINTS) {
        position = 0;
      }
      int from = position;
      position += size;
      checks += size;
      return from;
    }
  }

  private record Fence(String id, PreparedGeometry geometry) {}

  private Result measureJts(double[] xs, double[] ys) {
    Result result = new Result();
    long heapBefore = Measure.usedHeap();
    Polygon[] polygons = new Polygon[fences];
    Shapes shapes = new Shapes(factory, 1);
    for (int i = 0; i < fences; i++) {
      polygons[i] = shape(shapes);
      result.vertices += polygons[i].getNumPoints();
    }
    long gc0 = Measure.gcMillis();
    long t0 = System.nanoTime();
    STRtree tree = new STRtree();
    for (int i = 0; i < fences; i++) {
      tree.insert(polygons[i].getEnvelopeInternal(), new Fence("fence-" + i, PreparedGeometryFactory.prepare(polygons[i])));
    }
    tree.build();
    result.buildSeconds = (System.nanoTime() - t0) / 1e9;
    result.buildGcMillis = Measure.gcMillis() - gc0;
    polygons = null;
    result.heapBuilt = Measure.usedHeap() - heapBefore;

    List<String> found = new ArrayList<>();
    result.answers = new int[AGREEMENT_SAMPLE];
    for (int q = 0; q < AGREEMENT_SAMPLE; q++) {
      found.clear();
      jtsCovering(tree, xs[q], ys[q], found);
      result.answers[q] = answer(found);
    }
    long[] hits = {0};
    result.firstPass = Measure.once(() -> {
      for (int q = 0; q < QUERY_POINTS; q++) {
        hits[0] += jtsCount(tree, xs[q], ys[q]);
      }
      return QUERY_POINTS;
    });
    hits[0] = 0;
    Cursor cursor = new Cursor();
    result.single = Measure.rate(() -> {
      for (int i = 0; i < 4096; i++) {
        int q = cursor.next(1);
        hits[0] += jtsCount(tree, xs[q], ys[q]);
      }
      return 4096;
    }, seconds, WINDOWS);
    result.hitsPerCheck = (double) hits[0] / cursor.checks;
    // PreparedGeometry builds its point locators lazily, on first use: they count too.
    result.heapQueried = Measure.usedHeap() - heapBefore;
    Reference.reachabilityFence(tree);
    return result;
  }

  private int jtsCount(STRtree tree, double x, double y) {
    Point point = factory.createPoint(new Coordinate(x, y));
    int count = 0;
    for (Object candidate : tree.query(new Envelope(x, x, y, y))) {
      if (((Fence) candidate).geometry().covers(point)) {
        count++;
      }
    }
    return count;
  }

  private void jtsCovering(STRtree tree, double x, double y, List<String> ids) {
    Point point = factory.createPoint(new Coordinate(x, y));
    for (Object candidate : tree.query(new Envelope(x, x, y, y))) {
      Fence fence = (Fence) candidate;
      if (fence.geometry().covers(point)) {
        ids.add(fence.id());
      }
    }
  }

  private static int answer(List<String> ids) {
    List<String> sorted = new ArrayList<>(ids);
    sorted.sort(null);
    return String.join(",", sorted).hashCode();
  }

  private Polygon shape(Shapes shapes) {
    SplittableRandom random = shapes.random();
    double cx = random.nextDouble() * side;
    double cy = random.nextDouble() * side;
    double rMax = MIN_RADIUS + random.nextDouble() * (MAX_RADIUS - MIN_RADIUS);
    return shapes.star(cx, cy, 0.8 * rMax, rMax, vertices);
  }

  static FenceGeometry flat(Polygon polygon) {
    Coordinate[] coordinates = polygon.getExteriorRing().getCoordinates();
    double[] xy = new double[2 * coordinates.length];
    for (int i = 0; i < coordinates.length; i++) {
      xy[2 * i] = coordinates[i].x;
      xy[2 * i + 1] = coordinates[i].y;
    }
    return FenceGeometry.fromArrays(xy, new int[] {0, coordinates.length}, new int[] {0, 1});
  }

  private void progress(String name, Result r) {
    StringBuilder batches = new StringBuilder();
    if (r.batches[0] != null) {
      for (int b = 0; b < BATCHES.length; b++) {
        batches.append(String.format(Locale.ROOT, "; batch of %d %s", BATCHES[b], describe(r.batches[b])));
      }
      for (int b = 0; b < SORTED_BATCHES.length; b++) {
        batches.append(String.format(Locale.ROOT, "; sorted batch of %d %s", SORTED_BATCHES[b], describe(r.sortedBatches[b])));
      }
    }
    System.out.printf(
        Locale.ROOT,
        "%,d fences, %s: build %.2f s (GC %d ms), first pass %,.0f checks/s, single point %s%s; %.2f hits/check, %.1f B/vertex built, %.1f after queries%n",
        fences, name, r.buildSeconds, r.buildGcMillis, r.firstPass, describe(r.single), batches, r.hitsPerCheck,
        (double) r.heapBuilt / r.vertices, (double) r.heapQueried / r.vertices);
  }

  static String describe(Measure.Rate rate) {
    return String.format(Locale.ROOT, "%,.0f checks/s (windows %,.0f to %,.0f; %,.0f per CPU-second; GC %d ms)",
        rate.median(), rate.min(), rate.max(), rate.perCpuSecond(), rate.gcMillis());
  }
}
