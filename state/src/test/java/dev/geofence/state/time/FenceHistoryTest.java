package dev.geofence.state.time;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.state.geom.FenceGeometry;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class FenceHistoryTest {

  /** One fence's whole timeline, as a model: version i was in force from starts[i] (the first since ever). */
  private record Timeline(List<Long> starts, List<FenceGeometry> shapes, List<Long> seqs) {
    /** The index of the version in force at t. */
    int at(long t) {
      int i = 0;
      while (i + 1 < starts.size() && starts.get(i + 1) <= t) {
        i++;
      }
      return i;
    }
  }

  /**
   * 300 generated histories of 1 to 8 fences, each created, reshaped, deleted and re-created at
   * random times (ties included), pruned at random horizons: for every time at or after the
   * horizon, the history names exactly the fences changed since, with the version of then, which
   * of them were deleted since, and, for points in and around them, exactly those whose version of
   * then has the point in its envelope.
   */
  @Test
  void answersEveryTimeAtOrAfterTheHorizonAsTheWholeTimelineDoes() {
    SplittableRandom random = new SplittableRandom(16);
    for (int round = 0; round < 300; round++) {
      FenceHistory history = new FenceHistory();
      Map<String, Timeline> model = new HashMap<>();
      int fenceCount = 1 + random.nextInt(8);
      long horizon = Long.MIN_VALUE;
      for (int f = 0; f < fenceCount; f++) {
        String id = "f" + f;
        Timeline line = new Timeline(new ArrayList<>(List.of(Long.MIN_VALUE)), new ArrayList<>(), new ArrayList<>(List.of(0L)));
        line.shapes().add(null);
        long t = random.nextLong(0, 50);
        for (int e = 0, edits = random.nextInt(6); e < edits; e++) {
          t += random.nextInt(4) == 0 ? 0 : random.nextLong(1, 40);
          FenceGeometry shape = random.nextInt(3) == 0 ? null : square(random.nextDouble(5), random.nextDouble(5));
          int last = line.starts().size() - 1;
          boolean recorded = history.superseded(id,
              new FenceHistory.Version(line.seqs().get(last), line.shapes().get(last), null, StayRules.NO_FENCE_DELAY, t));
          // A version replaced at the instant it began was never in force.
          assertThat(recorded).isEqualTo(t > line.starts().get(last));
          if (recorded) {
            line.starts().add(t);
            line.shapes().add(shape);
            line.seqs().add(line.seqs().get(last) + 1);
          } else {
            line.shapes().set(last, shape);
            line.seqs().set(last, line.seqs().get(last) + 1);
          }
        }
        model.put(id, line);
      }
      if (random.nextBoolean()) {
        horizon = random.nextLong(0, 200);
        history.pruneUpTo(horizon);
      }
      long held = 0;
      for (Timeline line : model.values()) {
        for (int i = 1; i < line.starts().size(); i++) {
          held += line.starts().get(i) > horizon ? 1 : 0;
        }
      }
      assertThat(history.versions()).as("versions ending after the horizon").isEqualTo(held);
      for (long t = Math.max(0, horizon); t < 260; t += 1 + random.nextInt(3)) {
        // Half the points in some version's square, so that the spatial answers are seldom empty.
        List<FenceGeometry> shapes = model.values().stream().flatMap(l -> l.shapes().stream()).filter(g -> g != null).toList();
        FenceGeometry aim = shapes.isEmpty() || random.nextBoolean() ? null : shapes.get(random.nextInt(shapes.size()));
        double x = aim == null ? random.nextDouble(-0.5, 6.5) : random.nextDouble(aim.minX(), aim.maxX());
        double y = aim == null ? random.nextDouble(-0.5, 6.5) : random.nextDouble(aim.minY(), aim.maxY());
        Map<String, FenceHistory.Version> near = new HashMap<>();
        boolean anyChanged = false;
        for (Map.Entry<String, Timeline> e : model.entrySet()) {
          Timeline line = e.getValue();
          int now = line.starts().size() - 1;
          int atT = line.at(t);
          FenceHistory.Version past = history.versionAt(e.getKey(), t);
          if (atT == now) {
            assertThat(past).as("round %d, %s at %d: unchanged since", round, e.getKey(), t).isNull();
            continue;
          }
          anyChanged = true;
          assertThat(past).as("round %d, %s at %d: changed since", round, e.getKey(), t).isNotNull();
          FenceGeometry shape = line.shapes().get(atT);
          if (shape != null && shape.minX() <= x && x <= shape.maxX() && shape.minY() <= y && y <= shape.maxY()) {
            near.put(e.getKey(), past);
          }
          assertThat(past.seq()).isEqualTo(line.seqs().get(atT));
          assertThat(past.geometry()).isEqualTo(line.shapes().get(atT));
          assertThat(past.until()).isEqualTo(line.starts().get(atT + 1));
          boolean deletedSince = false;
          for (int i = atT + 1; i <= now; i++) {
            deletedSince |= line.shapes().get(i) == null;
          }
          assertThat(history.deletedAfter(e.getKey(), t, line.shapes().get(now) == null))
              .as("round %d, %s deleted after %d", round, e.getKey(), t).isEqualTo(deletedSince);
        }
        assertThat(history.changedAfterNear(x, y, t)).as("round %d, near (%.2f, %.2f) at %d", round, x, y, t)
            .containsExactlyInAnyOrderEntriesOf(near);
        if (anyChanged) {
          assertThat(history.anyChangedAfter(t)).as("the quick test never skips a change").isTrue();
        }
      }
    }
  }

  @Test
  void pruningEmptiesTheHistoryAndForgettingDropsAFence() {
    FenceHistory history = new FenceHistory();
    history.superseded("a", new FenceHistory.Version(0, null, null, StayRules.NO_FENCE_DELAY, 100));
    history.superseded("a", new FenceHistory.Version(1, square(0, 0), "acme", StayRules.NO_FENCE_DELAY, 200));
    history.superseded("b", new FenceHistory.Version(0, null, null, StayRules.NO_FENCE_DELAY, 150));
    assertThat(history.versions()).isEqualTo(3);
    history.pruneUpTo(100);
    assertThat(history.of("a")).extracting(FenceHistory.Version::seq).containsExactly(1L);
    assertThat(history.versionAt("a", 120).covers(0.5, 0.5, "acme")).isTrue();
    assertThat(history.versionAt("a", 120).covers(0.5, 0.5, "other")).as("tenant scoping").isFalse();
    assertThat(history.changedAfterNear(0.5, 0.5, 120)).containsOnlyKeys("a");
    history.pruneUpTo(200);
    assertThat(history.of("a")).isEmpty();
    assertThat(history.changedAfterNear(0.5, 0.5, 120)).as("pruned from the spatial index too").isEmpty();
    history.forget("b");
    assertThat(history.versions()).isZero();
    assertThat(history.versionAt("b", 0)).isNull();
    history.superseded("c", new FenceHistory.Version(1, square(0, 0), null, StayRules.NO_FENCE_DELAY, 300));
    history.forget("c");
    assertThat(history.changedAfterNear(0.5, 0.5, 0)).as("forgotten from the spatial index too").isEmpty();
  }

  /**
   * 200 generated runs of versions recorded, pruned, forgotten (a read of the source) and
   * checkpointed at rising horizons, the durable copy made only of what each checkpoint says to
   * write and remove, and restored into a new history now and then: after every checkpoint the
   * copy holds exactly the versions held that end after its horizon, which a restore then holds.
   */
  @Test
  void theDurableCopyHoldsExactlyWhatACheckpointStillNeeds() {
    SplittableRandom random = new SplittableRandom(18);
    for (int round = 0; round < 200; round++) {
      FenceHistory history = new FenceHistory();
      Map<String, TreeMap<Long, Long>> copy = new HashMap<>();
      Map<String, Long> lastEnd = new HashMap<>();
      long horizon = 0;
      long time = 0;
      for (int step = 0; step < 60; step++) {
        int what = random.nextInt(10);
        String id = "f" + random.nextInt(6);
        if (what < 5) {
          time += random.nextInt(4) == 0 ? 0 : random.nextLong(1, 30);
          long until = Math.max(time, horizon + 1);
          boolean recorded = history.superseded(id, new FenceHistory.Version(step, null, null, StayRules.NO_FENCE_DELAY, until));
          assertThat(recorded).isEqualTo(until > lastEnd.getOrDefault(id, Long.MIN_VALUE));
          if (recorded) {
            lastEnd.put(id, until);
          }
        } else if (what < 7) {
          horizon += random.nextLong(0, 40);
          history.pruneUpTo(horizon);
        } else if (what == 7) {
          history.forget(id);
          copy.remove(id);
          lastEnd.remove(id);
        } else {
          horizon += random.nextLong(0, 20);
          FenceHistory.Checkpoint checkpoint = history.checkpoint(horizon);
          for (FenceHistory.Kept kept : checkpoint.write()) {
            copy.computeIfAbsent(kept.fenceId(), f -> new TreeMap<>()).put(kept.version().until(), kept.version().seq());
          }
          for (String forgotten : checkpoint.forgetUpToHorizon()) {
            copy.getOrDefault(forgotten, new TreeMap<>()).headMap(horizon, true).clear();
          }
          Map<String, Map<Long, Long>> needed = new HashMap<>();
          Map<String, Map<Long, Long>> copied = new HashMap<>();
          for (String f : List.of("f0", "f1", "f2", "f3", "f4", "f5")) {
            for (FenceHistory.Version v : history.of(f)) {
              if (v.until() > horizon) {
                needed.computeIfAbsent(f, x -> new HashMap<>()).put(v.until(), v.seq());
              }
            }
            copy.getOrDefault(f, new TreeMap<>()).forEach((until, seq) -> copied.computeIfAbsent(f, x -> new HashMap<>()).put(until, seq));
          }
          assertThat(copied).as("round %d, step %d, checkpoint at %d", round, step, horizon).isEqualTo(needed);
          if (random.nextInt(3) == 0) {
            history = new FenceHistory();
            lastEnd.clear();
            for (Map.Entry<String, TreeMap<Long, Long>> fence : copy.entrySet()) {
              for (Map.Entry<Long, Long> v : fence.getValue().entrySet()) {
                assertThat(history.restored(fence.getKey(), new FenceHistory.Version(v.getValue(), null, null, StayRules.NO_FENCE_DELAY, v.getKey()))).isTrue();
                lastEnd.put(fence.getKey(), v.getKey());
              }
            }
          }
        }
      }
    }
  }

  private static FenceGeometry square(double x, double y) {
    return FenceGeometry.fromArrays(new double[] {x, y, x + 1, y, x + 1, y + 1, x, y + 1, x, y}, new int[] {0, 5}, new int[] {0, 1});
  }
}
