package dev.geofence.connectors.location;

import dev.geofence.connectors.model.Location;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * A fleet of vehicles for benchmarks: {@code objects} vehicles, each reporting its position every
 * {@code everyMillis}, driving at about {@code metersPerSecond} (0.5 to 1.5 times it, per vehicle)
 * around a ring road of its own, 5 to 50 km across, somewhere in the box. Location {@code n} is
 * vehicle {@code n % objects} at time {@code startMillis + n * everyMillis / objects}: the
 * vehicles report in turn, each exactly {@code everyMillis} after its previous report, and every
 * location is a pure function of {@code n}, so a replay emits the same lines.
 *
 * <p>As a generator function it emits each location when the wall clock reaches its time (it
 * waits when it is ahead, and runs as fast as it can when it is behind), as a fleet reports: so a
 * location's event time is its arrival time, and a job that keeps up sees {@code objects * 1000 /
 * everyMillis} locations per second.
 */
public record Fleet(
    int objects, double minLon, double minLat, double maxLon, double maxLat, long startMillis, long everyMillis,
    double metersPerSecond) implements GeneratorFunction<Long, String> {

  private static final double METERS_PER_DEGREE = 111_320;

  public Fleet {
    if (objects < 1) {
      throw new IllegalArgumentException("the fleet needs at least one vehicle, got " + objects);
    }
    if (!(minLon < maxLon && minLat < maxLat)) {
      throw new IllegalArgumentException("the fleet's bounding box is empty");
    }
    if (everyMillis < 1) {
      throw new IllegalArgumentException("the fleet's report interval must be at least 1 ms, got " + everyMillis);
    }
    if (!(metersPerSecond >= 0)) {
      throw new IllegalArgumentException("the fleet's speed must not be negative, got " + metersPerSecond);
    }
  }

  /** Locations per second the fleet reports. */
  public double locationsPerSecond() {
    return objects * 1000.0 / everyMillis;
  }

  /** When location {@code n} is reported, epoch milliseconds. */
  public long time(long n) {
    return startMillis + (long) ((double) n * everyMillis / objects);
  }

  public Location location(long n) {
    int vehicle = (int) (n % objects);
    long t = time(n);
    double u = frac(vehicle * 0.6180339887);
    double v = frac(vehicle * 0.7548776662);
    double w = frac(vehicle * 0.5698402910);
    double radiusMeters = 2_500 + 22_500 * w;
    double speed = metersPerSecond * (0.5 + frac(vehicle * 0.4142135623));
    double centreLat = minLat + v * (maxLat - minLat);
    double centreLon = minLon + u * (maxLon - minLon);
    double angle = 2 * Math.PI * u + speed * ((t - startMillis) / 1000.0) / radiusMeters;
    double lat = centreLat + radiusMeters * Math.sin(angle) / METERS_PER_DEGREE;
    double lon = centreLon + radiusMeters * Math.cos(angle) / (METERS_PER_DEGREE * Math.cos(Math.toRadians(centreLat)));
    // Rings near the box's edge are folded back into it.
    return new Location("vehicle-" + vehicle, t, fold(lon, minLon, maxLon), fold(lat, minLat, maxLat), null);
  }

  @Override
  public String map(Long n) throws InterruptedException {
    long wait = time(n) - System.currentTimeMillis();
    if (wait > 0) {
      Thread.sleep(wait);
    }
    Location l = location(n);
    // Written directly rather than through LocationJson.format, whose tree costs several times
    // more: the benchmark's generator shares the job's cores. The ids need no escaping.
    return "{\"object_id\":\"" + l.objectId + "\",\"ts\":" + l.timestamp + ",\"lon\":" + l.lon + ",\"lat\":" + l.lat + "}";
  }

  private static double fold(double x, double min, double max) {
    return x < min ? 2 * min - x : x > max ? 2 * max - x : x;
  }

  private static double frac(double x) {
    return x - Math.floor(x);
  }
}
