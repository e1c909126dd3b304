package dev.geofence.job.index;

import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import dev.geofence.job.operator.StoredFenceSerializer;
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
import dev.geofence.job.hold.HeldLocationsEvent;
import dev.geofence.job.hold.StreamStartEvent;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.time.LocationTimePolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The time rules (docs/design.md#time-rules) at the operator: allowed lateness with fence history, and its bounds. */
class EventTimeRulesTest {

  private static final String SQUARE = "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))";
  private static final String FAR_SQUARE = "POLYGON ((20 20, 30 20, 30 30, 20 30, 20 20))";
  private static final long LATENESS = 60_000;
  private static final LocationTimePolicy POLICY = new LocationTimePolicy(Duration.ofMillis(LATENESS), Duration.ofMinutes(1));

  /**
   * Fence a is created at 1000, reshaped away at 3000 and deleted at 5000; locations that arrive
   * after all of it are evaluated against the version of their time, across a restore.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aLateLocationWithinTheLatenessIsEvaluatedAgainstTheFencesOfItsTime(String backend) throws Exception {
    OperatorSubtaskState snapshot;
    try (var harness = harness(backend)) {
      harness.open();
      squareThenFarSquareUntil4000(harness);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=1500");
      snapshot = harness.snapshot(1, 4000);
    }
    try (var harness = harness(backend)) {
      harness.initializeState(snapshot);
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.sendAllBuckets();
      source.live.put("a", 2L);
      source.sendAllBuckets();
      // Late, within the lateness: each against the version of its time.
      harness.processElement2(location("o2", 2000, 5, 5), 2000);
      harness.processElement2(location("o3", 3500, 5, 5), 3500);
      harness.processElement2(location("o4", 900, 5, 5), 900);
      harness.processElement2(location("o1", 2500, 25, 25), 2500);
      harness.processElement2(location("o5", 3500, 25, 25), 3500);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly(
          "ENTER o2 a@1 t=2000", "EXIT o1 a@1 t=2500", "ENTER o5 a@2 t=3500");
      // Deleted at 5000: inside objects leave at once; a late location does not reopen it.
      source.send(delete("a", 3, 5000));
      watermark(harness, 6000);
      harness.processElement2(location("o6", 2200, 5, 5), 2200);
      harness.processElement2(location("o2", 2600, 25, 25), 2600);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactlyInAnyOrder(
          "ENTER o2 a@1 t=2000", "EXIT o1 a@1 t=2500", "ENTER o5 a@2 t=3500", "EXIT o2 a@3 t=5000", "EXIT o5 a@3 t=5000");
      assertThat(FenceIndexOperatorTest.view(harness).lateLocations()).isEqualTo(7);

      // The clock prunes each version once no admitted location can be older than its end.
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).isEqualTo(3);
      watermark(harness, 3000 + LATENESS);
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("the versions that ended at 1000 and 3000 are gone").isEqualTo(1);
      watermark(harness, 5000 + LATENESS);
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).isZero();
      assertThat(harness.numEventTimeTimers()).isZero();
      OperatorSubtaskState pruned = harness.snapshot(2, 5000 + LATENESS);
      try (var restored = harness(backend)) {
        restored.initializeState(pruned);
        restored.open();
        assertThat(FenceIndexOperatorTest.view(restored).historyVersions()).as("pruned in keyed state too").isZero();
      }
    }
  }

  /**
   * The history's keyed state is brought up to date at checkpoints only: a version pruned before a
   * checkpoint is never written; one still kept is written, restored, answers a late location after
   * the restore, and is removed from keyed state at the first checkpoint after its pruning. No timer
   * is set for any of it.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void theHistoryReachesKeyedStateAtCheckpointsOnlyWhileItIsNeeded(String backend) throws Exception {
    OperatorSubtaskState kept;
    try (var harness = harness(backend)) {
      harness.open();
      squareThenFarSquareUntil4000(harness);
      watermark(harness, 1000 + LATENESS);
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("the void before 1000, pruned in memory").isEqualTo(1);
      kept = harness.snapshot(1, 1000 + LATENESS);
      assertThat(harness.numEventTimeTimers()).isZero();
    }
    OperatorSubtaskState pruned;
    try (var harness = harness(backend)) {
      harness.initializeState(kept);
      harness.open();
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("only the square was written").isEqualTo(1);
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.live.put("a", 2L);
      source.sendAllBuckets();
      harness.processElement2(location("o2", 2000, 5, 5), 2000);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o2 a@1 t=2000");
      watermark(harness, 3000 + LATENESS);
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("the restored square, pruned in memory").isZero();
      pruned = harness.snapshot(2, 3000 + LATENESS);
      assertThat(harness.numEventTimeTimers()).isZero();
    }
    try (var harness = harness(backend)) {
      harness.initializeState(pruned);
      harness.open();
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("removed from keyed state at the checkpoint").isZero();
    }
  }

  @Test
  void aLocationBeyondTheLatenessIsALateDeadLetterAndChangesNothing() throws Exception {
    try (var harness = harness("hashmap")) {
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.sendAllBuckets();
      source.send(upsert("a", 1, SQUARE, true, 0));
      long clock = 1_000_000;
      watermark(harness, clock);
      harness.processElement2(location("o1", clock - LATENESS, 5, 5), 0);
      harness.processElement2(location("o2", clock - LATENESS - 1, 5, 5), 0);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=" + (clock - LATENESS));
      List<DeadLetter> letters = harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS).stream().map(StreamRecord::getValue).toList();
      assertThat(letters).extracting(DeadLetter::toString)
          .containsExactly("ERROR location o2@0 LATE: more than the allowed lateness of 60000 ms behind the fence index's clock at 1970-01-01T00:16:40Z");
      assertThat(letters.get(0).eventTime).isEqualTo(clock - LATENESS - 1);
      assertThat(FenceIndexOperatorTest.view(harness).tooLateLocations()).isEqualTo(1);
    }
  }

  /**
   * While the index is not ready, locations wait in state, however long: the history they need
   * is kept past the lateness until they are evaluated.
   */
  @Test
  void historyOutlivesTheLatenessForLocationsHeldWhileTheIndexIsNotReady() throws Exception {
    try (var harness = harness("hashmap")) {
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.send(upsert("a", 1, SQUARE, false, 1000));
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      source.send(upsert("a", 2, FAR_SQUARE, false, 3000));
      watermark(harness, 3000 + 3 * LATENESS);
      assertThat(triggers(harness)).as("not ready: every bucket's fingerprint is still missing").isEmpty();
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("the square, which o1 at 2000 needs; not the void before it").isEqualTo(1);
      source.sendAllBuckets();
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=2000");
      watermark(harness, 3000 + 5 * LATENESS);
      assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).isZero();
    }
  }

  /**
   * An object's presence moves forward in its own event time: a late batch in order is evaluated
   * in order, a location older than the newest evaluated for its object is an OUT_OF_ORDER dead
   * letter and changes nothing, and what is newest survives a restore at another parallelism,
   * whichever subtask wrote it.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aLocationOlderThanItsObjectsNewestIsOutOfOrderAndChangesNothing(String backend) throws Exception {
    OperatorSubtaskState[] parts = new OperatorSubtaskState[2];
    List<String> firstRun = new ArrayList<>();
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = harness(backend, 2, subtask)) {
        harness.open();
        FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
        KeyGroupRange own = KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(128, 2, subtask);
        for (int b = 0; b < FenceBuckets.COUNT; b++) {
          if (FenceBuckets.inKeyGroups(b, 128, own.getStartKeyGroup(), own.getEndKeyGroup())) {
            source.sendBucket(b, true, 0);
          }
        }
        for (int i = 0; i < 6; i++) {
          if (KeyGroupRangeAssignment.assignKeyToParallelOperator(new FenceKey("f" + i), 128, 2) == subtask) {
            source.send(upsert("f" + i, 1, SQUARE, true, 0));
          }
        }
        harness.processElement2(location("o1", 1000, 5, 5), 1000);
        harness.processElement2(location("o2", 1000, 50, 50), 1000);
        watermark(harness, 2000);
        // Late, in order: each evaluated, in the order of its time.
        harness.processElement2(location("o2", 1100, 5, 5), 1100);
        harness.processElement2(location("o2", 1300, 50, 50), 1300);
        harness.processElement2(location("o2", 1300, 5, 5), 1300);
        // Older than o1's newest (1000): refused, nothing changes.
        harness.processElement2(location("o1", 900, 50, 50), 900);
        triggers(harness).forEach(t -> firstRun.add(t.toString()));
        List<DeadLetter> letters = harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS).stream().map(StreamRecord::getValue).toList();
        assertThat(letters).extracting(l -> l.reason + " " + l.key + " " + l.eventTime).containsExactly("OUT_OF_ORDER o1 900");
        assertThat(letters.get(0).detail).isEqualTo("older than the location of 1970-01-01T00:00:01Z already evaluated for this object,"
            + " whose presence only moves forward in its own event time");
        assertThat(FenceIndexOperatorTest.view(harness).outOfOrderLocations()).isEqualTo(1);
        parts[subtask] = harness.snapshot(1, 2000);
      }
    }
    assertThat(firstRun.stream().filter(t -> t.startsWith("ENTER o1")).count()).as("o1 ENTERs the six once").isEqualTo(6);
    assertThat(firstRun.stream().filter(t -> t.contains("o2") && t.endsWith("t=1100")).count()).isEqualTo(6);
    assertThat(firstRun.stream().filter(t -> t.startsWith("EXIT o2") && t.endsWith("t=1300")).count()).isEqualTo(6);
    assertThat(firstRun.stream().filter(t -> t.startsWith("ENTER o2") && t.endsWith("t=1300")).count()).isEqualTo(6);
    assertThat(firstRun).hasSize(24);
    assertThat(firstRun.stream().filter(t -> t.startsWith("ENTER o1")).map(t -> t.split(" ")[2]).distinct().count())
        .as("the six fences, spread over both subtasks").isEqualTo(6);

    OperatorSubtaskState both = AbstractStreamOperatorTestHarness.repackageState(parts);
    try (var harness = harness(backend, 1, 0)) {
      harness.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(both, 128, 2, 1, 0));
      harness.open();
      harness.processElement2(location("o1", 999, 50, 50), 999);
      harness.processElement2(location("o2", 1299, 50, 50), 1299);
      harness.processElement2(location("o2", 1300, 50, 50), 1300);
      assertThat(harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS)).extracting(r -> r.getValue().key + " " + r.getValue().eventTime)
          .containsExactly("o1 999", "o2 1299");
      assertThat(triggers(harness)).extracting(Object::toString).as("of the same time as the newest: evaluated").hasSize(6)
          .allMatch(t -> t.startsWith("EXIT o2 ") && t.endsWith("t=1300"));
    }
  }

  /** Trigger ids are a function of the input: the same locations and edits give the same ids, late ones included. */
  @Test
  void replayingTheSameInputGivesTheSameTriggerIds() throws Exception {
    List<List<String>> runs = new ArrayList<>();
    for (int run = 0; run < 2; run++) {
      try (var harness = harness("hashmap")) {
        harness.open();
        FenceIndexOperatorTest.Source source = squareThenFarSquare(harness);
        // Watermarks in other steps in each run: when they come is not the input.
        if (run == 0) {
          watermark(harness, 2000);
        }
        watermark(harness, 4000);
        harness.processElement2(location("o2", 2000, 5, 5), 2000);
        harness.processElement2(location("o1", 3200, 5, 5), 3200);
        source.send(delete("a", 3, 5000));
        watermark(harness, 6000);
        runs.add(triggers(harness).stream().map(t -> t + " " + t.triggerId).sorted().toList());
      }
    }
    assertThat(runs.get(0)).hasSize(4).isEqualTo(runs.get(1));
  }

  /**
   * The hold says it is full at the bound and has room again at half of it, never flapping in
   * between; restored full, it says so at once.
   */
  @Test
  void theHoldSaysWhenItIsFullAndWhenItHasRoomAgain() throws Exception {
    List<Boolean> said = new ArrayList<>();
    OperatorSubtaskState snapshot;
    try (var harness = harness("hashmap")) {
      operator(harness).maxHeldLocations(4);
      harness.setup();
      List<Object> others = new ArrayList<>();
      operator(harness).reportTo(event -> {
        if (event instanceof HeldLocationsEvent held) {
          said.add(held.full());
        } else {
          others.add(event);
        }
      });
      harness.open();
      assertThat(others).as("without a source of truth, ready for the stream from where it resumes, at once")
          .containsExactly(new StreamStartEvent(0));
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      for (int i = 0; i < 6; i++) {
        harness.processElement2(location("o" + i, 1000 + i, 5, 5), 1000 + i);
      }
      assertThat(said).as("full at the fourth, once").containsExactly(true);
      snapshot = harness.snapshot(1, 0);
      watermark(harness, 1003);
      assertThat(said).as("not ready: nothing evaluated, still full").containsExactly(true);
      source.sendAllBuckets();
      // Ready: evaluated up to 1003, two held; room again (two is half of four).
      assertThat(triggers(harness)).hasSize(4);
      assertThat(said).containsExactly(true, false);
      harness.processElement2(location("o6", 2000, 5, 5), 2000);
      harness.processElement2(location("o7", 2001, 5, 5), 2001);
      assertThat(said).as("three, four: full again at four").containsExactly(true, false, true);
    }
    said.clear();
    try (var harness = harness("hashmap")) {
      operator(harness).maxHeldLocations(4);
      harness.setup();
      operator(harness).reportTo(event -> {
        if (event instanceof HeldLocationsEvent held) {
          said.add(held.full());
        }
      });
      harness.initializeState(snapshot);
      harness.open();
      assertThat(said).as("the six restored held locations: full").containsExactly(true);
    }
  }

  /** {@link #squareThenFarSquare} with the clock at 4000: two versions in the history. */
  private static void squareThenFarSquareUntil4000(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) throws Exception {
    squareThenFarSquare(harness);
    watermark(harness, 4000);
    assertThat(FenceIndexOperatorTest.view(harness).historyVersions()).as("none before 1000, the square until 3000").isEqualTo(2);
  }

  /**
   * The objects' newest times as earlier releases wrote them, one element of union state per
   * object, are read; the next checkpoint carries them on packed, and those are read too.
   */
  @Test
  void theObjectsNewestTimesAnEarlierReleaseWroteAreRead() throws Exception {
    OperatorSubtaskState earlier;
    FenceIndexOperator earlierRelease = new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB, null, null, POLICY)
        .writing(new FenceIndexState.Writing(StoredFenceSerializer.FORMAT_VERSION, true));
    try (var harness = FenceIndexOperatorTest.harness(earlierRelease, 1, 0, "hashmap")) {
      harness.open();
      new FenceIndexOperatorTest.Source(harness).sendAllBuckets();
      harness.processElement2(location("o1", 1000, 5, 5), 1000);
      watermark(harness, 2000);
      earlier = harness.snapshot(1, 2000);
    }
    OperatorSubtaskState packed;
    try (var harness = harness("hashmap")) {
      harness.initializeState(earlier);
      harness.open();
      harness.processElement2(location("o1", 900, 5, 5), 900);
      assertThat(FenceIndexOperatorTest.view(harness).outOfOrderLocations()).as("older than o1's newest, restored").isEqualTo(1);
      packed = harness.snapshot(2, 2000);
    }
    try (var harness = harness("hashmap")) {
      harness.initializeState(packed);
      harness.open();
      harness.processElement2(location("o1", 950, 5, 5), 950);
      assertThat(FenceIndexOperatorTest.view(harness).outOfOrderLocations()).as("and restored again, packed").isEqualTo(1);
    }
  }

  private static FenceIndexOperator operator(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    return (FenceIndexOperator) h.getOperator();
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(String backend)
      throws Exception {
    return harness(backend, 1, 0);
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      String backend, int parallelism, int subtask) throws Exception {
    return FenceIndexOperatorTest.harness(
        new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB, null, null, POLICY), parallelism, subtask, backend);
  }

  /** Fence a created at 1000, o1 inside it at 1500, a reshaped away at 3000. */
  private static FenceIndexOperatorTest.Source squareThenFarSquare(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) throws Exception {
    FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
    source.sendAllBuckets();
    source.send(upsert("a", 1, SQUARE, false, 1000));
    harness.processElement2(location("o1", 1500, 5, 5), 1500);
    source.send(upsert("a", 2, FAR_SQUARE, false, 3000));
    return source;
  }
}
