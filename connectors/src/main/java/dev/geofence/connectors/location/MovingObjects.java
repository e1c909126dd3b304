package dev.geofence.connectors.location;

import dev.geofence.connectors.model.Location;
import java.io.Serializable;

/**
 * Objects circling through a bounding box, each location a pure function of its sequence number,
 * so a replayed generator emits exactly the same lines. Object {@code n % objects} moves on its own
 * circle; its timestamps start at {@code startMillis} and advance by {@code stepMillis} per lap of
 * all objects.
 */
public record MovingObjects(
    int objects, double minLon, double minLat, double maxLon, double maxLat, long startMillis, long stepMillis)
    implements Serializable {

  public MovingObjects {
    if (objects < 1) {
      throw new IllegalArgumentException("the generator needs at least one object, got " + objects);
    }
    if (!(minLon < maxLon && minLat < maxLat)) {
      throw new IllegalArgumentException("the generator's bounding box is empty");
    }
  }

  public Location location(long n) {
    int object = (int) (n % objects);
    long step = n / objects;
    // A per-object circle: centre, radius and speed drawn from the object number.
    double u = frac(object * 0.6180339887);
    double v = frac(object * 0.7548776662);
    double w = frac(object * 0.5698402910);
    double width = maxLon - minLon;
    double height = maxLat - minLat;
    double radius = (0.05 + 0.2 * w) * Math.min(width, height);
    double cx = minLon + radius + u * (width - 2 * radius);
    double cy = minLat + radius + v * (height - 2 * radius);
    double angle = step * (0.02 + 0.05 * w) + 2 * Math.PI * u;
    return new Location("object-" + object, startMillis + step * stepMillis, cx + radius * Math.cos(angle), cy + radius * Math.sin(angle), null);
  }

  public String line(long n) {
    return LocationJson.format(location(n));
  }

  private static double frac(double x) {
    return x - Math.floor(x);
  }
}
