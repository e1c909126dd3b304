package dev.geofence.job;

import java.util.SplittableRandom;
import org.locationtech.jts.geom.Coordinate;
import org.locationtech.jts.geom.GeometryFactory;
import org.locationtech.jts.geom.Polygon;

/** Fences for the demo and the end-to-end tests: random star-shaped polygons, always valid. */
public final class GeneratedFences {

  private static final GeometryFactory JTS = new GeometryFactory();

  private GeneratedFences() {}

  /**
   * A polygon star-shaped around (cx, cy): vertices at increasing angles (which keeps it simple),
   * each at a radius between half of {@code radius} and {@code radius}.
   */
  public static Polygon star(SplittableRandom random, double cx, double cy, double radius, int vertices) {
    Coordinate[] ring = new Coordinate[vertices + 1];
    for (int i = 0; i < vertices; i++) {
      double angle = 2 * Math.PI * (i + 0.8 * random.nextDouble()) / vertices;
      double r = radius * (0.5 + 0.5 * random.nextDouble());
      ring[i] = new Coordinate(cx + r * Math.cos(angle), cy + r * Math.sin(angle));
    }
    ring[vertices] = ring[0].copy();
    return JTS.createPolygon(ring);
  }
}
