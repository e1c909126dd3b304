package dev.geofence.state.index;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.testing.Shapes;
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
      index.upsert("f" + i, tenant, read(shape));
      oracle.add("f" + i, tenant, shape);
      placed.add(shape);
    }
    int queries = 0;
    int hits = 0;
    List<String> differences = new ArrayList<>();
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
        queries++;
      }
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
    for (int step = 0; step < 20_000; step++) {
      int op = random.nextInt(10);
      String id = "f" + random.nextInt(600);
      if (op < 6) {
        // Insert, or reshape and move an existing fence, sometimes to another tenant.
        Geometry shape = shapes.any(random.nextDouble(4), random.nextDouble(4), random.nextDouble(0.05, 0.8));
        if (!shape.isValid()) {
          continue;
        }
        String tenant = TENANTS[random.nextInt(TENANTS.length)];
        FenceGeometry geometry = read(shape);
        index.upsert(id, tenant, geometry);
        model.put(id, geometry);
        tenants.put(id, tenant);
      } else if (op < 9) {
        assertThat(index.delete(id)).isEqualTo(model.remove(id) != null);
        tenants.remove(id);
      } else {
        for (int q = 0; q < 20; q++) {
          double x = random.nextDouble(-0.5, 4.5);
          double y = random.nextDouble(-0.5, 4.5);
          String tenant = q % 3 == 0 ? TENANTS[1 + random.nextInt(2)] : null;
          List<String> expected = new ArrayList<>();
          model.forEach(
              (fence, geometry) -> {
                if ((tenant == null || tenant.equals(tenants.get(fence))) && geometry.covers(x, y)) {
                  expected.add(fence);
                }
              });
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
    assertThat(compared).isGreaterThan(30_000);
    for (Map.Entry<String, FenceGeometry> e : model.entrySet()) {
      assertThat(index.get(e.getKey())).isEqualTo(e.getValue());
    }
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
