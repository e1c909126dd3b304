package dev.geofence.state.shape;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.Geometry;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.LinearRing;
import org.locationtech.jts.geom.Polygon;

/**
 * Generates valid fence shapes of the kinds real data holds, for oracle tests and benchmarks:
 * convex, concave (star-shaped), with holes, multipolygons, rectilinear on a grid (boundary points
 * exactly representable) and nearly degenerate (slivers, spikes, collinear runs, tiny shapes).
 * Deterministic for a given seed. Like JTS's {@code GeometricShapeFactory}, a generator in the
 * library itself: the oracle tests and the benchmarks draw from the same kinds.
 */
public final class Shapes {

  /** The kinds of shape {@link #any} draws from. */
  public enum Kind {
    CONVEX,
    STAR,
    HOLES,
    MULTI,
    RECTILINEAR,
    SLIVER,
    SPIKE,
    COLLINEAR,
    TINY
  }

  private final GeometryFactory factory;
  private final SplittableRandom random;

  public Shapes(GeometryFactory factory, long seed) {
    this.factory = factory;
    this.random = new SplittableRandom(seed);
  }

  public SplittableRandom random() {
    return random;
  }

  /** A shape of a random kind centred at (cx, cy) with about the given radius. */
  public Geometry any(double cx, double cy, double radius) {
    Kind[] kinds = Kind.values();
    return of(kinds[random.nextInt(kinds.length)], cx, cy, radius);
  }

  public Geometry of(Kind kind, double cx, double cy, double r) {
    switch (kind) {
      case CONVEX:
        return factory.createPolygon(starRing(cx, cy, r, r, 3 + random.nextInt(30)));
      case STAR:
        return factory.createPolygon(starRing(cx, cy, r * 0.2, r, 5 + random.nextInt(120)));
      case HOLES:
        return withHoles(cx, cy, r);
      case MULTI:
        return multi(cx, cy, r);
      case RECTILINEAR:
        return rectilinear(cx, cy, r);
      case SLIVER:
        return sliver(cx, cy, r);
      case SPIKE:
        return spike(cx, cy, r);
      case COLLINEAR:
        return collinear(cx, cy, r);
      case TINY:
        return factory.createPolygon(starRing(cx, cy, r * 1e-7, r * 2e-7, 3 + random.nextInt(8)));
      default:
        throw new IllegalArgumentException(kind.toString());
    }
  }

  /**
   * A big fence, as city and country outlines are: a star of {@code lobes} lobes (radius {@code r
   * (0.75 + 0.25 cos(lobes t))}) sampled at {@code vertices} evenly spaced angles, each radius
   * roughened by up to {@code noise} of itself, as a coastline is. Valid for any noise below 0.2:
   * the angles increase strictly, so the ring is simple.
   */
  public Polygon lobedStar(double cx, double cy, double r, int vertices, int lobes, double noise) {
    return factory.createPolygon(lobedRing(cx, cy, r, vertices, lobes, noise));
  }

  private LinearRing lobedRing(double cx, double cy, double r, int vertices, int lobes, double noise) {
    Coordinate[] ring = new Coordinate[vertices + 1];
    for (int i = 0; i < vertices; i++) {
      double t = 2 * Math.PI * i / vertices;
      double radius = r * (0.75 + 0.25 * Math.cos(lobes * t)) * (1 + noise * (2 * random.nextDouble() - 1));
      ring[i] = new Coordinate(cx + radius * Math.cos(t), cy + radius * Math.sin(t));
    }
    ring[vertices] = ring[0].copy();
    return factory.createLinearRing(ring);
  }

  /**
   * A big fence with big holes: a lobed shell and up to four lobed holes of about a tenth of its
   * vertices each, in separate sectors of the disc the shell's lobes never reach into.
   */
  public Polygon lobedStarWithHoles(double cx, double cy, double r, int vertices, double noise) {
    LinearRing shell = lobedRing(cx, cy, r, vertices, 3 + random.nextInt(200), noise);
    int holes = 1 + random.nextInt(4);
    LinearRing[] rings = new LinearRing[holes];
    for (int h = 0; h < holes; h++) {
      double angle = 2 * Math.PI * h / holes;
      // The shell stays beyond 0.4 r (its lobes' 0.5 r, less the noise); a hole of radius 0.12 r
      // reaches at most 1.2 times that from its centre at 0.25 r, and no two holes meet.
      double hr = 0.12 * r;
      rings[h] = lobedRing(cx + 0.25 * r * Math.cos(angle), cy + 0.25 * r * Math.sin(angle), hr,
          Math.max(16, vertices / 10), 3 + random.nextInt(30), noise);
    }
    return factory.createPolygon(shell, rings);
  }

  /**
   * A big rectilinear fence on a grid of a power-of-two fraction of a degree (finer for more
   * steps, so it spans a few degrees at most): a staircase of {@code steps} steps up and then
   * down, closed along the bottom. Every vertex and every edge midpoint is exact in binary, so
   * points exactly on the boundary are easy to make.
   */
  public Polygon staircase(double cx, double cy, int steps) {
    double g = 1.0 / 1024 / Integer.highestOneBit(Math.max(1, steps / 256));
    double x0 = Math.floor(cx / g) * g;
    double y0 = Math.floor(cy / g) * g;
    List<Coordinate> ring = new ArrayList<>();
    ring.add(c(x0, y0));
    int height = 1;
    double x = x0;
    for (int s = 0; s < 2 * steps; s++) {
      ring.add(c(x, y0 + height * g));
      x += (1 + random.nextInt(3)) * g;
      ring.add(c(x, y0 + height * g));
      height += s < steps ? 1 + random.nextInt(2) : -Math.min(height - 1, 1 + random.nextInt(2));
    }
    ring.add(c(x, y0));
    ring.add(c(x0, y0));
    return factory.createPolygon(ring.toArray(new Coordinate[0]));
  }

  /** A polygon of about {@code vertices} vertices, star-shaped around its centre. */
  public Polygon star(double cx, double cy, double rMin, double rMax, int vertices) {
    return factory.createPolygon(starRing(cx, cy, rMin, rMax, vertices));
  }

  /**
   * A ring star-shaped around (cx, cy): vertices at increasing angles, each at a radius in [rMin,
   * rMax]. Strictly increasing angles make it simple, hence valid.
   */
  private LinearRing starRing(double cx, double cy, double rMin, double rMax, int vertices) {
    double[] angles = new double[vertices];
    double step = 2 * Math.PI / vertices;
    for (int i = 0; i < vertices; i++) {
      angles[i] = i * step + random.nextDouble() * step * 0.9;
    }
    Coordinate[] ring = new Coordinate[vertices + 1];
    for (int i = 0; i < vertices; i++) {
      double radius = rMin + random.nextDouble() * (rMax - rMin);
      ring[i] = new Coordinate(cx + radius * Math.cos(angles[i]), cy + radius * Math.sin(angles[i]));
    }
    ring[vertices] = ring[0].copy();
    return factory.createLinearRing(ring);
  }

  private Polygon withHoles(double cx, double cy, double r) {
    // 16 or more shell vertices keep every chord beyond 0.74 r, clear of the holes (within 0.7 r).
    LinearRing shell = starRing(cx, cy, r * 0.8, r, 16 + random.nextInt(40));
    int holes = 1 + random.nextInt(3);
    List<LinearRing> rings = new ArrayList<>();
    for (int h = 0; h < holes; h++) {
      // Holes sit in separate sectors of the inner disc, so they neither touch nor leave the shell.
      double angle = 2 * Math.PI * h / holes;
      double hx = cx + 0.4 * r * Math.cos(angle);
      double hy = cy + 0.4 * r * Math.sin(angle);
      double hr = holes == 1 ? 0.3 * r : 0.3 * r * Math.sin(Math.PI / holes);
      rings.add(starRing(hx, hy, hr * 0.3, hr, 3 + random.nextInt(12)));
    }
    return factory.createPolygon(shell, rings.toArray(new LinearRing[0]));
  }

  private Geometry multi(double cx, double cy, double r) {
    int parts = 2 + random.nextInt(3);
    Polygon[] polygons = new Polygon[parts];
    for (int p = 0; p < parts; p++) {
      // Parts in disjoint cells of a row.
      double px = cx - r + (p + 0.5) * (2 * r / parts);
      double pr = 0.45 * (2 * r / parts);
      polygons[p] =
          random.nextBoolean()
              ? factory.createPolygon(starRing(px, cy, pr * 0.3, pr, 3 + random.nextInt(20)))
              : withHoles(px, cy, pr);
    }
    return factory.createMultiPolygon(polygons);
  }

  /** An L or U shape on a 1/1024-degree grid: its edges and vertices are exact in binary. */
  private Polygon rectilinear(double cx, double cy, double r) {
    double g = 1.0 / 1024;
    double x0 = Math.floor(cx / g) * g;
    double y0 = Math.floor(cy / g) * g;
    int w = 2 + random.nextInt(Math.max(2, (int) (r / g)));
    int h = 2 + random.nextInt(Math.max(2, (int) (r / g)));
    int cutW = 1 + random.nextInt(w - 1);
    int cutH = 1 + random.nextInt(h - 1);
    Coordinate[] ring;
    if (random.nextBoolean()) {
      ring =
          new Coordinate[] {
            c(x0, y0), c(x0 + w * g, y0), c(x0 + w * g, y0 + cutH * g), c(x0 + cutW * g, y0 + cutH * g),
            c(x0 + cutW * g, y0 + h * g), c(x0, y0 + h * g), c(x0, y0)
          };
    } else {
      ring = new Coordinate[] {c(x0, y0), c(x0 + w * g, y0), c(x0 + w * g, y0 + h * g), c(x0, y0 + h * g), c(x0, y0)};
    }
    return factory.createPolygon(ring);
  }

  private Polygon sliver(double cx, double cy, double r) {
    double height = r * Math.pow(10, -4 - random.nextInt(8));
    double angle = random.nextDouble() * Math.PI;
    double dx = r * Math.cos(angle);
    double dy = r * Math.sin(angle);
    double nx = -Math.sin(angle) * height;
    double ny = Math.cos(angle) * height;
    return factory.createPolygon(
        new Coordinate[] {c(cx - dx, cy - dy), c(cx + dx, cy + dy), c(cx + nx, cy + ny), c(cx - dx, cy - dy)});
  }

  private Polygon spike(double cx, double cy, double r) {
    Coordinate[] base = starRing(cx, cy, r * 0.1, r * 0.2, 6 + random.nextInt(10)).getCoordinates();
    // Replace one vertex with a long needle: two vertices almost on one line from the centre.
    int k = random.nextInt(base.length - 1);
    double angle = Math.atan2(base[k].y - cy, base[k].x - cx);
    double eps = 1e-9;
    List<Coordinate> ring = new ArrayList<>();
    for (int i = 0; i < base.length - 1; i++) {
      if (i == k) {
        ring.add(c(cx + r * 0.15 * Math.cos(angle - eps), cy + r * 0.15 * Math.sin(angle - eps)));
        ring.add(c(cx + r * Math.cos(angle), cy + r * Math.sin(angle)));
        ring.add(c(cx + r * 0.15 * Math.cos(angle + eps), cy + r * 0.15 * Math.sin(angle + eps)));
      } else {
        ring.add(base[i]);
      }
    }
    ring.add(ring.get(0).copy());
    return factory.createPolygon(ring.toArray(new Coordinate[0]));
  }

  /** A square with extra vertices along its edges, some of them exactly on the edge lines. */
  private Polygon collinear(double cx, double cy, double r) {
    List<Coordinate> ring = new ArrayList<>();
    double[][] corners = {{cx - r, cy - r}, {cx + r, cy - r}, {cx + r, cy + r}, {cx - r, cy + r}};
    for (int i = 0; i < 4; i++) {
      double[] a = corners[i];
      double[] b = corners[(i + 1) % 4];
      ring.add(c(a[0], a[1]));
      int extra = random.nextInt(4);
      for (int e = 1; e <= extra; e++) {
        double t = (double) e / (extra + 1);
        ring.add(c(a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])));
      }
    }
    ring.add(ring.get(0).copy());
    return factory.createPolygon(ring.toArray(new Coordinate[0]));
  }

  /**
   * Query points for a shape: random ones around it, each vertex kind of boundary case (on a
   * vertex, on an edge, at an edge's midpoint, on a vertex's horizontal so the ray passes through
   * vertices, a hair off a vertex), and inside holes.
   */
  public List<Coordinate> probes(Geometry shape, int randomCount) {
    List<Coordinate> points = new ArrayList<>();
    var env = shape.getEnvelopeInternal();
    double w = Math.max(env.getWidth(), 1e-12);
    double h = Math.max(env.getHeight(), 1e-12);
    for (int i = 0; i < randomCount; i++) {
      points.add(c(env.getMinX() - 0.1 * w + random.nextDouble() * 1.2 * w, env.getMinY() - 0.1 * h + random.nextDouble() * 1.2 * h));
    }
    Coordinate[] vertices = shape.getCoordinates();
    Coordinate v = vertices[random.nextInt(vertices.length)];
    points.add(v.copy());
    points.add(c(Math.nextUp(v.x), v.y));
    int i = random.nextInt(vertices.length - 1);
    Coordinate a = vertices[i];
    Coordinate b = vertices[i + 1];
    if (!a.equals2D(b)) {
      double t = random.nextDouble();
      points.add(c(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)));
      points.add(c((a.x + b.x) / 2, (a.y + b.y) / 2));
    }
    for (int k = 0; k < 2; k++) {
      Coordinate u = vertices[random.nextInt(vertices.length)];
      points.add(c(env.getMinX() + random.nextDouble() * w, u.y));
    }
    for (int p = 0; p < shape.getNumGeometries(); p++) {
      Polygon polygon = (Polygon) shape.getGeometryN(p);
      for (int hole = 0; hole < polygon.getNumInteriorRing(); hole++) {
        LinearRing ring = polygon.getInteriorRingN(hole);
        points.add(factory.createPolygon(ring).getInteriorPoint().getCoordinate());
        points.add(ring.getCoordinateN(0).copy());
      }
    }
    return points;
  }

  /**
   * Query points on and next to a big shape's boundary: {@code count} each of its vertices, the
   * floating-point neighbours of vertices, edge midpoints, points on a vertex's horizontal (rays
   * through vertices) and points on its edges at a random fraction, plus {@code count} random
   * points in and around its envelope.
   */
  public List<Coordinate> boundaryProbes(Geometry shape, int count) {
    List<Coordinate> points = new ArrayList<>();
    Coordinate[] vertices = shape.getCoordinates();
    var env = shape.getEnvelopeInternal();
    for (int k = 0; k < count; k++) {
      Coordinate v = vertices[random.nextInt(vertices.length)];
      points.add(v.copy());
      points.add(c(random.nextBoolean() ? Math.nextUp(v.x) : Math.nextDown(v.x), random.nextBoolean() ? Math.nextUp(v.y) : v.y));
      int i = random.nextInt(vertices.length - 1);
      Coordinate a = vertices[i];
      Coordinate b = vertices[i + 1];
      points.add(c((a.x + b.x) / 2, (a.y + b.y) / 2));
      double t = random.nextDouble();
      points.add(c(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)));
      points.add(c(env.getMinX() + random.nextDouble() * env.getWidth(), v.y));
      points.add(c(env.getMinX() - 0.05 * env.getWidth() + random.nextDouble() * 1.1 * env.getWidth(),
          env.getMinY() - 0.05 * env.getHeight() + random.nextDouble() * 1.1 * env.getHeight()));
    }
    return points;
  }

  private static Coordinate c(double x, double y) {
    return new Coordinate(x, y);
  }
}
