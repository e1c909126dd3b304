package dev.geofence.bench;

import dev.geofence.connectors.location.Fleet;
import dev.geofence.connectors.model.Location;
import dev.geofence.job.hold.HoldReport;
import dev.geofence.job.index.Admission;
import dev.geofence.job.index.Evaluation;
import dev.geofence.job.index.Stays;
import dev.geofence.job.index.EventClock;
import dev.geofence.job.index.LocationPath;
import dev.geofence.job.operator.Membership;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.edit.FenceSet;
import dev.geofence.state.geom.FenceGeometry;
import dev.geofence.state.index.FenceIndex;
import dev.geofence.state.ledger.FenceLedger;
import dev.geofence.state.ledger.LedgerStore;
import dev.geofence.state.ledger.Schedule;
import dev.geofence.state.readiness.BucketFingerprints;
import dev.geofence.state.readiness.Readiness;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.PriorityQueue;
import java.util.SplittableRandom;

/**
 * The fence index operator's location path alone, on one thread, without Flink (issue 18, items 2
 * and 4): a fleet's locations go through the operator's own {@link LocationPath}, held by its
 * {@link EventClock} and released a watermark at a time (every 200 ms of event time, 1 s behind
 * the newest location, as the job's bounded out-of-orderness has it), then evaluated by its
 * {@link Evaluation} against fences like bench/job's
 * (96-vertex circles of 200 m to 2 km over a 30 x 30 degree box). Each variant runs over the same
 * locations, interleaved over rounds; figures are thread CPU time per location (which other
 * processes on the cores do not inflate), the median round. The clock alone (releasing to a no-op)
 * separates its cost from the evaluation's; one by one (batch 1) is the baseline of the batches.
 * Presence is kept in memory only here: keyed state is the job benchmark's (bench/run job).
 *
 * <p>Usage: LocationPathBenchmark [--fences N] [--vehicles N] [--locations N] [--rounds R] [--channels C]
 * (the locations arrive as an index subtask receives them from C parse subtasks, default 2).
 */
public final class LocationPathBenchmark {

  private static final int MAX_PARALLELISM = 128;
  private static final double SIDE = 30;
  private static final long RELEASE_EVERY_MS = 200;
  private static final long OUT_OF_ORDERNESS_MS = 1000;

  private LocationPathBenchmark() {}

  public static void main(String[] args) {
    int fences = 1_200_000;
    int vehicles = 200_000;
    int locations = 1_000_000;
    int rounds = 3;
    int channels = 2;
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--fences" -> fences = Integer.parseInt(args[i + 1]);
        case "--vehicles" -> vehicles = Integer.parseInt(args[i + 1]);
        case "--locations" -> locations = Integer.parseInt(args[i + 1]);
        case "--rounds" -> rounds = Integer.parseInt(args[i + 1]);
        case "--channels" -> channels = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    Fences set = fences(fences);
    Fleet fleet = new Fleet(vehicles, 0, 0, SIDE, SIDE, 1_700_000_000_000L, 1000, 13);
    // The first lap only places the vehicles (their first ENTERs); the measured locations follow.
    Location[] warm = new Location[vehicles];
    for (int n = 0; n < vehicles; n++) {
      warm[n] = fleet.location(n);
    }
    Location[] measured = new Location[locations];
    for (int n = 0; n < locations; n++) {
      measured[n] = fleet.location(vehicles + n);
    }
    warm = interleaved(warm, channels);
    measured = interleaved(measured, channels);
    System.out.printf(Locale.ROOT, "%,d fences, %,d vehicles every 1 s at about 13 m/s, %,d locations per pass, arriving as"
        + " from %d channels, %d rounds%n%n", fences, vehicles, locations, channels, rounds);
    String[] names = {"before: locations held in one heap, released to nothing", "clock alone (hold, release to nothing)",
        "clock + evaluation one by one (batch 1)", "clock + evaluation in batches of 64"};
    int[] batches = {-1, 0, 1, 64};
    double[][] micros = new double[names.length][rounds];
    long[] triggers = new long[names.length];
    long[] crossing = new long[names.length];
    for (int round = -1; round < rounds; round++) {
      for (int v = 0; v < names.length; v++) {
        double us;
        Pass pass = null;
        if (batches[v] < 0) {
          HeapBaseline heap = new HeapBaseline();
          heap.run(warm);
          long cpu = Measure.threadCpuNanos();
          heap.run(measured);
          us = (Measure.threadCpuNanos() - cpu) / 1e3 / locations;
        } else {
          pass = new Pass(set, batches[v]);
          pass.run(warm);
          long cpu = Measure.threadCpuNanos();
          pass.run(measured);
          us = (Measure.threadCpuNanos() - cpu) / 1e3 / locations;
        }
        if (round >= 0) {
          micros[v][round] = us;
        }
        if (pass != null) {
          triggers[v] = pass.triggers;
          crossing[v] = pass.crossing.size();
        }
      }
    }
    System.out.println("| path | CPU µs per location, median (rounds) | triggers per location | locations crossing a boundary |");
    System.out.println("|---|---:|---:|---:|");
    for (int v = 0; v < names.length; v++) {
      double[] sorted = micros[v].clone();
      Arrays.sort(sorted);
      System.out.printf(Locale.ROOT, "| %s | %.2f (%s) | %s | %s |%n", names[v], sorted[rounds / 2], describe(micros[v]),
          batches[v] <= 0 ? "" : String.format(Locale.ROOT, "%.4f", (double) triggers[v] / locations),
          batches[v] <= 0 ? "" : String.format(Locale.ROOT, "%.2f %%", 100.0 * crossing[v] / locations));
    }
    presenceMemory(set, warm, measured);
  }

  /**
   * The heap a subtask's presence takes per object (docs/performance.md#other-figures, issue 18
   * item 4): what the evaluation retains after both passes (every vehicle's newest time, the fences
   * it is inside), the used heap after a full collection with it and without it.
   */
  private static void presenceMemory(Fences set, Location[] warm, Location[] measured) {
    Pass pass = new Pass(set, 64);
    pass.run(warm);
    pass.run(measured);
    long with = usedAfterCollection();
    int objects = pass.evaluation.objects();
    long pairs = pass.inside;
    pass = null;
    long without = usedAfterCollection();
    System.out.printf(Locale.ROOT, "%npresence in memory: %,d bytes per object (%,d objects, %,d of (object, fence) inside),"
        + " %,d bytes in all%n", (with - without) / objects, objects, pairs, with - without);
  }

  private static long usedAfterCollection() {
    long used = Long.MAX_VALUE;
    // The smallest of a few: a collection may leave some of the garbage of the one before.
    for (int i = 0; i < 3; i++) {
      System.gc();
      Runtime runtime = Runtime.getRuntime();
      used = Math.min(used, runtime.totalMemory() - runtime.freeMemory());
    }
    return used;
  }

  /**
   * One pass of the operator's location path over a fresh membership: a ready index with no edits,
   * released every 200 ms; batch 0 is the clock alone, releasing to nothing.
   */
  private static final class Pass implements Membership {
    private static final int LAST_KEY_GROUP = MAX_PARALLELISM - 1;
    final Schedule schedule = new Schedule();
    final EventClock clock = new EventClock(schedule, LocationTimePolicy.defaults());
    final Evaluation evaluation;
    final LocationPath path;
    long triggers;
    /** Distinct locations (by object and time) with at least one trigger, of the measured pass. */
    final java.util.Set<Long> crossing = new java.util.HashSet<>();
    long nextRelease = Long.MIN_VALUE;
    /** (object, fence) pairs inside now. */
    long inside;

    Pass(Fences fences, int batch) {
      if (batch == 0) {
        evaluation = null;
        path = null;
        return;
      }
      FenceSet set = fences.set();
      BucketFingerprints fingerprints = fences.fingerprints();
      Readiness readiness = new Readiness(fingerprints, NO_TRANSITIONS);
      readiness.nothingToProve();
      if (!readiness.ready()) {
        throw new IllegalStateException("the index does not prove itself complete: " + readiness.phase());
      }
      FenceLedger ledger = new FenceLedger(set, fingerprints, schedule, (LedgerStore) NO_EDITS, clock, (FenceLedger.Listener) NO_EDITS);
      Admission admission = new Admission(LocationTimePolicy.defaults(), letter -> {
        throw new IllegalStateException("a fleet location refused: " + letter.reason);
      });
      evaluation = new Evaluation(set, ledger.history(), this, t -> {
        triggers++;
        crossing.add(t.eventTime * 1_000_003L + t.objectId.hashCode());
      }, admission, schedule::hasExit, MAX_PARALLELISM, 0, LAST_KEY_GROUP, batch,
          new Stays(StayRules.OFF, LocationTimePolicy.DEFAULT_ALLOWED_LATENESS.toMillis()));
      path = new LocationPath(clock, readiness, admission, evaluation, ledger, new HoldReport(null, Integer.MAX_VALUE), () -> {},
          0, LAST_KEY_GROUP);
    }

    void run(Location[] locations) {
      triggers = 0;
      crossing.clear();
      try {
        long newest = Long.MIN_VALUE;
        for (Location l : locations) {
          newest = Math.max(newest, l.timestamp);
          if (path == null) {
            clock.hold(l, 0, LAST_KEY_GROUP);
          } else {
            path.location(l);
          }
          if (l.timestamp >= nextRelease) {
            advanceTo(l.timestamp - OUT_OF_ORDERNESS_MS);
            nextRelease = l.timestamp + RELEASE_EVERY_MS;
          }
        }
        // Up to the pass's newest location, not beyond: the next pass goes on in time from there.
        advanceTo(newest);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }

    private void advanceTo(long time) throws Exception {
      if (path != null) {
        path.advanceTo(time);
      } else if (clock.advanceTo(time)) {
        clock.releaseUpTo(time, () -> true, NOTHING_DUE);
      }
    }

    @Override
    public void entered(String fenceId, String objectId, long since) {
      inside++;
    }

    @Override
    public void left(String fenceId, String objectId) {
      inside--;
    }
  }

  /**
   * What readiness tells: nothing this benchmark acts on. Not an inner class of a pass: the
   * fingerprints all passes share keep it, and a pass it kept would count in none's memory.
   */
  private static final Readiness.Listener NO_TRANSITIONS = new Readiness.Listener() {
    @Override
    public void becameReady() {}

    @Override
    public void distrusted(String reason) {
      throw new IllegalStateException(reason);
    }
  };

  /** The clock alone releases to nothing. */
  private static final EventClock.Due NOTHING_DUE = new EventClock.Due() {
    @Override
    public void applyPending(String key, long time) {
      throw new IllegalStateException("no edits in this benchmark");
    }

    @Override
    public void evaluate(Location location, int keyGroupStart, int keyGroupEnd) {}

    @Override
    public void exitDeleted(String key) {
      throw new IllegalStateException("no deletes in this benchmark");
    }
  };

  /**
   * The ledger's store and listener: this benchmark has no edits, so neither is ever called but
   * to flush (and a call of anything else fails it).
   */
  private static final Object NO_EDITS = Proxy.newProxyInstance(LocationPathBenchmark.class.getClassLoader(),
      new Class<?>[] {LedgerStore.class, FenceLedger.Listener.class}, (proxy, method, args) -> switch (method.getName()) {
        case "flush" -> null;
        case "toString" -> "no edits";
        case "hashCode" -> 0;
        case "equals" -> proxy == args[0];
        default -> throw new IllegalStateException("no edits in this benchmark, yet the ledger called " + method.getName());
      });

  /**
   * The order locations reach an index subtask from {@code channels} parse subtasks: the source's
   * sequence dealt round robin to the channels, each channel's buffers of 256 locations read in turn.
   */
  private static Location[] interleaved(Location[] sequence, int channels) {
    List<Location> arrival = new ArrayList<>(sequence.length);
    int perBuffer = 256;
    for (int round = 0; (long) round * perBuffer * channels < sequence.length; round++) {
      for (int c = 0; c < channels; c++) {
        for (int j = 0; j < perBuffer; j++) {
          long n = ((long) round * perBuffer + j) * channels + c;
          if (n < sequence.length) {
            arrival.add(sequence[(int) n]);
          }
        }
      }
    }
    return arrival.toArray(new Location[0]);
  }

  /**
   * The baseline of the clock's held locations: one heap in release order (time, then arrival), as
   * EventClock kept them before issue 18, on the same schedule.
   */
  private static final class HeapBaseline {
    private record Held(long arrival, Location location) {}

    private final PriorityQueue<Held> heap = new PriorityQueue<>(
        Comparator.<Held>comparingLong(h -> h.location().timestamp).thenComparingLong(Held::arrival));
    private long arrivals;
    private long released;
    private long nextRelease = Long.MIN_VALUE;

    void run(Location[] locations) {
      for (Location l : locations) {
        heap.add(new Held(arrivals++, l));
        if (l.timestamp >= nextRelease) {
          release(l.timestamp - OUT_OF_ORDERNESS_MS);
          nextRelease = l.timestamp + RELEASE_EVERY_MS;
        }
      }
      release(Long.MAX_VALUE);
    }

    private void release(long time) {
      while (!heap.isEmpty() && heap.peek().location().timestamp <= time) {
        heap.poll();
        released++;
      }
    }
  }

  /** The fences, and their buckets' fingerprints as read and as the source gives them: they match. */
  private record Fences(FenceSet set, BucketFingerprints fingerprints) {}

  /** Fences as bench/job loads into PostGIS: 96-vertex circles of radius 0.002 to 0.02 degrees. */
  private static Fences fences(int n) {
    SplittableRandom random = new SplittableRandom(18);
    FenceSet set = new FenceSet(new FenceIndex());
    for (int f = 0; f < n; f++) {
      double cx = random.nextDouble() * SIDE;
      double cy = random.nextDouble() * SIDE;
      double r = 0.002 + random.nextDouble() * 0.018;
      double[] xy = new double[2 * 97];
      for (int v = 0; v < 96; v++) {
        double a = 2 * Math.PI * v / 96;
        xy[2 * v] = cx + r * Math.cos(a);
        xy[2 * v + 1] = cy + r * Math.sin(a);
      }
      xy[192] = xy[0];
      xy[193] = xy[1];
      set.apply(FenceEdit.upsert("f-" + f, 1, FenceGeometry.fromArrays(xy, new int[] {0, 97}, new int[] {0, 1}), null,
          EditOrigin.SNAPSHOT, 0, 0));
    }
    set.index().prepareForQuery();
    BucketFingerprints fingerprints = new BucketFingerprints(MAX_PARALLELISM, 0, MAX_PARALLELISM - 1);
    long[] count = new long[FenceBuckets.COUNT];
    long[] checksum = new long[FenceBuckets.COUNT];
    for (int f = 0; f < n; f++) {
      String id = "f-" + f;
      fingerprints.add(id, 1);
      count[FenceBuckets.of(id)]++;
      checksum[FenceBuckets.of(id)] ^= FenceChecksum.hash(id, 1);
    }
    for (int b = 0; b < FenceBuckets.COUNT; b++) {
      fingerprints.expect(b, count[b], checksum[b], 1);
    }
    return new Fences(set, fingerprints);
  }

  private static String describe(double[] rounds) {
    List<String> parts = new ArrayList<>();
    for (double r : rounds) {
      parts.add(String.format(Locale.ROOT, "%.2f", r));
    }
    return String.join(", ", parts);
  }
}
