package dev.geofence.connectors.location;

import dev.geofence.connectors.model.Location;
import java.io.Serializable;
import org.apache.flink.connector.datagen.source.GeneratorFunction;

/**
 * Objects circling through a bounding box, each location a pure function of its sequence number
 * ({@link #line}; a generator source emits {@link Lines}, which paces them to their timestamps).
 * Object {@code n % objects} moves on its own circle; its timestamps start at {@code startMillis}
 * and advance by {@code stepMillis} per lap of all objects.
 *
 * <p>Every tenth object from the fourth {@link #parks} and every tenth from the eighth {@link
 * #fallsSilent} for steps {@value #PAUSE} to {@value #RESUME} of every {@value #PERIOD}: the
 * first stays where it is, the second sends nothing (its place in the lap carries a copy of the
 * location of the object that leads its ten, which changes nothing), so that DWELL and silence
 * have something to show.
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

  /** Steps of the parking and silent objects' routine, and the steps of it they pause in. */
  public static final int PERIOD = 60;
  public static final int PAUSE = 2;
  public static final int RESUME = 40;

  /** Whether the object stays where it is for part of every period. */
  public static boolean parks(int object) {
    return object % 10 == 3;
  }

  /** Whether the object sends nothing for part of every period. */
  public static boolean fallsSilent(int object) {
    return object % 10 == 7;
  }

  public Location location(long n) {
    int object = (int) (n % objects);
    long step = n / objects;
    long inPeriod = step % PERIOD;
    if (fallsSilent(object) && inPeriod >= PAUSE && inPeriod < RESUME) {
      object -= 7;
    }
    return at(object, step);
  }

  /**
   * Where a parking object parks, or a silent one is last seen, in the {@code period}th period of
   * its routine: the location of the last step before its pause, or of its pause's first.
   */
  public Location pausedAt(int object, long period) {
    return at(object, period * PERIOD + (parks(object) ? PAUSE : PAUSE - 1));
  }

  private Location at(int object, long step) {
    // A per-object circle: centre, radius and speed drawn from the object number.
    double u = frac(object * 0.6180339887);
    double v = frac(object * 0.7548776662);
    double w = frac(object * 0.5698402910);
    double width = maxLon - minLon;
    double height = maxLat - minLat;
    double radius = (0.05 + 0.2 * w) * Math.min(width, height);
    double cx = minLon + radius + u * (width - 2 * radius);
    double cy = minLat + radius + v * (height - 2 * radius);
    double angle = moving(object, step) * (0.02 + 0.05 * w) + 2 * Math.PI * u;
    return new Location("object-" + object, startMillis + step * stepMillis, cx + radius * Math.cos(angle), cy + radius * Math.sin(angle), null);
  }

  public String line(long n) {
    return LocationJson.format(location(n));
  }

  /**
   * The lines of a generator source: {@link #line}, each emitted once the wall clock has reached
   * its timestamp, a lap's objects spread over the lap (a reader that is behind, after its start-up
   * or a restore, catches up as fast as it can). The timeline is fixed: a reader restored from a
   * checkpoint goes on from the sequence number it had reached, so the replay of a failover emits
   * the first attempt's lines to the bit and causes the same triggers. A run restored from a
   * savepoint is given a timeline whose start puts the savepoint's position at the wall clock
   * (the {@code run} command reads that position from the savepoint).
   */
  public static final class Lines implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final MovingObjects objects;

    public Lines(MovingObjects objects) {
      this.objects = objects;
    }

    public MovingObjects objects() {
      return objects;
    }

    @Override
    public String map(Long n) throws InterruptedException {
      Location location = objects.location(n);
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

  /** The steps the object has moved in by {@code step}: all of them, but a parking object's pauses. */
  private static long moving(int object, long step) {
    if (!parks(object)) {
      return step;
    }
    long inPeriod = step % PERIOD;
    long paused = RESUME - PAUSE;
    return step / PERIOD * (PERIOD - paused) + (inPeriod < PAUSE ? inPeriod : inPeriod < RESUME ? PAUSE : inPeriod - paused);
  }

  private static double frac(double x) {
    return x - Math.floor(x);
  }
}
