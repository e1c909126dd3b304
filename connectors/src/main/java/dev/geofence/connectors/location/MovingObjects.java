package dev.geofence.connectors.location;

import dev.geofence.connectors.model.Location;
import java.io.Serializable;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * Objects circling through a bounding box, each location a pure function of its sequence number
 * ({@link #line}; a generator source emits {@link Lines}, which paces them to their timestamps).
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
   * The lines of a generator source: {@link #line}, each emitted once the wall clock has reached
   * its timestamp, a lap's objects spread over the lap (a reader that is behind, after its start-up
   * or a restore, catches up as fast as it can).
   *
   * <p>A reader restored from a savepoint goes on from the sequence number it had reached. Under
   * a {@linkplain #fixed fixed} timeline its locations are the first run's to the bit, so a replay
   * after a failover emits the same lines and causes the same triggers; the submitter gives the
   * restored run a start that puts the savepoint's position at the wall clock (the demo moves the
   * first run's start by the time the job was stopped). A timeline that {@linkplain #onTheWallClock
   * follows the clock} starts at the submission, which would stamp a restored reader's locations
   * ahead by as long as the runs before had lasted (held that long, and refused as
   * FUTURE_TIMESTAMP past the clock skew); so a reader whose first location lies ahead of the wall
   * clock moves the whole timeline back to start there. That move is not in the source's
   * checkpointed state ({@code DataGeneratorSource} keeps only the sequence number), so a failover
   * of a restored run moves it again: its replay is stamped later, and the triggers it causes are
   * written a second time.
   */
  public static final class Lines implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final MovingObjects objects;
    private final boolean movable;
    private transient MovingObjects timeline;

    private Lines(MovingObjects objects, boolean movable) {
      this.objects = objects;
      this.movable = movable;
    }

    /** Lines on the objects' own timeline, never moved: replays are exact. */
    public static Lines fixed(MovingObjects objects) {
      return new Lines(objects, false);
    }

    /** Lines whose timeline a reader moves back once if its first location is ahead of the wall clock. */
    public static Lines onTheWallClock(MovingObjects objects) {
      return new Lines(objects, true);
    }

    @Override
    public String map(Long n) throws InterruptedException {
      if (timeline == null) {
        long ahead = objects.location(n).timestamp - System.currentTimeMillis();
        timeline = movable && ahead > 0 ? objects.earlierBy(ahead) : objects;
      }
      Location location = timeline.location(n);
      // A lap's objects share its timestamp and are emitted spread over the lap, as a rate limiter
      // would: the reader's thread, which also takes the checkpoints, then never waits for long.
      long due = location.timestamp + (n % objects.objects()) * objects.stepMillis() / objects.objects();
      long wait = due - System.currentTimeMillis();
      if (wait > 0) {
        Thread.sleep(wait);
      }
      return LocationJson.format(location);
    }
  }

  private static double frac(double x) {
    return x - Math.floor(x);
  }
}
