package dev.geofence.bench;

import dev.geofence.connectors.location.Fleet;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.connectors.model.TriggerCause;
import dev.geofence.connectors.model.TriggerKind;
import dev.geofence.job.hold.HoldReport;
import dev.geofence.job.index.Admission;
import dev.geofence.job.index.Evaluation;
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
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import org.apache.flink.util.TimeUtils;

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
 * <p>Then stays (issue 38) side by side, in the same rounds: the same fleet with one vehicle in 20
 * falling silent after the first lap, evaluated with stays off, with the given dwell delay and
 * presence timeout, and with both scaled down to the measured pass's few seconds of event time
 * when they are too long for anything to be decided in it: CPU per location against off, the
 * DWELL and silence EXIT triggers each emitted, the objects held and the heap per object. The
 * last of those rows runs once more over a second set of the same fences, each carrying that delay
 * as its own with the job's off: the same decisions, plus the lookup of a fence's delay at each
 * ENTER.
 *
 * <p>Usage: LocationPathBenchmark [--fences N] [--vehicles N] [--locations N] [--rounds R] [--channels C]
 * [--dwell-delay 5min] [--presence-timeout 10min]
 * (the locations arrive as an index subtask receives them from C parse subtasks, default 2).
 */
public final class LocationPathBenchmark {

  private static final int MAX_PARALLELISM = 128;
  private static final double SIDE = 30;
  private static final long RELEASE_EVERY_MS = 200;
  private static final long OUT_OF_ORDERNESS_MS = 1000;
  private static final long EVERY_MS = 1000;
  private static final long LATENESS_MS = LocationTimePolicy.DEFAULT_ALLOWED_LATENESS.toMillis();
  /** In the stays comparison, one vehicle in this many reports in the first lap only, then falls silent. */
  private static final int SILENT_EVERY = 20;
  /** Scaled stays must be decided within this share of the measured pass's span. */
  private static final double SCALED_WITHIN = 0.8;

  /** One row: the locations it evaluates after the first lap, and its stays. */
  private record Variant(String name, int batch, StayRules rules, long staysLateness, Location[] locations, Fences fences) {}

  private LocationPathBenchmark() {}

  public static void main(String[] args) {
    int fences = 1_200_000;
    int vehicles = 200_000;
    int locations = 1_000_000;
    int rounds = 3;
    int channels = 2;
    Duration dwellDelay = Duration.ofMinutes(5);
    Duration presenceTimeout = Duration.ofMinutes(10);
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--fences" -> fences = Integer.parseInt(args[i + 1]);
        case "--vehicles" -> vehicles = Integer.parseInt(args[i + 1]);
        case "--locations" -> locations = Integer.parseInt(args[i + 1]);
        case "--rounds" -> rounds = Integer.parseInt(args[i + 1]);
        case "--channels" -> channels = Integer.parseInt(args[i + 1]);
        case "--dwell-delay" -> dwellDelay = TimeUtils.parseDuration(args[i + 1]);
        case "--presence-timeout" -> presenceTimeout = TimeUtils.parseDuration(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    Fences set = fences(fences, SIDE);
    Fleet fleet = new Fleet(vehicles, 0, 0, SIDE, SIDE, 1_700_000_000_000L, EVERY_MS, 13);
    // The first lap only places the vehicles (their first ENTERs); the measured locations follow.
    Location[] warm = new Location[vehicles];
    for (int n = 0; n < vehicles; n++) {
      warm[n] = fleet.location(n);
    }
    Location[] measured = new Location[locations];
    for (int n = 0; n < locations; n++) {
      measured[n] = fleet.location(vehicles + n);
    }
    // The stays comparison's: the same, less every location after the first lap of the vehicles that fall silent.
    List<Location> reporting = new ArrayList<>(locations);
    for (int n = 0; n < locations; n++) {
      if ((vehicles + n) % vehicles % SILENT_EVERY != SILENT_EVERY - 1) {
        reporting.add(measured[n]);
      }
    }
    Location[] quiet = interleaved(reporting.toArray(new Location[0]), channels);
    warm = interleaved(warm, channels);
    measured = interleaved(measured, channels);
    System.out.printf(Locale.ROOT, "%,d fences, %,d vehicles every 1 s at about 13 m/s, %,d locations per pass, arriving as"
        + " from %d channels, %d rounds%n%n", fences, vehicles, locations, channels, rounds);
    String[] names = {"before: locations held in one heap, released to nothing", "clock alone (hold, release to nothing)",
        "clock + evaluation one by one (batch 1)", "clock + evaluation in batches of 64"};
    int[] batches = {-1, 0, 1, 64};
    List<Variant> variants = new ArrayList<>();
    for (int v = 0; v < names.length; v++) {
      variants.add(new Variant(names[v], batches[v], StayRules.OFF, LATENESS_MS, measured, set));
    }
    // The stays' rows: as given, and scaled to the measured pass when what they decide comes after it.
    StayRules given = new StayRules(dwellDelay, presenceTimeout);
    long span = (long) locations * EVERY_MS / vehicles;
    long needs = Math.max(given.dwellDelay().toMillis(), given.presenceTimeout().toMillis()) + LATENESS_MS;
    double scale = Math.min(1, SCALED_WITHIN * span / needs);
    int staysFrom = variants.size();
    variants.add(new Variant("off", 64, StayRules.OFF, LATENESS_MS, quiet, set));
    variants.add(new Variant(describe(given) + (scale < 1 ? " (as given)" : ""), 64, given, LATENESS_MS, quiet, set));
    StayRules scaled = null;
    long scaledLateness = LATENESS_MS;
    if (scale < 1 && (given.dwells() || given.silences())) {
      scaled = new StayRules(Duration.ofMillis(Math.round(given.dwellDelay().toMillis() * scale)),
          Duration.ofMillis(Math.round(given.presenceTimeout().toMillis() * scale)));
      scaledLateness = Math.round(LATENESS_MS * scale);
      variants.add(new Variant(describe(scaled) + ", lateness " + human(scaledLateness) + " (scaled)", 64, scaled, scaledLateness, quiet,
          set));
    }
    // The last stays' row again with the delay as every fence's own and the job's off: the same
    // decisions, plus the lookup of the fence's delay at each ENTER (a delay per fence, issue 38).
    Variant last = variants.get(variants.size() - 1);
    if (last.rules().dwells()) {
      Fences own = fences(fences, SIDE, last.rules().dwellDelay().toMillis());
      variants.add(new Variant(last.name() + ", the delay each fence's own", 64,
          new StayRules(Duration.ZERO, last.rules().presenceTimeout()), last.staysLateness(), quiet, own));
    }
    double[][] micros = new double[variants.size()][rounds];
    long[] triggers = new long[variants.size()];
    long[] crossing = new long[variants.size()];
    for (int round = -1; round < rounds; round++) {
      for (int i = 0; i < variants.size(); i++) {
        // The stays' rows in turn first from round to round, so that none always follows the same one.
        int stays = variants.size() - staysFrom;
        int v = i < staysFrom ? i : staysFrom + (i - staysFrom + Math.max(round, 0)) % stays;
        Variant variant = variants.get(v);
        double us;
        Pass pass = null;
        if (variant.batch() < 0) {
          HeapBaseline heap = new HeapBaseline();
          heap.run(warm);
          long cpu = Measure.threadCpuNanos();
          heap.run(variant.locations());
          us = (Measure.threadCpuNanos() - cpu) / 1e3 / variant.locations().length;
        } else {
          pass = new Pass(variant.fences(), variant.batch(), variant.rules(), variant.staysLateness());
          pass.run(warm);
          long cpu = Measure.threadCpuNanos();
          pass.run(variant.locations());
          us = (Measure.threadCpuNanos() - cpu) / 1e3 / variant.locations().length;
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
    stays(warm, variants.subList(staysFrom, variants.size()), Arrays.copyOfRange(micros, staysFrom, variants.size()), given,
        scale, scaled, scaledLateness, span, locations - quiet.length);
  }

  /**
   * The stays' rows (issue 38): CPU per location against off, what each decided, the objects held
   * and, measured again by a pass of its own after the rounds, the heap retained per object.
   */
  private static void stays(Location[] warm, List<Variant> variants, double[][] micros, StayRules given,
      double scale, StayRules scaled, long scaledLateness, long span, int dropped) {
    System.out.printf(Locale.ROOT, "%nstays (issue 38), side by side in the same rounds, batches of 64: the same fleet, of which"
        + " 1 vehicle in %d reports in the first lap only and falls silent (%,d locations fewer: %,d a pass).%n", SILENT_EVERY,
        dropped, variants.get(0).locations().length);
    System.out.printf(Locale.ROOT, "%s with the allowed lateness %s: a DWELL or a silence's EXIT is decided by a location after the"
        + " delay or timeout, else by the clock that long and the lateness after; the measured pass spans %s of event time", describe(given),
        human(LATENESS_MS), human(span));
    if (scaled == null) {
      System.out.printf(Locale.ROOT, ".%n");
    } else {
      System.out.printf(Locale.ROOT, ", too short for them: also scaled x%.5f (1/%.0f) to decide within %.0f %% of it: %s, and the"
          + " stays' lateness %s (the clock's and the time rules' stay %s: no location of this fleet is late).%n", scale, 1 / scale,
          100 * SCALED_WITHIN, describe(scaled), human(scaledLateness), human(LATENESS_MS));
      if (scaled.silences() && scaled.presenceTimeout().toMillis() < 2 * EVERY_MS) {
        System.out.printf(Locale.ROOT, "warning: the scaled presence timeout is under two report intervals (%s): vehicles that go on"
            + " reporting fall silent between reports too; more --locations per vehicle lengthen the pass.%n", human(2 * EVERY_MS));
      }
    }
    System.out.println();
    System.out.println("| stays | CPU ns per location, median (rounds) | locations/s of one core | against off | ENTER | EXIT by location"
        + " | DWELL | EXIT by silence | objects held | pending DWELLs | (object, fence) inside | bytes of heap per object |");
    System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    double off = median(micros[0]);
    for (int v = 0; v < variants.size(); v++) {
      Variant variant = variants.get(v);
      // The counts and the heap of one more pass of its own, over the same locations: what the rounds'
      // passes did (the same locations decide the same), measured with nothing else of them alive.
      Pass pass = new Pass(variant.fences(), 64, variant.rules(), variant.staysLateness());
      pass.run(warm);
      pass.run(variant.locations());
      pass.dropCrossing();
      long with = usedAfterCollection();
      int objects = pass.evaluation.objects();
      String counts = String.format(Locale.ROOT, "%,d | %,d | %,d | %,d | %,d | %,d | %,d",
          pass.count(TriggerKind.ENTER, TriggerCause.LOCATION), pass.count(TriggerKind.EXIT, TriggerCause.LOCATION),
          pass.count(TriggerKind.DWELL, TriggerCause.LOITERING), pass.count(TriggerKind.EXIT, TriggerCause.SILENCE), objects,
          pass.evaluation.pendingDwells(), pass.inside);
      pass = null;
      long without = usedAfterCollection();
      System.out.printf(Locale.ROOT, "| %s | %.0f (%s) | %,.0f | %s | %s | %,d |%n", variant.name(), 1e3 * median(micros[v]),
          describeNanos(micros[v]), 1e6 / median(micros[v]), v == 0 ? "1" : String.format(Locale.ROOT, "%.3f", off / median(micros[v])),
          counts, (with - without) / objects);
    }
    System.out.println();
    System.out.println("CPU: thread CPU time per location of the measured pass (after the first lap), the median round;"
        + " against off: the row's locations/s over off's (below 1: fewer). Triggers: of the measured pass. Heap: used after a"
        + " full collection with the row's pass (clock, evaluation, stays, presence) alive, less without it, over the objects held.");
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
   * released every 200 ms; batch 0 is the clock alone, releasing to nothing. Also the stays soak's
   * (StaysSoakBenchmark), location by location ({@link #offer}).
   */
  static final class Pass implements Membership {
    private static final int LAST_KEY_GROUP = MAX_PARALLELISM - 1;
    private static final int CAUSES = TriggerCause.values().length;
    final Schedule schedule = new Schedule();
    final EventClock clock = new EventClock(schedule, LocationTimePolicy.defaults());
    final Evaluation evaluation;
    final LocationPath path;
    long triggers;
    /** Triggers by kind and cause, since the last {@link #run}. */
    private final long[] counts = new long[TriggerKind.values().length * CAUSES];
    /** Distinct locations (by object and time) with at least one trigger, of the measured pass. */
    java.util.Set<Long> crossing = new java.util.HashSet<>();
    long nextRelease = Long.MIN_VALUE;
    long newest = Long.MIN_VALUE;
    /** (object, fence) pairs inside now. */
    long inside;

    Pass(Fences fences, int batch) {
      this(fences, batch, StayRules.OFF, LATENESS_MS);
    }

    /** With these stays, whose decisions by the clock wait {@code staysLateness} (the allowed lateness in the job). */
    Pass(Fences fences, int batch, StayRules rules, long staysLateness) {
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
      evaluation = new Evaluation(set, ledger.history(), this, this::emitted, admission, schedule::hasExit, MAX_PARALLELISM, 0,
          LAST_KEY_GROUP, batch, rules, staysLateness);
      path = new LocationPath(clock, readiness, admission, evaluation, ledger, new HoldReport(null, Integer.MAX_VALUE), () -> {},
          0, LAST_KEY_GROUP);
    }

    private void emitted(GeofenceTrigger t) {
      triggers++;
      counts[t.kind.ordinal() * CAUSES + t.cause.ordinal()]++;
      crossing.add(t.eventTime * 1_000_003L + t.objectId.hashCode());
    }

    void run(Location[] locations) {
      triggers = 0;
      Arrays.fill(counts, 0);
      crossing.clear();
      try {
        for (Location l : locations) {
          offer(l);
        }
        // Up to the pass's newest location, not beyond: the next pass goes on in time from there.
        advanceTo(newest);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }

    /** One location of the stream, and the clock's step 1 s behind the newest every 200 ms of event time. */
    void offer(Location l) throws Exception {
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

    /** What a checkpoint does to the location path's memory: forgets the objects seen no more within the lateness. */
    void checkpoint() {
      evaluation.forgetOlderThan(clock.historyHorizon());
    }

    /** Triggers of this kind and cause since the last {@link #run}. */
    long count(TriggerKind kind, TriggerCause cause) {
      return counts[kind.ordinal() * CAUSES + cause.ordinal()];
    }

    /** Lets go of the distinct crossing locations, so that they count in no heap figure. */
    void dropCrossing() {
      crossing = new java.util.HashSet<>();
    }

    private void advanceTo(long time) throws Exception {
      if (path != null) {
        path.advanceTo(time);
      } else if (clock.advanceTo(time)) {
        clock.releaseUpTo(time, () -> true, NOTHING_DUE);
      }
    }

    @Override
    public void entered(String fenceId, String objectId, long since, long fenceSeq) {
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
  record Fences(FenceSet set, BucketFingerprints fingerprints) {}

  /**
   * Fences as bench/job loads into PostGIS: 96-vertex circles of radius 0.002 to 0.02 degrees, in
   * a box {@code side} degrees wide (30 here: 1.2 M of them cover about half the box).
   */
  static Fences fences(int n, double side) {
    return fences(n, side, StayRules.NO_FENCE_DELAY);
  }

  /** The same fences, each with {@code dwellDelay} as its own ({@link StayRules#NO_FENCE_DELAY}: none). */
  static Fences fences(int n, double side, long dwellDelay) {
    SplittableRandom random = new SplittableRandom(18);
    FenceSet set = new FenceSet(new FenceIndex());
    for (int f = 0; f < n; f++) {
      double cx = random.nextDouble() * side;
      double cy = random.nextDouble() * side;
      double r = 0.002 + random.nextDouble() * 0.018;
      double[] xy = new double[2 * 97];
      for (int v = 0; v < 96; v++) {
        double a = 2 * Math.PI * v / 96;
        xy[2 * v] = cx + r * Math.cos(a);
        xy[2 * v + 1] = cy + r * Math.sin(a);
      }
      xy[192] = xy[0];
      xy[193] = xy[1];
      set.apply(FenceEdit.upsert("f-" + f, 1, FenceGeometry.fromArrays(xy, new int[] {0, 97}, new int[] {0, 1}), null, dwellDelay,
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

  /** The stays' rules in words. */
  static String describe(StayRules rules) {
    if (!rules.dwells() && !rules.silences()) {
      return "off";
    }
    return "dwell delay " + (rules.dwells() ? human(rules.dwellDelay().toMillis()) : "off") + ", presence timeout "
        + (rules.silences() ? human(rules.presenceTimeout().toMillis()) : "off");
  }

  /** Milliseconds in words: whole minutes as such, else seconds. */
  static String human(long millis) {
    if (millis % 60_000 == 0 && millis != 0) {
      return millis / 60_000 + " min";
    }
    return millis % 1000 == 0 ? millis / 1000 + " s" : String.format(Locale.ROOT, "%.2f s", millis / 1e3);
  }

  private static double median(double[] values) {
    double[] sorted = values.clone();
    Arrays.sort(sorted);
    return sorted[sorted.length / 2];
  }

  private static String describeNanos(double[] micros) {
    List<String> parts = new ArrayList<>();
    for (double r : micros) {
      parts.add(String.format(Locale.ROOT, "%.0f", r * 1e3));
    }
    return String.join(", ", parts);
  }

  private static String describe(double[] rounds) {
    List<String> parts = new ArrayList<>();
    for (double r : rounds) {
      parts.add(String.format(Locale.ROOT, "%.2f", r));
    }
    return String.join(", ", parts);
  }
}
