package dev.geofence.state.geom;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.testing.Shapes;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.prep.PreparedGeometry;
import org.locationtech.jts.geom.util.GeometryFixer;
import org.locationtech.jts.geom.prep.PreparedGeometryFactory;
import org.locationtech.jts.io.WKBWriter;

/**
 * The containment kernel against JTS {@code PreparedGeometry.covers} on generated shapes of every
 * kind and points on, near and off their boundaries: zero differences allowed.
 */
class PointInFenceOracleTest {

  private final GeometryFactory factory = new GeometryFactory();
  private final FenceGeometryReader reader = new FenceGeometryReader(GeometryReadOptions.defaults());

  @Test
  void kernelAgreesWithJtsCoversOnGeneratedPairs() throws Exception {
    Shapes shapes = new Shapes(factory, 20261130L);
    Map<Shapes.Kind, Integer> pairsByKind = new EnumMap<>(Shapes.Kind.class);
    List<String> differences = new ArrayList<>();
    int pairs = 0;
    int covered = 0;
    int repaired = 0;
    int gridDecided = 0;
    while (pairs < 120_000) {
      for (Shapes.Kind kind : Shapes.Kind.values()) {
        double cx = -170 + shapes.random().nextDouble() * 340;
        double cy = -80 + shapes.random().nextDouble() * 160;
        double radius = Math.pow(10, -4 + 4 * shapes.random().nextDouble());
        Geometry shape = shapes.of(kind, cx, cy, radius);
        if (!shape.isValid()) {
          // Rounding can collapse a sliver; the reader repairs it, and the repair is the oracle.
          shape = GeometryFixer.fix(shape);
          repaired++;
          if (shape.isEmpty()) {
            continue;
          }
        }
        // Through the reader, as fences arrive: WKB in, flat arrays out.
        FenceGeometry fence = reader.readWkb(new WKBWriter().write(shape)).geometry();
        PreparedGeometry oracle = PreparedGeometryFactory.prepare(shape);
        // The grid is built here for every fence, however small, so every kind exercises it.
        long[] grid = CoverageGrid.build(fence);
        for (Coordinate p : shapes.probes(shape, 6)) {
          boolean expected = oracle.covers(factory.createPoint(p));
          boolean actual = fence.covers(p.x, p.y);
          boolean inEnvelope = p.x >= fence.minX() && p.x <= fence.maxX() && p.y >= fence.minY() && p.y <= fence.maxY();
          boolean exact = inEnvelope && PointInFence.coversExactly(fence, p.x, p.y);
          long mark = grid != null && inEnvelope ? CoverageGrid.lookup(grid, fence, p.x, p.y) : 0;
          gridDecided += mark != 0 ? 1 : 0;
          if ((expected != actual || expected != exact || (mark != 0 && expected != (mark == CoverageGrid.INSIDE)))
              && differences.size() < 20) {
            differences.add(kind + " " + shape + " POINT (" + p.x + " " + p.y + ") expected " + expected
                + ", covers " + actual + ", exact " + exact + ", grid " + mark);
          }
          covered += expected ? 1 : 0;
          pairs++;
          pairsByKind.merge(kind, 1, Integer::sum);
        }
      }
    }
    assertThat(differences).as("differences from JTS covers").isEmpty();
    // The probes must exercise both answers in earnest, or agreement proves little.
    assertThat(covered).isBetween(pairs / 5, pairs * 4 / 5);
    assertThat(pairsByKind.values()).allMatch(n -> n >= 5_000);
    assertThat(repaired).isLessThan(pairs / 100);
    assertThat(gridDecided).as("points the coverage grid answered alone").isGreaterThan(pairs / 4);
  }
}
