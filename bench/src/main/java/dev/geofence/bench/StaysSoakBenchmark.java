package dev.geofence.bench;

import dev.geofence.bench.LocationPathBenchmark.Fences;
import dev.geofence.bench.LocationPathBenchmark.Pass;
import dev.geofence.connectors.location.Fleet;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.apache.flink.util.TimeUtils;

/**
 * The location path's memory over a long span of event time with objects falling silent (issue
 * 38's soak): a fleet of {@code --vehicles} reporting every second at once, each vehicle for a
 * random span (uniform over {@code --span-minutes}) and then never again, replaced by a vehicle of
 * a new id, through the operator's own {@link dev.geofence.job.index.LocationPath} (as bench/run
 * path drives it: released every 200 ms of event time, 1 s behind the newest location), with what
 * a checkpoint does to its memory every {@code --checkpoint-every} of event time (the objects seen
 * no more within the allowed lateness forgotten). Once with the dwell delay and presence timeout,
 * once with stays off, over the same locations, one after the other in this JVM; every {@code
 * --rows-every} of event time a row of each, printed side by side at the end: objects held,
 * (object, fence) pairs inside, the stays' pending DWELLs, the heap after a
 * full collection (beyond what the fences took before the run), triggers, CPU per location.
 *
 * <p>With silence on, a vehicle that stopped inside fences EXITs them after the timeout and is
 * forgotten at the next checkpoint past the lateness: the objects held stay flat. With it off,
 * it stays inside, and held, for good. The fences are the path benchmark's, in a box scaled to
 * keep their density (30 degrees wide at 1.2 M: about half the box inside one).
 *
 * <p>Usage: StaysSoakBenchmark [--fences 100000] [--vehicles 5000] [--hours 4] [--span-minutes 1,60]
 * [--dwell-delay 5min] [--presence-timeout 10min] [--checkpoint-every 10s] [--rows-every 30min]
 */
public final class StaysSoakBenchmark {

  private static final long START = 1_700_000_000_000L;
  private static final long EVERY_MS = 1000;
  private static final long LATENESS_MS = LocationTimePolicy.DEFAULT_ALLOWED_LATENESS.toMillis();
  /** Virtual vehicle ids of the fleet: one vehicle of it per id ever reporting. */
  private static final int IDS = 1 << 30;
  /** Event-time seconds each variant runs first, thrown away: at least these, and at least so many locations. */
  private static final long WARM_UP_LAPS = 600;
  private static final long WARM_UP_LOCATIONS = 2_000_000;

  private StaysSoakBenchmark() {}

  /** One variant's state at a time of the run. */
  private record Row(long at, long vehicles, long silent, int objects, long inside, int pending, int queued, long heap,
      long dwells, long silences, long locations, long cpuNanos) {}

  public static void main(String[] args) throws Exception {
    int fences = 100_000;
    int vehicles = 5_000;
    double hours = 4;
    long minSpan = Duration.ofMinutes(1).toMillis();
    long maxSpan = Duration.ofMinutes(60).toMillis();
    Duration dwellDelay = Duration.ofMinutes(5);
    Duration presenceTimeout = Duration.ofMinutes(10);
    long checkpointEvery = Duration.ofSeconds(10).toMillis();
    long rowsEvery = Duration.ofMinutes(30).toMillis();
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--fences" -> fences = Integer.parseInt(args[i + 1]);
        case "--vehicles" -> vehicles = Integer.parseInt(args[i + 1]);
        case "--hours" -> hours = Double.parseDouble(args[i + 1]);
        case "--span-minutes" -> {
          String[] range = args[i + 1].split(",");
          minSpan = Duration.ofMinutes(Long.parseLong(range[0])).toMillis();
          maxSpan = Duration.ofMinutes(Long.parseLong(range[1])).toMillis();
        }
        case "--dwell-delay" -> dwellDelay = TimeUtils.parseDuration(args[i + 1]);
        case "--presence-timeout" -> presenceTimeout = TimeUtils.parseDuration(args[i + 1]);
        case "--checkpoint-every" -> checkpointEvery = TimeUtils.parseDuration(args[i + 1]).toMillis();
        case "--rows-every" -> rowsEvery = TimeUtils.parseDuration(args[i + 1]).toMillis();
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    if (!(0 < minSpan && minSpan <= maxSpan)) {
      throw new IllegalArgumentException("--span-minutes MIN,MAX with 0 < MIN <= MAX");
    }
    StayRules on = new StayRules(dwellDelay, presenceTimeout);
    double side = 30 * Math.sqrt(fences / 1_200_000.0);
    long laps = Math.round(hours * 3600_000 / EVERY_MS);
    System.out.printf(Locale.ROOT, "%,d fences in a box %.2f degrees wide; %,d vehicles reporting every 1 s at once, each for %s to %s"
        + " (uniform) and then never again, replaced by a new id; %s of event time (%,d locations); a checkpoint's forgetting every %s;"
        + " on: %s; off: stays off; allowed lateness %s; load average %s%n%n", fences, side, vehicles,
        LocationPathBenchmark.human(minSpan), LocationPathBenchmark.human(maxSpan), clock(laps * EVERY_MS), laps * vehicles,
        LocationPathBenchmark.human(checkpointEvery), LocationPathBenchmark.describe(on), LocationPathBenchmark.human(LATENESS_MS),
        Measure.load());
    Fences set = LocationPathBenchmark.fences(fences, side);
    // A warm-up of each, thrown away: the compilers have both paths, and the index's lazy parts are
    // made before the first variant's heap is measured.
    long warmUp = Math.min(laps, Math.max(WARM_UP_LAPS, WARM_UP_LOCATIONS / vehicles));
    soak(null, set, on, side, vehicles, warmUp, minSpan, maxSpan, checkpointEvery, Long.MAX_VALUE);
    soak(null, set, StayRules.OFF, side, vehicles, warmUp, minSpan, maxSpan, checkpointEvery, Long.MAX_VALUE);
    List<Row> withStays = soak("on", set, on, side, vehicles, laps, minSpan, maxSpan, checkpointEvery, rowsEvery);
    List<Row> without = soak("off", set, StayRules.OFF, side, vehicles, laps, minSpan, maxSpan, checkpointEvery, rowsEvery);
    print(withStays, without, on, maxSpan, checkpointEvery);
    System.out.printf(Locale.ROOT, "%nload average at the end %s%n", Measure.load());
  }

  /** One variant's run over the whole span: a row every {@code rowsEvery} of event time (none unlabelled: a warm-up). */
  private static List<Row> soak(String label, Fences set, StayRules rules, double side, int vehicles, long laps, long minSpan,
      long maxSpan, long checkpointEvery, long rowsEvery) throws Exception {
    Fleet fleet = new Fleet(IDS, 0, 0, side, side, START, EVERY_MS, 13);
    Churn churn = new Churn(vehicles, minSpan, maxSpan);
    Location[] lap = new Location[vehicles];
    long before = label == null ? 0 : Measure.usedHeap();
    Pass pass = new Pass(set, 64, rules, LATENESS_MS);
    List<Row> rows = new ArrayList<>();
    long nextCheckpoint = START + checkpointEvery;
    long nextRow = START + rowsEvery;
    long cpu = 0;
    long located = 0;
    long wall = System.nanoTime();
    for (long k = 0; k < laps; k++) {
      churn.lap(k, fleet, lap);
      long end = START + (k + 1) * EVERY_MS;
      long from = Measure.threadCpuNanos();
      for (Location l : lap) {
        pass.offer(l);
      }
      if (end >= nextCheckpoint) {
        pass.checkpoint();
        nextCheckpoint += checkpointEvery;
      }
      cpu += Measure.threadCpuNanos() - from;
      located += lap.length;
      if (label != null && (end >= nextRow || k == laps - 1)) {
        // The benchmark's own set of the locations with triggers counts in no heap figure.
        pass.dropCrossing();
        long heap = Measure.usedHeap() - before;
        Row row = new Row(end - START, churn.nextId, churn.nextId - vehicles, pass.evaluation.objects(), pass.inside,
            pass.evaluation.pendingDwells(), pass.evaluation.queuedDecisions(), heap,
            pass.count(TriggerKind.DWELL, TriggerCause.LOITERING), pass.count(TriggerKind.EXIT, TriggerCause.SILENCE), located, cpu);
        rows.add(row);
        nextRow += rowsEvery;
        System.err.printf(Locale.ROOT, "%s %s: %,d objects held, %,d inside, %,d pending, heap %.1f MB (%.0f s)%n", label, clock(row.at()),
            row.objects(), row.inside(), row.pending(), heap / 1e6, (System.nanoTime() - wall) / 1e9);
      }
    }
    return rows;
  }

  private static void print(List<Row> on, List<Row> off, StayRules rules, long maxSpan, long checkpointEvery) {
    System.out.println("| event time | vehicles so far / silent for good | objects held: on / off | (object, fence) inside: on / off"
        + " | pending DWELLs: on (queued for the clock) | heap MB beyond the fences: on / off | bytes per object held: on / off"
        + " | DWELL / EXIT by silence so far: on | CPU ns per location since the row before: on / off |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (int i = 0; i < on.size(); i++) {
      Row a = on.get(i);
      Row b = off.get(i);
      Row pa = i == 0 ? null : on.get(i - 1);
      Row pb = i == 0 ? null : off.get(i - 1);
      System.out.printf(Locale.ROOT, "| %s | %,d / %,d | %,d / %,d | %,d / %,d | %,d (%,d) | %.1f / %.1f | %,d / %,d | %,d / %,d | %.0f / %.0f |%n",
          clock(a.at()), a.vehicles(), a.silent(), a.objects(), b.objects(), a.inside(), b.inside(), a.pending(), a.queued(),
          a.heap() / 1e6, b.heap() / 1e6, a.heap() / Math.max(1, a.objects()), b.heap() / Math.max(1, b.objects()), a.dwells(),
          a.silences(), nanos(a, pa), nanos(b, pb));
    }
    Row a = on.get(on.size() - 1);
    Row b = off.get(off.size() - 1);
    double ra = (double) a.cpuNanos() / a.locations();
    double rb = (double) b.cpuNanos() / b.locations();
    System.out.printf(Locale.ROOT, "%nCPU per location over the whole run (thread CPU of the location path and the checkpoints' forgetting,"
        + " not of making the locations): on %.0f ns (%,.0f locations/s of one core), off %.0f ns (%,.0f/s): on/off %.3f of off's"
        + " locations/s (the two ran one after the other, not interleaved).%n", ra, 1e9 / ra, rb, 1e9 / rb, rb / ra);
    // From the first row by which every vehicle of the start has stopped and had its silence decided and forgotten.
    long steady = maxSpan + rules.presenceTimeout().toMillis() + LATENESS_MS + checkpointEvery;
    int from = 0;
    while (from < on.size() - 1 && on.get(from).at() < steady) {
      from++;
    }
    Row a0 = on.get(from);
    Row b0 = off.get(from);
    System.out.printf(Locale.ROOT, "from %s (the longest span, the timeout, the lateness and a checkpoint after the start) to %s:"
        + " objects held on %,d -> %,d (%+.1f %%), off %,d -> %,d (%+.1f %%); heap on %.1f -> %.1f MB, off %.1f -> %.1f MB.%n",
        clock(a0.at()), clock(a.at()), a0.objects(), a.objects(), growth(a0.objects(), a.objects()), b0.objects(), b.objects(),
        growth(b0.objects(), b.objects()), a0.heap() / 1e6, a.heap() / 1e6, b0.heap() / 1e6, b.heap() / 1e6);
    System.out.println("Heap: used after full collections, less the same before the variant's location path was made (the fences"
        + " and the run's fleet then); queued: the entries of the clock's two queues (DWELLs, silence watches), those of stays ended before their DWELL included.");
  }

  private static double nanos(Row row, Row before) {
    long locations = row.locations() - (before == null ? 0 : before.locations());
    long cpu = row.cpuNanos() - (before == null ? 0 : before.cpuNanos());
    return (double) cpu / Math.max(1, locations);
  }

  private static double growth(long from, long to) {
    return from == 0 ? 0 : 100.0 * (to - from) / from;
  }

  /** Event time since the start as h:mm. */
  private static String clock(long millis) {
    long minutes = millis / 60_000;
    return String.format(Locale.ROOT, "%d:%02d", minutes / 60, minutes % 60);
  }

  /**
   * The fleet's slots, each a vehicle reporting every second until its span ends, then a new one:
   * the same sequence for both variants (seeded).
   */
  private static final class Churn {
    private final long[] ids;
    private final long[] ends;
    private final long minSpan;
    private final long maxSpan;
    private final SplittableRandom random = new SplittableRandom(38);
    long nextId;

    Churn(int slots, long minSpan, long maxSpan) {
      this.minSpan = minSpan;
      this.maxSpan = maxSpan;
      ids = new long[slots];
      ends = new long[slots];
      for (int s = 0; s < slots; s++) {
        ids[s] = nextId++;
        // The first vehicles are met midway through their spans, so that they do not all stop together.
        ends[s] = START + (long) (random.nextDouble() * span());
      }
    }

    private long span() {
      return minSpan + (long) (random.nextDouble() * (maxSpan - minSpan));
    }

    /** Lap {@code k}: each slot's location, spread over the lap's second in slot order. */
    void lap(long k, Fleet fleet, Location[] into) {
      long base = START + k * EVERY_MS;
      for (int s = 0; s < into.length; s++) {
        if (base >= ends[s]) {
          ids[s] = nextId++;
          ends[s] = base + span();
        }
        // The fleet's vehicle ids[s], at lap k: its ring road and where on it (Fleet's own model).
        Location l = fleet.location(k * IDS + ids[s]);
        l.timestamp = base + s * EVERY_MS / into.length;
        into[s] = l;
      }
    }
  }
}
