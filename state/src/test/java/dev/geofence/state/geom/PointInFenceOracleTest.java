package dev.geofence.state.geom;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.shape.Shapes;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.locationtech.jts.algorithm.locate.IndexedPointInAreaLocator;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Location;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.Polygon;
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
        long[] grid = new long[CoverageGrid.COARSE_WORDS];
        if (!CoverageGrid.build(fence, fence.minX(), fence.minY(), fence.maxX(), fence.maxY(), CoverageGrid.COARSE, grid, 0)) {
          grid = null;
        }
        for (Coordinate p : shapes.probes(shape, 6)) {
          boolean expected = oracle.covers(factory.createPoint(p));
          boolean actual = fence.covers(p.x, p.y);
          boolean inEnvelope = p.x >= fence.minX() && p.x <= fence.maxX() && p.y >= fence.minY() && p.y <= fence.maxY();
          boolean exact = inEnvelope && PointInFence.coversExactly(fence, p.x, p.y);
          long mark = grid != null && inEnvelope ? CoverageGrid.lookup(grid, 0, CoverageGrid.COARSE, fence.minX(), fence.minY(), fence.maxX(), fence.maxY(), p.x, p.y) : 0;
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

  /**
   * Big fences (10^3 to 10^5 vertices: lobed and rough outlines, big holes, multipolygons of big
   * parts, staircases whose boundary points are exact) through every path: the fence's own fine
   * grid, its edge bands, the full scan and the combination, each against JTS on points on, next
   * to and away from the boundary.
   */
  @Test
  void bigFencesAgreeWithJtsCoversOnEveryPath() throws Exception {
    Shapes shapes = new Shapes(factory, 20261201L);
    List<String> differences = new ArrayList<>();
    int pairs = 0;
    int covered = 0;
    int onBoundary = 0;
    int fineGridDecided = 0;
    int fences = 0;
    while (pairs < 150_000) {
      int kind = fences % 4;
      int vertices = fences % 10 == 9 ? 100_000 + shapes.random().nextInt(100_000) : 256 + shapes.random().nextInt(30_000);
      double cx = -150 + shapes.random().nextDouble() * 300;
      double cy = -60 + shapes.random().nextDouble() * 120;
      double radius = Math.pow(10, -2 + 3 * shapes.random().nextDouble());
      double noise = shapes.random().nextBoolean() ? 0 : 0.2 * shapes.random().nextDouble();
      Geometry shape;
      switch (kind) {
        case 0:
          shape = shapes.lobedStar(cx, cy, radius, vertices, 3 + shapes.random().nextInt(300), noise);
          break;
        case 1:
          shape = shapes.lobedStarWithHoles(cx, cy, radius, vertices, noise);
          break;
        case 2:
          shape = factory.createMultiPolygon(new Polygon[] {
            shapes.lobedStar(cx - 1.2 * radius, cy, radius, vertices / 2, 97, noise),
            shapes.lobedStarWithHoles(cx + 1.2 * radius, cy, radius, vertices / 2, noise)});
          break;
        default:
          shape = shapes.staircase(cx, cy, vertices / 4);
      }
      assertThat(shape.isValid()).as("generated " + kind).isTrue();
      FenceGeometry fence = reader.readWkb(new WKBWriter().write(shape)).geometry();
      assertThat(fence.vertexCount()).isGreaterThanOrEqualTo(EdgeBands.MIN_VERTICES);
      PreparedGeometry oracle = PreparedGeometryFactory.prepare(shape);
      IndexedPointInAreaLocator locator = new IndexedPointInAreaLocator(shape);
      EdgeBands bands = fence.edgeBands();
      long[] grid = fence.grid();
      int probes = vertices > 50_000 ? 100 : 400;
      for (Coordinate p : shapes.boundaryProbes(shape, probes)) {
        boolean expected = oracle.covers(factory.createPoint(p));
        boolean inEnvelope = p.x >= fence.minX() && p.x <= fence.maxX() && p.y >= fence.minY() && p.y <= fence.maxY();
        boolean actual = fence.covers(p.x, p.y);
        boolean nearBoundary = fence.coversNearBoundary(p.x, p.y);
        boolean exact = inEnvelope && PointInFence.coversExactly(fence, p.x, p.y);
        boolean banded = inEnvelope && bands.covers(fence.xy(), p.x, p.y);
        long mark = grid != null && inEnvelope
            ? CoverageGrid.lookup(grid, 0, CoverageGrid.sizeOf(grid), fence.minX(), fence.minY(), fence.maxX(), fence.maxY(), p.x, p.y)
            : 0;
        fineGridDecided += mark != 0 ? 1 : 0;
        if ((expected != actual || expected != nearBoundary || expected != exact || expected != banded
                || (mark != 0 && expected != (mark == CoverageGrid.INSIDE)))
            && differences.size() < 20) {
          differences.add("kind " + kind + ", " + fence + " POINT (" + p.x + " " + p.y + ") expected " + expected
              + ", covers " + actual + ", near boundary " + nearBoundary + ", exact " + exact + ", bands " + banded + ", grid " + mark);
        }
        covered += expected ? 1 : 0;
        onBoundary += locator.locate(p) == Location.BOUNDARY ? 1 : 0;
        pairs++;
      }
      fences++;
    }
    assertThat(differences).as("differences from JTS covers").isEmpty();
    assertThat(covered).isBetween(pairs / 5, pairs * 4 / 5);
    assertThat(onBoundary).as("points exactly on an edge or vertex").isGreaterThan(pairs / 8);
    assertThat(fineGridDecided).as("points the fine grid answered alone").isGreaterThan(pairs / 10);
  }
}
