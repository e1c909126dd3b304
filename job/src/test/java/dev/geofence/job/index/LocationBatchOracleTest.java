package dev.geofence.job.index;

import dev.geofence.job.operator.FenceKey;
import static dev.geofence.job.index.FenceIndexOperatorTest.delete;
import static dev.geofence.job.index.FenceIndexOperatorTest.location;
import static dev.geofence.job.index.FenceIndexOperatorTest.triggers;
import static dev.geofence.job.index.FenceIndexOperatorTest.upsert;
import static dev.geofence.job.index.FenceIndexOperatorTest.watermark;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.SplittableRandom;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;

/**
 * The operator evaluating the locations its clock releases in batches emits exactly what it emits
 * evaluating them one by one (batch size 1, the oracle), over generated histories: fences created,
 * reshaped and deleted between the locations; locations on time, ahead of the clock (held),
 * late within the allowed lateness (against the fence versions of their time), too late,
 * out of their object's order, and of the same time; spells where a bucket's fingerprint runs
 * ahead of its edit, so that the index is not ready and locations are held while edits apply,
 * then evaluated against the history; restores from snapshots with locations held.
 */
class LocationBatchOracleTest {

  private static final long LATENESS = 5_000;
  private static final LocationTimePolicy POLICY = new LocationTimePolicy(Duration.ofMillis(LATENESS), Duration.ofMinutes(1));
  private static final int[] BATCH_SIZES = {1, 3, 64};
  private static final int CASES = 40;
  private static final int FENCES = 8;
  private static final int OBJECTS = 10;

  @Test
  void locationsEvaluatedInBatchesEmitWhatTheyEmitOneByOne() throws Exception {
    Map<String, Integer> seen = new HashMap<>();
    for (int c = 0; c < CASES; c++) {
      List<Step> steps = history(new SplittableRandom(16_18L + c), seen);
      Outputs oracle = run(steps, BATCH_SIZES[0]);
      for (int b = 1; b < BATCH_SIZES.length; b++) {
        Outputs batched = run(steps, BATCH_SIZES[b]);
        String which = String.format(Locale.ROOT, "case %d, batches of %d", c, BATCH_SIZES[b]);
        assertThat(batched.triggers).as(which).containsExactlyElementsOf(oracle.triggers);
        assertThat(batched.deadLetters).as(which).containsExactlyElementsOf(oracle.deadLetters);
        assertThat(batched.counts).as(which).isEqualTo(oracle.counts);
      }
      oracle.deadLetters.forEach(d -> seen.merge(d.substring(0, d.indexOf(' ')), 1, Integer::sum));
      seen.merge("triggers", oracle.triggers.size(), Integer::sum);
      seen.merge("late", (int) oracle.counts.get(0).longValue(), Integer::sum);
    }
    // The histories reach every rule: an absent one would make the comparison vacuous there.
    assertThat(seen.get("triggers")).isGreaterThan(2_000);
    assertThat(seen.get("late")).as("late locations evaluated against their time").isGreaterThan(200);
    assertThat(seen.get(LocationTimePolicy.LATE)).as("too late").isGreaterThan(50);
    assertThat(seen.get(LocationTimePolicy.OUT_OF_ORDER)).as("out of order").isGreaterThan(50);
    assertThat(seen.get("held while not ready")).as("locations held while a fingerprint ran ahead").isGreaterThan(200);
    assertThat(seen.get("restore")).isGreaterThan(10);
  }

  /** One input of a history, applied alike to every operator under comparison. */
  private interface Step {
    void apply(Run run) throws Exception;
  }

  /** What an operator emitted over a history, across its restores. */
  private record Outputs(List<GeofenceTrigger> triggers, List<String> deadLetters, List<Long> counts) {}

  /** An operator under test, its harness replaced at each restore, and the source's fences. */
  private static final class Run {
    final int batchSize;
    final Map<String, Long> live = new HashMap<>();
    KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness;
    FenceIndexOperatorTest.Source source;
    final List<GeofenceTrigger> triggers = new ArrayList<>();
    final List<String> deadLetters = new ArrayList<>();
    long late;
    long outOfOrder;
    long tooLate;

    Run(int batchSize) throws Exception {
      this.batchSize = batchSize;
      open(null);
    }

    void open(OperatorSubtaskState snapshot) throws Exception {
      harness = FenceIndexOperatorTest.harness(
          new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB, null, null, POLICY)
              .evaluatingInBatchesOf(batchSize), 1, 0, "hashmap");
      if (snapshot != null) {
        harness.initializeState(snapshot);
      }
      harness.open();
      source = new FenceIndexOperatorTest.Source(harness);
      source.live.putAll(live);
      // What the initial read of fence_bucket_stats brings, on a fresh start and on a restore.
      source.sendAllBuckets();
    }

    void restore() throws Exception {
      OperatorSubtaskState snapshot = harness.snapshot(1, 0);
      collect();
      harness.close();
      open(snapshot);
    }

    void collect() {
      triggers.addAll(triggers(harness));
      // Null until the operator emits a dead letter.
      Queue<StreamRecord<DeadLetter>> letters = harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS);
      for (StreamRecord<DeadLetter> r : letters == null ? List.<StreamRecord<DeadLetter>>of() : letters) {
        DeadLetter d = r.getValue();
        deadLetters.add(d.reason + " " + d.key + " " + d.eventTime + " " + d.detail + " " + d.payload);
      }
      late += FenceIndexOperatorTest.view(harness).lateLocations();
      outOfOrder += FenceIndexOperatorTest.view(harness).outOfOrderLocations();
      tooLate += FenceIndexOperatorTest.view(harness).tooLateLocations();
    }

    void send(FenceChange change) throws Exception {
      source.send(change);
      live.clear();
      live.putAll(source.live);
    }
  }

  private static Outputs run(List<Step> steps, int batchSize) throws Exception {
    Run run = new Run(batchSize);
    try {
      for (Step step : steps) {
        step.apply(run);
      }
      run.collect();
    } finally {
      run.harness.close();
    }
    return new Outputs(run.triggers, run.deadLetters, List.of(run.late, run.outOfOrder, run.tooLate));
  }

  /**
   * A history of about 600 steps. Commit times, like the stream's, never go back; locations'
   * times scatter around the newest commit time; watermarks trail it by a random amount.
   */
  private static List<Step> history(SplittableRandom random, Map<String, Integer> seen) throws Exception {
    List<Step> steps = new ArrayList<>();
    long[] seqs = new long[FENCES];
    boolean[] isLive = new boolean[FENCES];
    long[] newestOf = new long[OBJECTS];
    // An edit whose bucket's fingerprint was sent ahead of it: sent at step index due.
    Map<Integer, FenceChange> delayed = new HashMap<>();
    Set<Integer> awaited = new HashSet<>();
    for (int f = 0; f < FENCES; f++) {
      if (random.nextBoolean()) {
        seqs[f] = 1;
        isLive[f] = true;
        FenceChange snapshot = upsert(fenceId(f), 1, square(random), true, 0);
        steps.add(run -> run.send(snapshot));
      }
    }
    double watermarkChance = 0.03 + random.nextDouble() * 0.25;
    long now = 10_000;
    long watermark = Long.MIN_VALUE;
    boolean notReady = false;
    for (int i = 0; i < 600; i++) {
      now += random.nextInt(60);
      FenceChange due = delayed.remove(i);
      if (due != null) {
        // The edit the fingerprint announced, committed later than it.
        due.commitTime = now;
        due.lsn = now;
        awaited.remove(fenceNumber(due.fenceId));
        notReady = !awaited.isEmpty();
        steps.add(run -> run.send(due));
        continue;
      }
      double dice = random.nextDouble();
      if (dice < 0.12) {
        int f = random.nextInt(FENCES);
        if (awaited.contains(f)) {
          continue;
        }
        seqs[f]++;
        FenceChange edit = isLive[f] && random.nextInt(4) == 0 ? delete(fenceId(f), seqs[f], now)
            : upsert(fenceId(f), seqs[f], square(random), false, now);
        isLive[f] = !edit.delete;
        if (random.nextInt(6) == 0) {
          // Its bucket's fingerprint first: the index is not ready until the edit comes.
          long announced = now;
          String id = fenceId(f);
          long seq = seqs[f];
          boolean deleted = edit.delete;
          steps.add(run -> {
            if (deleted) {
              run.source.live.remove(id);
            } else {
              run.source.live.put(id, seq);
            }
            run.live.clear();
            run.live.putAll(run.source.live);
            run.source.sendBucket(FenceBuckets.of(id), false, announced);
          });
          delayed.put(i + 5 + random.nextInt(40), edit);
          awaited.add(f);
          notReady = true;
        } else {
          steps.add(run -> run.send(edit));
        }
      } else if (dice < 0.70) {
        int o = random.nextInt(OBJECTS);
        long t = switch (random.nextInt(10)) {
          case 0, 1 -> now - random.nextInt((int) LATENESS);
          case 2 -> now - LATENESS - 1 - random.nextInt(3_000);
          case 3 -> newestOf[o] == 0 ? now : newestOf[o];
          case 4 -> newestOf[o] == 0 ? now : newestOf[o] - 1 - random.nextInt(500);
          default -> now + random.nextInt(200);
        };
        newestOf[o] = Math.max(newestOf[o], t);
        Location location = location("o" + o, t, random.nextDouble() * 10, random.nextDouble() * 10);
        if (notReady) {
          seen.merge("held while not ready", 1, Integer::sum);
        }
        steps.add(run -> run.harness.processElement2(location, location.timestamp));
      } else if (dice < 0.70 + watermarkChance) {
        long next = now - random.nextInt(500);
        if (next > watermark) {
          watermark = next;
          long w = next;
          steps.add(run -> watermark(run.harness, w));
        }
      } else if (dice > 0.995) {
        seen.merge("restore", 1, Integer::sum);
        steps.add(Run::restore);
      }
    }
    for (FenceChange late : delayed.values()) {
      now += 10;
      late.commitTime = now;
      late.lsn = now;
      steps.add(run -> run.send(late));
    }
    long end = now + 10 * LATENESS;
    steps.add(run -> watermark(run.harness, end));
    return steps;
  }

  private static String fenceId(int f) {
    return "f" + f;
  }

  private static int fenceNumber(String id) {
    return Integer.parseInt(id.substring(1));
  }

  /** A square of side 2 to 6 in the 10 x 10 box the locations fall in. */
  private static String square(SplittableRandom random) {
    double side = 2 + random.nextDouble() * 4;
    double x = random.nextDouble() * (10 - side);
    double y = random.nextDouble() * (10 - side);
    return String.format(Locale.ROOT, "POLYGON ((%f %f, %f %f, %f %f, %f %f, %f %f))",
        x, y, x + side, y, x + side, y + side, x, y + side, x, y);
  }
}
