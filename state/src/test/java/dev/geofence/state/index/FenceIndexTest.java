package dev.geofence.state.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.ledger.StoredFence;
import dev.geofence.state.segment.CoordinateArena;
import dev.geofence.state.segment.FenceSegment;
import dev.geofence.state.shape.Shapes;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Envelope;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
import org.locationtech.jts.index.strtree.STRtree;
import org.locationtech.jts.io.WKBWriter;

class FenceIndexTest {

  private static final String[] TENANTS = {null, "acme", "globex"};

  private final GeometryFactory factory = new GeometryFactory();
  private final FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());

  /** An independent oracle: JTS's own STRtree over prepared geometries. */
  private static final class Oracle {
    final STRtree tree = new STRtree();
    final Map<PreparedGeometry, String[]> fences = new HashMap<>();

    void add(String id, String tenant, Geometry shape) {
      PreparedGeometry prepared = PreparedGeometryFactory.prepare(shape);
      fences.put(prepared, new String[] {id, tenant});
      tree.insert(shape.getEnvelopeInternal(), prepared);
    }

    List<String> covering(GeometryFactory factory, Coordinate p, String tenant) {
      List<String> ids = new ArrayList<>();
      for (Object o : tree.query(new Envelope(p))) {
        PreparedGeometry prepared = (PreparedGeometry) o;
        String[] fence = fences.get(prepared);
        if ((tenant == null || tenant.equals(fence[1])) && prepared.covers(factory.createPoint(p))) {
          ids.add(fence[0]);
        }
      }
      return ids;
    }
  }

  /** Each fence's tenant as its newest upsert gave it, across re-tenanting and deletes, against a map of them. */
  @Test
  void tenantOfIsTheNewestUpsertsTenant() throws Exception {
    Shapes shapes = new Shapes(factory, 3L);
    SplittableRandom random = shapes.random();
    FenceIndex index = new FenceIndex();
    Map<String, String> model = new HashMap<>();
    String[] tenants = {null, "acme", "globex", "initech"};
    for (int i = 0; i < 3_000; i++) {
      String id = "f" + random.nextInt(300);
      if (random.nextInt(5) == 0) {
        index.delete(id);
        model.remove(id);
      } else {
        String tenant = tenants[random.nextInt(tenants.length)];
        index.upsert(id, tenant, StayRules.NO_FENCE_DELAY, read(shapes.any(random.nextDouble(10), random.nextDouble(10), 0.3)));
        model.put(id, tenant);
      }
      String probe = "f" + random.nextInt(300);
      assertThat(index.tenantOf(probe)).as("%s after edit %d", probe, i).isEqualTo(model.get(probe));
      assertThat(index.get(probe) != null).isEqualTo(model.containsKey(probe));
    }
  }

  /** An upsert leaves packing to do, for the next query or for prepareForQuery, which leave none. */
  @Test
  void packingIsDueAfterAnUpsertUntilPreparedOrQueried() throws Exception {
    Shapes shapes = new Shapes(factory, 4L);
    SplittableRandom random = shapes.random();
    FenceIndex index = new FenceIndex();
    assertThat(index.needsPacking()).as("empty").isFalse();
    for (int i = 0; i < 2_000; i++) {
      index.upsert("f" + i, null, StayRules.NO_FENCE_DELAY, read(shapes.any(random.nextDouble(10), random.nextDouble(10), 0.3)));
    }
    assertThat(index.needsPacking()).as("after a load").isTrue();
    index.prepareForQuery();
    assertThat(index.needsPacking()).as("prepared").isFalse();
    index.upsert("f1", null, StayRules.NO_FENCE_DELAY, read(shapes.any(1, 1, 0.3)));
    assertThat(index.needsPacking()).as("after an upsert").isTrue();
    index.covering(5, 5, null);
    assertThat(index.needsPacking()).as("queried").isFalse();
    index.delete("f2");
    assertThat(index.needsPacking()).as("a delete only retires its slot").isFalse();
  }

  @Test
  void bulkLoadedIndexAgreesWithJtsOnOverlappingFences() throws Exception {
    Shapes shapes = new Shapes(factory, 7L);
    SplittableRandom random = shapes.random();
    FenceIndex index = new FenceIndex();
    Oracle oracle = new Oracle();
    List<Geometry> placed = new ArrayList<>();
    for (int i = 0; i < 6_000; i++) {
      Geometry shape = shapes.any(random.nextDouble(10), random.nextDouble(10), random.nextDouble(0.02, 0.6));
      if (!shape.isValid()) {
        continue;
      }
      String tenant = TENANTS[random.nextInt(TENANTS.length)];
      index.upsert("f" + i, tenant, StayRules.NO_FENCE_DELAY, read(shape));
      oracle.add("f" + i, tenant, shape);
      placed.add(shape);
    }
    int queries = 0;
    int hits = 0;
    List<String> differences = new ArrayList<>();
    List<Coordinate> points = new ArrayList<>();
    List<String> pointTenants = new ArrayList<>();
    List<List<String>> expectedAnswers = new ArrayList<>();
    while (queries < 100_000) {
      Geometry near = placed.get(random.nextInt(placed.size()));
      for (Coordinate p : shapes.probes(near, 3)) {
        String tenant = queries % 4 == 0 ? TENANTS[1 + random.nextInt(2)] : null;
        List<String> expected = oracle.covering(factory, p, tenant);
        List<String> actual = index.covering(p.x, p.y, tenant);
        hits += expected.size();
        if (!sameElements(expected, actual) && differences.size() < 10) {
          differences.add(p + " tenant=" + tenant + " expected " + expected + " got " + actual);
        }
        points.add(p);
        pointTenants.add(tenant);
        expectedAnswers.add(expected);
        queries++;
      }
    }
    assertThat(differences).isEmpty();
    // The same points through the batch query, in batches of assorted sizes.
    int from = 0;
    while (from < points.size()) {
      int n = Math.min(points.size() - from, 1 + random.nextInt(3000));
      List<List<String>> answers = batch(index, points.subList(from, from + n), pointTenants.subList(from, from + n));
      for (int i = 0; i < n; i++) {
        if (!sameElements(expectedAnswers.get(from + i), answers.get(i)) && differences.size() < 10) {
          differences.add("batch: " + points.get(from + i) + " expected " + expectedAnswers.get(from + i) + " got " + answers.get(i));
        }
      }
      from += n;
    }
    assertThat(differences).isEmpty();
    assertThat(hits).as("points covered by some fence").isGreaterThan(queries / 2);
    assertThat(index.covering(5, 5, "no-such-tenant")).isEmpty();
  }

  @Test
  void editedIndexAgreesWithBruteForceThroughOverlaysAndRepacks() throws Exception {
    Shapes shapes = new Shapes(factory, 11L);
    SplittableRandom random = shapes.random();
    // Tiny thresholds so that overlay packs and full repacks happen many times.
    FenceIndex index = new FenceIndex(4, 4, 8);
    Map<String, FenceGeometry> model = new HashMap<>();
    Map<String, String> tenants = new HashMap<>();
    List<String> differences = new ArrayList<>();
    int compared = 0;
    int batched = 0;
    for (int step = 0; step < 20_000; step++) {
      int op = random.nextInt(10);
      String id = "f" + random.nextInt(600);
      if (op < 6) {
        upsertAnyShape(index, shapes, id, model, tenants, new HashMap<>());
      } else if (op < 9) {
        assertThat(index.delete(id)).isEqualTo(model.remove(id) != null);
        tenants.remove(id);
      } else if (op == 9 && random.nextBoolean()) {
        // A batch between edits: every point's answer as brute force gives it, and as the
        // single-point query gives it.
        int n = 1 + random.nextInt(random.nextBoolean() ? 8 : 600);
        List<Coordinate> points = new ArrayList<>();
        List<String> pointTenants = new ArrayList<>();
        for (int q = 0; q < n; q++) {
          points.add(new Coordinate(random.nextDouble(-0.5, 4.5), random.nextDouble(-0.5, 4.5)));
          pointTenants.add(random.nextInt(3) == 0 ? (random.nextInt(5) == 0 ? "no-such-tenant" : TENANTS[1 + random.nextInt(2)]) : null);
        }
        List<List<String>> answers = batch(index, points, pointTenants);
        for (int q = 0; q < n; q++) {
          Coordinate p = points.get(q);
          String tenant = pointTenants.get(q);
          List<String> expected = bruteForce(model, tenants, p.x, p.y, tenant);
          List<String> single = index.covering(p.x, p.y, tenant);
          if ((!sameElements(expected, answers.get(q)) || !sameElements(expected, single)) && differences.size() < 10) {
            differences.add("step " + step + " batch point " + q + " " + p + " expected " + expected + " got " + answers.get(q) + ", single " + single);
          }
          batched++;
        }
      } else {
        for (int q = 0; q < 20; q++) {
          double x = random.nextDouble(-0.5, 4.5);
          double y = random.nextDouble(-0.5, 4.5);
          String tenant = q % 3 == 0 ? TENANTS[1 + random.nextInt(2)] : null;
          List<String> expected = bruteForce(model, tenants, x, y, tenant);
          List<String> actual = index.covering(x, y, tenant);
          if (!sameElements(expected, actual) && differences.size() < 10) {
            differences.add("step " + step + " (" + x + " " + y + ") expected " + expected + " got " + actual);
          }
          compared++;
        }
      }
      assertThat(index.size()).isEqualTo(model.size());
    }
    assertThat(differences).isEmpty();
    assertThat(compared).isGreaterThan(15_000);
    assertThat(batched).isGreaterThan(100_000);
    for (Map.Entry<String, FenceGeometry> e : model.entrySet()) {
      assertThat(index.get(e.getKey())).isEqualTo(e.getValue());
    }
  }

  /**
   * Buckets loaded as segments (fences read in place, big ones as objects, tombstones and refused
   * fences left out; half of them with their grids unbuilt, as a load writes them), then edited over and over (upserts and deletes of loaded fences and of new
   * ones, overlay packs and full repacks): every answer, single and batched, and every lookup by
   * id as brute force over a map gives it.
   */
  @Test
  void segmentsLoadedInPlaceAgreeWithBruteForceThroughEditsAndRepacks() throws Exception {
    Shapes shapes = new Shapes(factory, 20261205L);
    SplittableRandom random = shapes.random();
    Map<String, FenceGeometry> model = new HashMap<>();
    Map<String, String> tenants = new HashMap<>();
    Map<String, Long> delays = new HashMap<>();
    Map<Integer, Map<String, StoredFence>> buckets = new HashMap<>();
    for (int k = 0; k < 1_500; k++) {
      String id = "f" + k;
      String tenant = TENANTS[random.nextInt(TENANTS.length)];
      Geometry shape = k % 50 == 7
          ? shapes.lobedStar(random.nextDouble(4), random.nextDouble(4), random.nextDouble(0.1, 0.6), 300 + random.nextInt(400), 5, 0.1)
          : shapes.any(random.nextDouble(4), random.nextDouble(4), random.nextDouble(0.05, 0.8));
      if (!shape.isValid()) {
        continue;
      }
      FenceGeometry geometry = read(shape);
      StoredFence stored;
      if (k % 10 == 3) {
        stored = new StoredFence(2, true, null, tenant, StayRules.NO_FENCE_DELAY, 5, 6);
      } else if (k % 20 == 5) {
        stored = new StoredFence(1, false, null, tenant, StayRules.NO_FENCE_DELAY, 5, 6);
      } else {
        long delay = k % 3 == 0 ? 1_000L * k : StayRules.NO_FENCE_DELAY;
        stored = new StoredFence(1, false, geometry, tenant, delay, 5, 6);
        model.put(id, geometry);
        tenants.put(id, tenant);
        delays.put(id, delay);
      }
      buckets.computeIfAbsent(FenceBuckets.of(id), b -> new HashMap<>()).put(id, stored);
    }
    FenceIndex index = new FenceIndex(4, 4, 8);
    CoordinateArena arena = new CoordinateArena();
    // Half the buckets as a load writes them, their grids left for the index to build.
    buckets.forEach((bucket, fences) -> index.load(bucket,
        FenceSegment.read(bucket % 2 == 0 ? StoredFence.segment(fences) : StoredFence.segmentWithUnbuiltGrids(fences), arena)));
    assertThatThrownBy(() -> index.load(buckets.keySet().iterator().next(), FenceSegment.read(StoredFence.segment(Map.of()))))
        .isInstanceOf(IllegalStateException.class);
    assertThat(index.size()).isEqualTo(model.size());
    Map<String, FenceGeometry> loadedModel = new HashMap<>(model);
    Map<String, String> loadedTenants = new HashMap<>(tenants);
    Map<String, Long> loadedDelays = new HashMap<>(delays);
    List<String> differences = new ArrayList<>();
    int compared = 0;
    for (int step = 0; step < 6_000; step++) {
      int op = random.nextInt(10);
      String id = "f" + random.nextInt(1_800);
      if (op < 4) {
        upsertAnyShape(index, shapes, id, model, tenants, delays);
      } else if (op < 6) {
        assertThat(index.delete(id)).isEqualTo(model.remove(id) != null);
        tenants.remove(id);
        delays.remove(id);
      } else {
        int n = 1 + random.nextInt(random.nextBoolean() ? 4 : 200);
        List<Coordinate> points = new ArrayList<>();
        List<String> pointTenants = new ArrayList<>();
        for (int q = 0; q < n; q++) {
          points.add(new Coordinate(random.nextDouble(-0.5, 4.5), random.nextDouble(-0.5, 4.5)));
          pointTenants.add(random.nextInt(3) == 0 ? TENANTS[1 + random.nextInt(2)] : null);
        }
        List<List<String>> answers = batch(index, points, pointTenants);
        for (int q = 0; q < n; q++) {
          Coordinate p = points.get(q);
          List<String> expected = bruteForce(model, tenants, p.x, p.y, pointTenants.get(q));
          List<String> single = index.covering(p.x, p.y, pointTenants.get(q));
          if ((!sameElements(expected, answers.get(q)) || !sameElements(expected, single)) && differences.size() < 10) {
            differences.add("step " + step + " " + p + " expected " + expected + " got " + answers.get(q) + ", single " + single);
          }
          compared++;
        }
      }
      assertThat(index.size()).isEqualTo(model.size());
    }
    assertThat(differences).isEmpty();
    assertThat(compared).isGreaterThan(100_000);
    for (int k = 0; k < 1_800; k++) {
      String id = "f" + k;
      assertThat(index.get(id)).as(id).isEqualTo(model.get(id));
      assertThat(index.contains(id)).as(id).isEqualTo(model.containsKey(id));
      assertThat(index.tenantOf(id)).as(id).isEqualTo(model.containsKey(id) ? tenants.get(id) : null);
      assertThat(index.dwellDelayOf(id)).as(id).isEqualTo(delays.getOrDefault(id, StayRules.NO_FENCE_DELAY));
    }

    // Cleared, as a catch-up's load sets the fences aside: nothing is indexed, and the same buckets
    // then load again and take edits as the first time.
    index.clear();
    assertThat(index.size()).isZero();
    assertThat(index.hasDwellDelays()).isFalse();
    for (int k = 0; k < 1_800; k++) {
      assertThat(index.contains("f" + k)).isFalse();
    }
    buckets.forEach((bucket, fences) -> index.load(bucket, FenceSegment.read(StoredFence.segment(fences), arena)));
    for (int k = 0; k < 50; k++) {
      upsertAnyShape(index, shapes, "f" + random.nextInt(1_800), loadedModel, loadedTenants, loadedDelays);
    }
    assertThat(index.size()).isEqualTo(loadedModel.size());
    for (int q = 0; q < 20_000; q++) {
      double x = random.nextDouble(-0.5, 4.5);
      double y = random.nextDouble(-0.5, 4.5);
      String tenant = random.nextInt(3) == 0 ? TENANTS[1 + random.nextInt(2)] : null;
      List<String> expected = bruteForce(loadedModel, loadedTenants, x, y, tenant);
      List<String> got = index.covering(x, y, tenant);
      if (!sameElements(expected, got) && differences.size() < 10) {
        differences.add("after clear " + x + " " + y + " expected " + expected + " got " + got);
      }
    }
    assertThat(differences).isEmpty();
    for (String id : loadedDelays.keySet()) {
      assertThat(index.dwellDelayOf(id)).as(id).isEqualTo(loadedDelays.get(id));
    }
  }

  @Test
  void batchReportsEachPointsFencesTogetherInPointOrder() throws Exception {
    Shapes shapes = new Shapes(factory, 5L);
    SplittableRandom random = shapes.random();
    FenceIndex index = new FenceIndex();
    for (int i = 0; i < 2_000; i++) {
      Geometry shape = shapes.of(Shapes.Kind.CONVEX, random.nextDouble(2), random.nextDouble(2), random.nextDouble(0.1, 0.5));
      index.upsert("f" + i, null, StayRules.NO_FENCE_DELAY, read(shape));
    }
    int n = 5_000;
    double[] xs = new double[n];
    double[] ys = new double[n];
    for (int i = 0; i < n; i++) {
      xs[i] = random.nextDouble(-0.2, 2.2);
      ys[i] = random.nextDouble(-0.2, 2.2);
    }
    List<Integer> reported = new ArrayList<>();
    index.forEachCovering(xs, ys, null, n, (point, id) -> reported.add(point));
    // Overlapping fences: many points are covered several times.
    assertThat(reported.size()).isGreaterThan(2 * n);
    assertThat(reported).isSorted();
    // Fewer points than the arrays hold: the rest are not read.
    List<Integer> firstTen = new ArrayList<>();
    index.forEachCovering(xs, ys, null, 10, (point, id) -> firstTen.add(point));
    assertThat(firstTen).allMatch(p -> p < 10).isEqualTo(reported.subList(0, firstTen.size()));
    index.forEachCovering(xs, ys, null, 0, (point, id) -> {
      throw new AssertionError("an empty batch reports nothing");
    });
  }

  @Test
  void aConsumerCannotCallBackIntoTheIndex() throws Exception {
    FenceIndex index = new FenceIndex();
    Geometry square = factory.toGeometry(new Envelope(0, 1, 0, 1));
    index.upsert("a", null, StayRules.NO_FENCE_DELAY, read(square));
    assertThatThrownBy(() -> index.forEachCovering(0.5, 0.5, null, id -> index.delete("a")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("consumer");
    assertThatThrownBy(() -> index.forEachCovering(new double[] {0.5}, new double[] {0.5}, null, 1,
            (point, id) -> index.covering(0.5, 0.5, null)))
        .isInstanceOf(IllegalStateException.class);
    // The index is still whole afterwards.
    assertThat(index.covering(0.5, 0.5, null)).containsExactly("a");
    assertThatThrownBy(() -> index.forEachCovering(new double[1], new double[1], null, 2, (point, id) -> {}))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /** Every live fence of the model that covers the point, by its own exact test. */
  private static List<String> bruteForce(Map<String, FenceGeometry> model, Map<String, String> tenants, double x, double y, String tenant) {
    List<String> expected = new ArrayList<>();
    model.forEach(
        (fence, geometry) -> {
          if ((tenant == null || tenant.equals(tenants.get(fence))) && geometry.covers(x, y)) {
            expected.add(fence);
          }
        });
    return expected;
  }

  /** The answers of one batch query, per point, checking on the way that they come in point order. */
  private static List<List<String>> batch(FenceIndex index, List<Coordinate> points, List<String> tenants) {
    int n = points.size();
    // Longer arrays than the batch: the index must read only the first n entries.
    double[] xs = new double[n + 3];
    double[] ys = new double[n + 3];
    String[] pointTenants = tenants.contains(null) && tenants.stream().allMatch(t -> t == null) ? null : new String[n + 3];
    for (int i = 0; i < n; i++) {
      xs[i] = points.get(i).x;
      ys[i] = points.get(i).y;
      if (pointTenants != null) {
        pointTenants[i] = tenants.get(i);
      }
    }
    List<List<String>> answers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      answers.add(new ArrayList<>());
    }
    int[] last = {-1};
    index.forEachCovering(xs, ys, pointTenants, n, (point, id) -> {
      assertThat(point).as("points come in order, each point's fences together").isGreaterThanOrEqualTo(last[0]);
      if (point != last[0]) {
        assertThat(answers.get(point)).isEmpty();
      }
      last[0] = point;
      answers.get(point).add(id);
    });
    return answers;
  }

  /** Inserts the fence, or reshapes and moves it, sometimes to another tenant; in the index and the model alike. */
  private void upsertAnyShape(FenceIndex index, Shapes shapes, String id, Map<String, FenceGeometry> model,
      Map<String, String> tenants, Map<String, Long> delays) throws Exception {
    SplittableRandom random = shapes.random();
    Geometry shape = shapes.any(random.nextDouble(4), random.nextDouble(4), random.nextDouble(0.05, 0.8));
    if (!shape.isValid()) {
      return;
    }
    String tenant = TENANTS[random.nextInt(TENANTS.length)];
    FenceGeometry geometry = read(shape);
    long delay = random.nextInt(3) == 0 ? random.nextLong(60_000) : StayRules.NO_FENCE_DELAY;
    index.upsert(id, tenant, delay, geometry);
    model.put(id, geometry);
    tenants.put(id, tenant);
    delays.put(id, delay);
  }

  private FenceGeometry read(Geometry shape) throws Exception {
    return reader.readWkb(new WKBWriter().write(shape)).geometry();
  }

  private static boolean sameElements(List<String> a, List<String> b) {
    List<String> x = new ArrayList<>(a);
    List<String> y = new ArrayList<>(b);
    x.sort(null);
    y.sort(null);
    return x.equals(y);
  }
}
