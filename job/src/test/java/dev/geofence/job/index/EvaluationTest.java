package dev.geofence.job.index;

import dev.geofence.connectors.config.GeofenceOptions;
import dev.geofence.job.operator.Membership;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometryReader;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.time.FenceHistory;
import dev.geofence.state.time.StayRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.io.WKTReader;

/**
 * Locations evaluated in batches decide exactly as one by one, and both agree with JTS: random
 * overlapping fences (some of a tenant), objects that wander across them, batches cut at random.
 */
class EvaluationTest {

  private static final int MAX_PARALLELISM = 128;
  private static final String[] TENANTS = {null, "a", "b"};

  @Test
  void batchesDecideAsSingleLocationsAndAsJts() throws Exception {
    Random random = new Random(18);
    FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());
    WKTReader wkt = new WKTReader();
    FenceSet fences = new FenceSet(new FenceIndex());
    Map<String, Geometry> shapes = new HashMap<>();
    Map<String, String> tenantOf = new HashMap<>();
    for (int f = 0; f < 300; f++) {
      double x = random.nextDouble() * 10;
      double y = random.nextDouble() * 10;
      double r = 0.2 + random.nextDouble() * 1.5;
      String text = "POLYGON ((" + x + " " + y + ", " + (x + r) + " " + y + ", " + (x + r / 2) + " " + (y + r) + ", " + x + " " + y + "))";
      String id = "f" + f;
      String tenant = TENANTS[random.nextInt(TENANTS.length)];
      fences.apply(FenceEdit.upsert(id, 1, reader.readWkt(text).geometry(), tenant, StayRules.NO_FENCE_DELAY, EditOrigin.SNAPSHOT, 0, 0));
      shapes.put(id, wkt.read(text));
      tenantOf.put(id, tenant);
    }
    List<GeofenceTrigger> single = new ArrayList<>();
    List<GeofenceTrigger> batched = new ArrayList<>();
    Recorded singleMembers = new Recorded();
    Recorded batchedMembers = new Recorded();
    Evaluation one = evaluation(fences, singleMembers, single::add, 1);
    Evaluation many = evaluation(fences, batchedMembers, batched::add, GeofenceOptions.EVALUATION_BATCH_SIZE.defaultValue());
    Map<String, Location> last = new HashMap<>();
    int partial = 0;
    Set<String> partialObjects = new TreeSet<>();
    for (int i = 0; i < 20_000; i++) {
      int objectNumber = random.nextInt(200);
      String object = "o" + objectNumber;
      Location previous = last.get(object);
      double lon = previous == null ? random.nextDouble() * 10 : clamp(previous.lon + random.nextGaussian() * 0.3);
      double lat = previous == null ? random.nextDouble() * 10 : clamp(previous.lat + random.nextGaussian() * 0.3);
      Location location = new Location(object, i, lon, lat, i % 7 == 0 ? "a" : null);
      // Now and then a location of the first 20 objects is owed to part of the key groups only, as
      // a restore hands over.
      boolean whole = objectNumber >= 20 || random.nextInt(20) != 0;
      int start = whole ? 0 : random.nextInt(MAX_PARALLELISM);
      int end = whole ? MAX_PARALLELISM - 1 : start + random.nextInt(MAX_PARALLELISM - start);
      if (!whole) {
        partial++;
        partialObjects.add(object);
      }
      one.evaluate(location, start, end);
      many.add(location, start, end);
      if (random.nextInt(100) == 0) {
        many.flush();
      }
      if (whole) {
        last.put(object, location);
      }
    }
    many.flush();
    assertThat(partial).isPositive();
    assertThat(single).hasSizeGreaterThan(2_000);
    assertThat(batched).containsExactlyElementsOf(single);
    assertThat(batchedMembers.inside).isEqualTo(singleMembers.inside);

    // Independently of both: each object is now inside what JTS says its last location is in,
    // for the objects none of whose locations was owed to part of the key groups only.
    GeometryFactory factory = new GeometryFactory();
    int checked = 0;
    for (Map.Entry<String, Location> entry : last.entrySet()) {
      Location l = entry.getValue();
      Set<String> expected = new TreeSet<>();
      for (Map.Entry<String, Geometry> shape : shapes.entrySet()) {
        String tenant = tenantOf.get(shape.getKey());
        if ((l.tenant == null || l.tenant.equals(tenant)) && shape.getValue().covers(factory.createPoint(new Coordinate(l.lon, l.lat)))) {
          expected.add(shape.getKey());
        }
      }
      if (!partialObjects.contains(entry.getKey())) {
        assertThat(batchedMembers.inside.getOrDefault(entry.getKey(), new TreeSet<>())).as(entry.getKey()).isEqualTo(expected);
        checked++;
      }
    }
    assertThat(checked).isGreaterThan(100);
  }

  /** Locations here come in time order: none may be refused. */
  private static Evaluation evaluation(FenceSet fences, Recorded members, Consumer<GeofenceTrigger> emit, int batchSize) {
    return new Evaluation(fences, new FenceHistory(), members, emit, (location, newest) -> {
      throw new AssertionError("refused as out of order: " + location);
    }, fence -> false, MAX_PARALLELISM, 0, MAX_PARALLELISM - 1, batchSize, StayRules.OFF, 0);
  }

  private static double clamp(double v) {
    return Math.max(0, Math.min(10, v));
  }

  /** Who is inside which fence, as the operator's keyed state would hold it. */
  private static final class Recorded implements Membership {
    final Map<String, Set<String>> inside = new HashMap<>();

    @Override
    public void entered(String fenceId, String objectId, long since, long fenceSeq) {
      inside.computeIfAbsent(objectId, o -> new TreeSet<>()).add(fenceId);
    }

    @Override
    public void left(String fenceId, String objectId) {
      Set<String> fences = inside.get(objectId);
      fences.remove(fenceId);
      if (fences.isEmpty()) {
        inside.remove(objectId);
      }
    }
  }
}
