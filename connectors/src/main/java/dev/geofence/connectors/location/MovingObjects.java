package dev.geofence.connectors.location;

import dev.geofence.connectors.model.Location;
import java.io.Serializable;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * Objects circling through a bounding box, each location a pure function of its sequence number
 * ({@link #line}; a generator source emits {@link Lines}, which may move the timeline once).
 * Object {@code n % objects} moves on its own circle; its timestamps start at {@code startMillis}
 * and advance by {@code stepMillis} per lap of all objects.
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

  /** The same objects with their timeline moved earlier by {@code millis}. */
  private MovingObjects earlierBy(long millis) {
    return new MovingObjects(objects, minLon, minLat, maxLon, maxLat, startMillis - millis, stepMillis);
  }

  /**
   * The lines of a generator source: {@link #line}, but on the wall clock. A reader restored from
   * a savepoint goes on from the sequence number it had reached, which a timeline starting at the
   * new submission would stamp ahead by as long as the runs before had lasted (the job holds such
   * locations until the clock reaches them, and refuses them as FUTURE_TIMESTAMP past the clock
   * skew). So a reader whose first location lies ahead of the wall clock moves the whole timeline
   * back to start there. Fresh runs, and their failovers, whose replayed locations lie in the
   * past, emit exactly {@link #line}. A failover of a restored run moves the timeline again (the
   * move is not in the source's checkpointed state, which {@code DataGeneratorSource} does not
   * extend), so its replayed locations are stamped later than the first time, and the triggers
   * they cause have other ids: the replay's triggers are written a second time. A source whose
   * replays must be exact is {@code fleet:} with its {@code start=}, or Kafka.
   */
  public static final class Lines implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final MovingObjects objects;
    private transient MovingObjects onTheClock;

    public Lines(MovingObjects objects) {
      this.objects = objects;
    }

    @Override
    public String map(Long n) {
      if (onTheClock == null) {
        long ahead = objects.location(n).timestamp - System.currentTimeMillis();
        onTheClock = ahead > 0 ? objects.earlierBy(ahead) : objects;
      }
      return onTheClock.line(n);
    }
  }

  private static double frac(double x) {
    return x - Math.floor(x);
  }
}
