package dev.geofence.job.index;

import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.model.Location;
import dev.geofence.state.edit.EditOrigin;
import dev.geofence.state.edit.FenceEdit;
import dev.geofence.state.ledger.Queued;
import dev.geofence.state.ledger.Schedule;
import dev.geofence.state.time.LocationTimePolicy;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The time rule alone: every location released sees exactly the edits committed at or before its
 * time, on 300 generated histories of edits, locations, watermarks and readiness, checked against
 * a model that keeps every edit's time. While the index is not ready, edits go on (the stream must
 * reach the catch-up target) and locations wait: a location held through a warm-up sees the edits
 * applied meanwhile, which the model marks as such. A delete's EXITs queued behind held locations
 * ({@link Schedule#queueExit}) go only once no older location is held, ready or not, and before
 * any location of their time or later.
 */
class EventClockTest {

  @Test
  void everyReleasedLocationSeesExactlyTheEditsCommittedAtOrBeforeIt() throws Exception {
    for (int history = 0; history < 300; history++) {
      SplittableRandom random = new SplittableRandom(history);
      Schedule schedule = new Schedule();
      EventClock clock = new EventClock(schedule, LocationTimePolicy.defaults());
      clock.indexReady();
      // The model: each key's edits not applied yet, by time; and the times applied.
      Map<String, TreeMap<Long, Integer>> queued = new HashMap<>();
      Map<String, List<Long>> applied = new HashMap<>();
      List<Long> evaluated = new ArrayList<>();
      Map<String, TreeMap<Long, Integer>> exits = new HashMap<>();
      long[] lastExit = {Long.MIN_VALUE};
      boolean[] ready = {false};
      EventClock.Due due = new EventClock.Due() {
        @Override
        public void applyPending(String key, long time) {
          TreeMap<Long, Integer> pending = queued.get(key);
          while (!pending.isEmpty() && pending.firstKey() <= time) {
            long edit = pending.pollFirstEntry().getKey();
            applied.computeIfAbsent(key, k -> new ArrayList<>()).add(ready[0] ? edit : -1L);
          }
        }

        @Override
        public void evaluate(Location location, int start, int end) {
          assertThat(ready[0]).as("released only when ready").isTrue();
          long t = location.timestamp;
          for (Map.Entry<String, TreeMap<Long, Integer>> key : queued.entrySet()) {
            assertThat(key.getValue().headMap(t, true)).as("edits of %s at or before %d not applied", key.getKey(), t).isEmpty();
          }
          for (Map.Entry<String, List<Long>> key : applied.entrySet()) {
            assertThat(key.getValue()).as("edits of %s applied before a location at %d", key.getKey(), t).allMatch(e -> e <= t || e < 0);
          }
          assertThat(t).as("a location after the EXITs of a delete at %d", lastExit[0]).isGreaterThanOrEqualTo(lastExit[0]);
          evaluated.add(t);
        }

        @Override
        public void exitDeleted(String key) {
          TreeMap<Long, Integer> waiting = exits.get(key);
          long time = waiting.firstKey();
          waiting.merge(time, -1, (a, b) -> a + b == 0 ? null : a + b);
          assertThat(time).as("a delete's EXITs wait for the clock").isLessThanOrEqualTo(clock.time());
          assertThat(clock.held()).as("no location older than the delete at %d still held", time)
              .allMatch(p -> p.location.timestamp >= time);
          lastExit[0] = Math.max(lastExit[0], time);
        }
      };
      long watermark = 0;
      int locations = 0;
      for (int step = 0; step < 200; step++) {
        int what = random.nextInt(10);
        if (what < 4 && random.nextInt(4) == 0) {
          String key = "f" + random.nextInt(5);
          long time = watermark + random.nextInt(-5, 30);
          exits.computeIfAbsent(key, k -> new TreeMap<>()).merge(time, 1, Integer::sum);
          schedule.queueExit(key, time, 1);
        } else if (what < 4) {
          String key = "f" + random.nextInt(5);
          long time = watermark + random.nextInt(-5, 30);
          if (clock.appliesAtOnce(time, key)) {
            // Applied on arrival: the model marks it applied with a time no later location can precede.
            applied.computeIfAbsent(key, k -> new ArrayList<>()).add(-1L);
            assertThat(time).as("applied at once only when no location to come precedes it")
                .isLessThanOrEqualTo(Math.max(watermark, oldestHeld(evaluated, locations, clock)));
          } else {
            queued.computeIfAbsent(key, k -> new TreeMap<>()).merge(time, 1, Integer::sum);
            schedule.queue(Queued.of(FenceEdit.delete(key, 1, EditOrigin.STREAM, 0, time)));
          }
        } else if (what < 7) {
          long time = watermark + random.nextInt(1, 40);
          clock.hold(new Location("o" + random.nextInt(3), time, 0, 0, null), 0, 0);
          locations++;
        } else if (what < 9) {
          watermark += random.nextInt(1, 20);
          clock.locationWatermark(watermark);
          if (clock.advanceTo(watermark)) {
            clock.releaseUpTo(clock.time(), () -> ready[0], due);
          }
        } else {
          ready[0] = !ready[0] || random.nextInt(4) == 0;
          clock.releaseUpTo(clock.time(), () -> ready[0], due);
        }
      }
      clock.releaseUpTo(clock.time(), () -> ready[0], due);
      assertThat(evaluated).as("released in time order").isSorted();
      long oldest = clock.held().stream().mapToLong(p -> p.location.timestamp).min().orElse(Long.MAX_VALUE);
      exits.forEach((key, waiting) -> assertThat(waiting.keySet()).as("EXITs of %s still waiting", key)
          .allMatch(time -> time > clock.time() || time > oldest));
      assertThat(evaluated.size() + clock.heldLocations()).isEqualTo(locations);
    }
  }

  private static long oldestHeld(List<Long> evaluated, int locations, EventClock clock) {
    return clock.held().stream().mapToLong(p -> p.location.timestamp).min().orElse(Long.MAX_VALUE);
  }

  /**
   * While the index warms up an edit applies at once ahead of older held locations and of the
   * clock (they see it through the history), but never ahead of a pending edit of its own key.
   */
  @Test
  void warmingUpAnEditAppliesAheadOfOlderLocationsButNotOfItsKeysPendingEdits() {
    Schedule schedule = new Schedule();
    EventClock ready = new EventClock(schedule, LocationTimePolicy.defaults());
    EventClock warming = new EventClock(schedule, LocationTimePolicy.defaults());
    ready.indexReady();
    for (EventClock clock : List.of(ready, warming)) {
      clock.advanceTo(100);
      clock.hold(new Location("o1", 150, 0, 0, null), 0, 0);
      clock.locationWatermark(150);
    }
    assertThat(ready.appliesAtOnce(200, "f1")).as("ready: waits for the older location").isFalse();
    assertThat(warming.appliesAtOnce(200, "f1")).as("warming up: at once").isTrue();
    schedule.queue(Queued.of(FenceEdit.delete("f2", 1, EditOrigin.STREAM, 0, 180)));
    assertThat(warming.appliesAtOnce(200, "f2")).as("behind its key's pending edit").isFalse();
    assertThat(warming.appliesAtOnce(90, "f2")).as("behind the clock").isTrue();
  }

  @Test
  void heldLocationsKeepTheKeyGroupsTheyAreOwedTo() {
    EventClock clock = new EventClock(new Schedule(), LocationTimePolicy.defaults());
    clock.hold(new Location("o1", 10, 1, 2, null), 3, 7);
    assertThat(clock.held()).singleElement().satisfies(p -> {
      assertThat(p.location.objectId).isEqualTo("o1");
      assertThat(p.keyGroupStart).isEqualTo(3);
      assertThat(p.keyGroupEnd).isEqualTo(7);
    });
  }

  /** What a full hold's warning reports: how far the clock trails the newest location held, never less than 0. */
  @Test
  void theLagIsFromTheClockToTheNewestLocationHeld() {
    EventClock clock = new EventClock(new Schedule(), LocationTimePolicy.defaults());
    assertThat(clock.lagBehindHeld()).as("nothing held, no clock").isZero();
    clock.hold(new Location("o0", 900, 1, 2, null), 0, 127);
    assertThat(clock.lagBehindHeld()).as("a clock not started trails without end").isEqualTo(Long.MAX_VALUE);
    clock.advanceTo(1_000);
    assertThat(clock.lagBehindHeld()).as("held, but older than the clock").isZero();
    clock.hold(new Location("o1", 1_700, 1, 2, null), 0, 127);
    clock.hold(new Location("o2", 1_400, 1, 2, null), 0, 127);
    assertThat(clock.lagBehindHeld()).as("the newest, not the last to arrive").isEqualTo(700);
    clock.advanceTo(1_500);
    assertThat(clock.lagBehindHeld()).isEqualTo(200);
    clock.advanceTo(2_000);
    assertThat(clock.lagBehindHeld()).as("the clock past every location").isZero();
  }

  /**
   * Held locations come out by time, then arrival, however they arrived: mostly in order with
   * some late ones (as a stream is), released at random times; each release checked against a
   * sort of what the model holds.
   */
  @Test
  void heldLocationsAreReleasedByTimeThenArrival() throws Exception {
    for (int history = 0; history < 200; history++) {
      SplittableRandom random = new SplittableRandom(1000 + history);
      EventClock clock = new EventClock(new Schedule(), LocationTimePolicy.defaults());
      List<Location> released = new ArrayList<>();
      EventClock.Due due = new EventClock.Due() {
        @Override
        public void applyPending(String key, long time) {}

        @Override
        public void evaluate(Location location, int keyGroupStart, int keyGroupEnd) {
          released.add(location);
        }

        @Override
        public void exitDeleted(String key) {
          throw new AssertionError("no delete waits here");
        }
      };
      // The model: what is held, in arrival order.
      List<Location> model = new ArrayList<>();
      long newest = 0;
      for (int i = 0; i < 300; i++) {
        newest += random.nextInt(3);
        long time = random.nextInt(5) == 0 ? newest - random.nextInt(20) : newest;
        Location location = new Location("o" + i, time, 0, 0, null);
        clock.hold(location, 0, 127);
        model.add(location);
        boolean last = i == 299;
        if (last || random.nextInt(25) == 0) {
          clock.advanceTo(last ? Long.MAX_VALUE : newest - random.nextInt(10));
          long now = clock.time();
          List<Location> expected = new ArrayList<>();
          for (Location l : model) {
            if (l.timestamp <= now) {
              expected.add(l);
            }
          }
          model.removeAll(expected);
          // A stable sort: among equal times, arrival order stays.
          expected.sort(Comparator.comparingLong(l -> l.timestamp));
          released.clear();
          clock.releaseUpTo(now, () -> true, due);
          assertThat(released).as("history %d, location %d", history, i).containsExactlyElementsOf(expected);
          assertThat(clock.heldLocations()).isEqualTo(model.size());
          // What a snapshot writes, in the order a restore holds them again.
          List<Location> stillHeld = new ArrayList<>(model);
          stillHeld.sort(Comparator.comparingLong(l -> l.timestamp));
          assertThat(clock.held()).extracting(p -> p.location).containsExactlyElementsOf(stillHeld);
        }
      }
      assertThat(model).isEmpty();
    }
  }
}
