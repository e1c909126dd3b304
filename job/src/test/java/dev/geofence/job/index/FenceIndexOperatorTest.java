package dev.geofence.job.index;

import dev.geofence.job.operator.StoredFenceSerializer;
import dev.geofence.job.operator.FenceIndexState;
import dev.geofence.job.operator.FenceKey;
import static org.assertj.core.api.Assertions.assertThat;

import dev.geofence.connectors.cdc.FenceChange;
import dev.geofence.connectors.model.DeadLetter;
import dev.geofence.connectors.model.GeofenceTrigger;
import dev.geofence.connectors.model.Location;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.checksum.FenceChecksum;
import dev.geofence.state.readiness.LoadPhase;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.SavepointType;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.AbstractStreamOperatorTestHarness;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.apache.flink.contrib.streaming.state.EmbeddedRocksDBStateBackend;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.locationtech.jts.io.WKBWriter;
import org.locationtech.jts.io.WKTReader;

class FenceIndexOperatorTest {

  private static final String SQUARE = "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))";
  private static final String FAR_SQUARE = "POLYGON ((20 20, 30 20, 30 30, 20 30, 20 20))";
  private static final String BOW_TIE = "POLYGON ((0 0, 10 10, 10 0, 0 10, 0 0))";

  @Test
  void enterExitFollowTheFencesInForceAtEachLocationsTime() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.sendAllBuckets();
      harness.processElement2(location("o1", 500, 5, 5), 500);
      assertThat(triggers(harness)).as("nothing before the clock passes the location").isEmpty();
      watermark(harness, 1000);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=500");

      // Reshaped away at 2000: a location at 1500 still sees the old shape, one at 2500 the new.
      source.send(upsert("a", 2, FAR_SQUARE, false, 2000));
      harness.processElement2(location("o1", 1500, 5, 5), 1500);
      harness.processElement2(location("o1", 2500, 5, 5), 2500);
      watermark(harness, 1800);
      assertThat(triggers(harness)).hasSize(1);
      watermark(harness, 3000);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=500", "EXIT o1 a@2 t=2500");

      // A delete is an EXIT at once, at the delete's commit time.
      harness.processElement2(location("o2", 3100, 25, 25), 3100);
      source.send(delete("a", 3, 3200));
      watermark(harness, 4000);
      assertThat(triggers(harness)).extracting(Object::toString)
          .endsWith("ENTER o2 a@2 t=3100", "EXIT o2 a@3 t=3200");
      assertThat(view(harness).fences().isLive("a")).isFalse();
    }
  }

  @Test
  void anEditOlderThanEveryLocationToComeIsAppliedAtOnceButNeverAheadOfAHeldLocation() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.sendAllBuckets();
      // The locations have got to 1000, the fence stream's clock not at all: a catch-up's backlog.
      harness.processWatermark2(new Watermark(1000));
      source.send(upsert("a", 2, FAR_SQUARE, false, 500));
      assertThat(view(harness).fences().seqOf("a")).as("applied at once: no location to come is older").isEqualTo(2);
      // A held location at 1100: the edit of 1200 must wait until it is evaluated.
      harness.processElement2(location("o1", 1100, 25, 25), 1100);
      harness.processWatermark2(new Watermark(2000));
      source.send(upsert("a", 3, SQUARE, false, 1200));
      assertThat(view(harness).fences().seqOf("a")).as("queued behind the held location").isEqualTo(2);
      watermark(harness, 1150);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@2 t=1100");
      // Nothing held now, but an edit of a fence with one queued waits behind it.
      source.send(upsert("a", 4, FAR_SQUARE, false, 1250));
      assertThat(view(harness).fences().seqOf("a")).isEqualTo(2);
      watermark(harness, 3000);
      assertThat(view(harness).fences().seqOf("a")).isEqualTo(4);
      assertThat(view(harness).fences().staleCount()).as("both applied in order, none stale").isZero();
    }
  }

  @Test
  void noLocationIsEvaluatedBeforeTheIndexMatchesTheSourcesFingerprints() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.send(upsert("b", 1, SQUARE, true, 0));
      harness.processElement2(location("o1", 500, 5, 5), 500);
      watermark(harness, 1000);
      harness.processElement2(location("o2", 600, 5, 5), 600);
      assertThat(triggers(harness)).as("due, even late, but the index is not known to be complete").isEmpty();
      // The source says bucket(b) holds one more fence than arrived: still not ready.
      source.live.put("c", 1L);
      source.sendAllBuckets();
      source.live.remove("c");
      assertThat(triggers(harness)).isEmpty();
      assertThat(view(harness).fences().liveCount()).isEqualTo(2);
      // The fingerprint of that bucket corrected: every held location is evaluated, in order.
      source.sendBucket(FenceBuckets.of("c"), true, 0);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly(
          "ENTER o1 a@1 t=500", "ENTER o1 b@1 t=500", "ENTER o2 a@1 t=600", "ENTER o2 b@1 t=600");
    }
  }

  /**
   * The watermark the index passes on says every trigger before it has been emitted (the handover
   * relies on it): none while the index is not ready, though the inputs' watermarks move on, and
   * never past a location it still holds.
   */
  @Test
  void theWatermarkPassedOnIsNoneBeforeReadyAndNeverPastAHeldLocation() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      harness.processElement2(location("o1", 500, 5, 5), 500);
      watermark(harness, 1000);
      assertThat(watermarks(harness)).as("not ready: the location at 500 is still to be evaluated").isEmpty();
      source.sendAllBuckets();
      watermark(harness, 1100);
      assertThat(triggers(harness)).extracting(Object::toString).containsExactly("ENTER o1 a@1 t=500");
      assertThat(watermarks(harness)).containsExactly(1100L);
      // A location held for the fence stream's clock (behind the locations'): the watermark waits below it.
      harness.processWatermark2(new Watermark(5000));
      harness.processElement2(location("o1", 3000, 25, 25), 3000);
      harness.processWatermark1(new Watermark(4000));
      assertThat(watermarks(harness)).as("released up to 4000, nothing held").containsExactly(1100L, 4000L);
      harness.processElement2(location("o1", 4500, 5, 5), 4500);
      harness.processWatermark1(new Watermark(4200));
      assertThat(watermarks(harness)).as("4200 passed on, the location at 4500 is not due").containsExactly(1100L, 4000L, 4200L);
    }
  }

  private static List<Long> watermarks(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    List<Long> result = new ArrayList<>();
    for (Object o : h.getOutput()) {
      if (o instanceof Watermark w) {
        result.add(w.getTimestamp());
      }
    }
    return result;
  }

  /**
   * A delete applied while older locations are held (the index not ready, as in a catch-up after a
   * restore, where the stream's edits are applied first): those locations are evaluated as in time
   * order, against the fence as it was and with who was inside it, and the delete EXITs whoever
   * they leave inside, also across a restore while the EXITs wait; a replay after a restore writes
   * what the original run wrote.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aDeleteAppliedAheadOfOlderHeldLocationsExitsWhatTheyLeaveInside(boolean restoreMeanwhile) throws Exception {
    OperatorSubtaskState snapshot;
    Map<String, Long> live;
    List<String> before = new ArrayList<>();
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.sendAllBuckets();
      harness.processElement2(location("stays", 100, 5, 5), 100);
      harness.processElement2(location("leaves", 100, 5, 5), 100);
      watermark(harness, 150);
      // The index stops being provably complete (a bucket claims a fence not seen yet).
      source.live.put("c", 1L);
      source.sendBucket(FenceBuckets.of("c"), false, 160);
      harness.processElement2(location("enters", 500, 5, 5), 500);
      harness.processElement2(location("leaves", 500, 25, 25), 500);
      source.send(delete("a", 2, 800));
      watermark(harness, 1000);
      assertThat(view(harness).fences().isLive("a")).as("applied: readiness needs it").isFalse();
      triggers(harness).forEach(t -> before.add(t.toString()));
      assertThat(before).as("held, and the delete's EXITs wait for them").containsExactly("ENTER stays a@1 t=100", "ENTER leaves a@1 t=100");
      snapshot = harness.snapshot(1, 1000);
      live = new HashMap<>(source.live);
      if (!restoreMeanwhile) {
        finish(harness, source, before);
      }
    }
    if (restoreMeanwhile) {
      try (var harness = harness(1, 0)) {
        harness.initializeState(snapshot);
        harness.open();
        Source source = new Source(harness);
        source.live.putAll(live);
        finish(harness, source, new ArrayList<>());
      }
    }
  }

  private static void finish(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      Source source, List<String> before) throws Exception {
    source.live.remove("c");
    source.sendBucket(FenceBuckets.of("c"), false, 900);
    List<String> expected = new ArrayList<>(before);
    expected.addAll(List.of("ENTER enters a@1 t=500", "EXIT leaves a@1 t=500", "EXIT stays a@2 t=800", "EXIT enters a@2 t=800"));
    assertThat(triggers(harness)).extracting(Object::toString).containsExactlyElementsOf(expected);
    // Later locations meet no fence: nothing is left inside the deleted one.
    harness.processElement2(location("enters", 1100, 5, 5), 1100);
    watermark(harness, 1200);
    assertThat(triggers(harness)).hasSize(expected.size());
  }

  @Test
  void aSeqGapStopsEvaluationAndTheDistrustSurvivesARestore() throws Exception {
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.sendAllBuckets();
      harness.processElement2(location("o1", 100, 5, 5), 100);
      watermark(harness, 150);
      assertThat(triggers(harness)).hasSize(1);
      // seq 2 never arrives: 3 is applied (it carries the whole fence) but proves a lost edit.
      source.send(upsert("a", 3, FAR_SQUARE, false, 200));
      harness.processElement2(location("o1", 300, 5, 5), 300);
      watermark(harness, 400);
      assertThat(triggers(harness)).as("no EXIT from a stream that lost an edit").hasSize(1);
      assertThat(view(harness).fences().gapCount()).isEqualTo(1);
      snapshot = harness.snapshot(1, 400);
    }
    try (var harness = harness(1, 0)) {
      harness.initializeState(snapshot);
      harness.open();
      harness.processElement2(location("o2", 500, 5, 5), 500);
      watermark(harness, 600);
      assertThat(triggers(harness)).as("still untrusted after the restore").isEmpty();
    }
  }

  /** A restore packs the index it read, so that the first locations after it do not wait for that. */
  @Test
  void aRestoredIndexIsPackedBeforeAnyLocation() throws Exception {
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.send(upsert("b", 1, FAR_SQUARE, true, 0));
      source.sendAllBuckets();
      snapshot = harness.snapshot(1, 100);
    }
    try (var harness = harness(1, 0)) {
      harness.initializeState(snapshot);
      assertThat(view(harness).fences().index().size()).isEqualTo(2);
      assertThat(view(harness).fences().index().needsPacking()).as("packed by the restore").isFalse();
    }
  }

  @Test
  void editsBetweenTwoLocationsAreCoalescedButADeleteStillExits() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 1, SQUARE, true, 0));
      source.sendAllBuckets();
      harness.processElement2(location("o1", 100, 5, 5), 100);
      watermark(harness, 150);
      // Three reshapes, a delete and a re-creation, all before the next location.
      source.send(upsert("a", 2, FAR_SQUARE, false, 200));
      source.send(upsert("a", 3, SQUARE, false, 210));
      source.send(upsert("a", 4, FAR_SQUARE, false, 220));
      source.send(delete("a", 5, 230));
      source.send(upsert("a", 6, SQUARE, false, 240));
      harness.processElement2(location("o1", 300, 5, 5), 300);
      watermark(harness, 400);
      assertThat(triggers(harness)).extracting(Object::toString)
          .containsExactly("ENTER o1 a@1 t=100", "EXIT o1 a@5 t=230", "ENTER o1 a@6 t=300");
      assertThat(view(harness).fences().coalescedAwayCount()).as("seqs 2 to 4 folded into the delete").isEqualTo(3);
      assertThat(view(harness).fences().gapCount()).isZero();
    }
  }

  @Test
  void tenantScopingAndBadGeometry() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(tenantUpsert("c", 1, SQUARE, "x"));
      source.send(rawUpsert("bad", 1, new byte[] {1, 3, 0}));
      source.send(upsert("tie", 1, BOW_TIE, true, 0));
      source.sendAllBuckets();
      harness.processElement2(location("o1", 10, 5, 5, "y"), 10);
      harness.processElement2(location("o2", 10, 5, 5, "x"), 10);
      harness.processElement2(location("o3", 10, 1, 5, null), 10);
      watermark(harness, 100);
      assertThat(triggers(harness)).extracting(Object::toString)
          .containsExactlyInAnyOrder("ENTER o2 c@1 t=10", "ENTER o3 c@1 t=10", "ENTER o3 tie@1 t=10");
      List<DeadLetter> letters = new ArrayList<>();
      harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS).forEach(r -> letters.add(r.getValue()));
      assertThat(letters).extracting(d -> d.key + " " + d.severity + " " + d.reason)
          .containsExactlyInAnyOrder("bad ERROR UNPARSEABLE", "tie WARNING REPAIRED");
      // The refused fence still consumed its seq: its next edit is no gap.
      assertThat(view(harness).fences().seqOf("bad")).isEqualTo(1);
    }
  }

  @Test
  void aRedeliveredVersionIsCountedButNeverDecoded() throws Exception {
    try (var harness = harness(1, 0)) {
      harness.open();
      Source source = new Source(harness);
      source.send(upsert("a", 2, SQUARE, true, 0));
      // Bytes that do not parse: decoded, they would be a dead letter.
      source.send(rawUpsert("a", 2, new byte[] {1, 3, 0}));
      source.send(rawUpsert("a", 1, new byte[] {1, 3, 0}));
      assertThat(view(harness).fences().duplicateCount()).isEqualTo(1);
      assertThat(view(harness).fences().staleCount()).isEqualTo(1);
      assertThat(harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS)).as("no dead letter: nothing was decoded").isNull();
      assertThat(view(harness).fences().index().get("a")).as("the stored version stays").isNotNull();
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void restoreKeepsMembershipAndPendingLocationsAcrossRescaling(String backend) throws Exception {
    OperatorSubtaskState snapshot;
    List<String> before;
    try (var harness = harness(1, 0, backend)) {
      harness.open();
      Source source = new Source(harness);
      for (int i = 0; i < 20; i++) {
        source.send(upsert("f" + i, 1, SQUARE, true, 0));
      }
      source.sendAllBuckets();
      harness.processElement2(location("o1", 10, 5, 5), 10);
      watermark(harness, 100);
      harness.processElement2(location("o1", 200, 50, 50), 200); // pending: it will EXIT all 20
      before = new ArrayList<>(triggers(harness).stream().map(Object::toString).toList());
      assertThat(before).hasSize(20);
      snapshot = harness.snapshot(1, 150);
    }
    List<String> after = new ArrayList<>();
    int fences = 0;
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = restoredAsOneOfTwo(snapshot, subtask, backend)) {
        int held = view(harness).fences().index().size();
        fences += held;
        // The clock was restored (100): an older location is late and evaluated at once.
        harness.processElement2(location("o2", 50, 5, 5), 50);
        assertThat(triggers(harness)).hasSize(held).allMatch(t -> t.toString().startsWith("ENTER o2 "));
        harness.getOutput().clear();
        // Inside already: no second ENTER; the pending location exits what this subtask holds.
        harness.processElement2(location("o1", 150, 5, 5), 150);
        watermark(harness, 300);
        triggers(harness).forEach(t -> after.add(t.toString()));
      }
    }
    assertThat(fences).isEqualTo(20);
    assertThat(after).hasSize(20).allMatch(t -> t.startsWith("EXIT o1 ") && t.endsWith("t=200"));
  }

  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aSavepointOfThePreviousLayoutIsRestoredAtAnotherParallelismAndMovedIntoTheNewOne(String backend) throws Exception {
    OperatorSubtaskState snapshot;
    try (var harness = harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB).writing(new FenceIndexState.Writing(StoredFenceSerializer.FORMAT_VERSION, true)),
        1, 0, backend)) {
      harness.open();
      Source source = new Source(harness);
      for (int i = 0; i < 30; i++) {
        source.send(upsert("f" + i, 1, i % 2 == 0 ? SQUARE : FAR_SQUARE, true, 0));
      }
      source.send(upsert("f3", 2, SQUARE, false, 20));
      source.send(delete("f4", 2, 30));
      source.sendAllBuckets();
      harness.processElement2(location("o1", 40, 5, 5), 40);
      watermark(harness, 100);
      // The 15 even fences, f3 reshaped into them, f4 deleted.
      assertThat(triggers(harness)).hasSize(15).allMatch(t -> t.toString().startsWith("ENTER o1 "));
      snapshot = harness.snapshot(1, 150);
    }
    List<OperatorSubtaskState> moved = new ArrayList<>();
    List<String> after = new ArrayList<>();
    int fences = 0;
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = restoredAsOneOfTwo(snapshot, subtask, backend)) {
        assertThat(view(harness).phase()).as("the moved fences match the fingerprints").isEqualTo(LoadPhase.READY);
        fences += view(harness).movedFromPerFenceLayout();
        // Still inside: no second ENTER for the objects the savepoint held.
        harness.processElement2(location("o1", 160, 5, 5), 160);
        harness.processElement2(location("o2", 160, 5, 5), 160);
        watermark(harness, 200);
        triggers(harness).forEach(t -> after.add(t.toString()));
        moved.add(harness.snapshot(2, 250));
      }
    }
    assertThat(fences).as("every fence and tombstone moved once").isEqualTo(30);
    assertThat(after).hasSize(15).allMatch(t -> t.startsWith("ENTER o2 "));
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = harness(2, subtask, backend)) {
        harness.initializeState(moved.get(subtask));
        harness.open();
        assertThat(view(harness).movedFromPerFenceLayout()).as("nothing left in the per-fence layout").isZero();
        assertThat(view(harness).phase()).isEqualTo(LoadPhase.READY);
        fences -= view(harness).fences().index().size();
      }
    }
    assertThat(fences).as("the 29 live fences, not the tombstone of f4").isEqualTo(1);
  }

  /**
   * Fences written as their buckets' segments by one checkpoint, edited after it (a bucket of 40
   * with 6 edits keeps them in its overlay; small buckets are rewritten), checkpointed again and
   * restored at another parallelism: the restored subtasks hold every fence at its seq, match
   * every fingerprint, and answer points as JTS does over the fences in force.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void fencesRestoredFromSegmentsAndOverlaysAnswerAsTheOracle(String backend) throws Exception {
    SplittableRandom random = new SplittableRandom(11);
    Map<String, String> inForce = new HashMap<>();
    List<String> crowded = new ArrayList<>();
    int bucket = FenceBuckets.of("c0");
    for (int i = 0; crowded.size() < 40; i++) {
      if (FenceBuckets.of("c" + i) == bucket) {
        crowded.add("c" + i);
      }
    }
    OperatorSubtaskState snapshot;
    try (var harness = harness(1, 0, backend)) {
      harness.open();
      Source source = new Source(harness);
      source.sendAllBuckets();
      List<String> ids = new ArrayList<>(crowded);
      for (int i = 0; i < 200; i++) {
        ids.add("f" + i);
      }
      for (String id : ids) {
        inForce.put(id, square(random));
        source.send(upsert(id, 1, inForce.get(id), false, 10));
      }
      watermark(harness, 15);
      harness.snapshot(1, 20);
      long rewritten = view(harness).segmentsRewritten();
      assertThat(rewritten).as("written as their segments, none rewritten").isZero();
      for (int i = 0; i < 6; i++) {
        String id = crowded.get(i);
        if (i % 3 == 0) {
          source.send(delete(id, 2, 30));
          inForce.remove(id);
        } else {
          inForce.put(id, square(random));
          source.send(upsert(id, 2, inForce.get(id), false, 30));
        }
      }
      for (int i = 0; i < 20; i++) {
        String id = "f" + i;
        inForce.put(id, square(random));
        source.send(upsert(id, 2, inForce.get(id), false, 30));
      }
      watermark(harness, 35);
      snapshot = harness.snapshot(2, 40);
      assertThat(view(harness).segmentsRewritten() - rewritten).as("the small buckets edited, not the crowded one")
          .isEqualTo(java.util.stream.IntStream.range(0, 20).mapToObj(i -> FenceBuckets.of("f" + i)).distinct()
              .filter(b -> b != bucket).count());
    }
    WKTReader wkt = new WKTReader();
    org.locationtech.jts.geom.GeometryFactory factory = new org.locationtech.jts.geom.GeometryFactory();
    Map<String, org.locationtech.jts.geom.Geometry> oracle = new HashMap<>();
    for (Map.Entry<String, String> fence : inForce.entrySet()) {
      oracle.put(fence.getKey(), wkt.read(fence.getValue()));
    }
    Map<String, Long> held = new HashMap<>();
    Map<String, List<String>> answers = new HashMap<>();
    for (int subtask = 0; subtask < 2; subtask++) {
      try (var harness = restoredAsOneOfTwo(snapshot, subtask, backend)) {
        assertThat(view(harness).phase()).as("segments and overlays match every fingerprint").isEqualTo(LoadPhase.READY);
        var fences = view(harness).fences();
        for (String id : oracle.keySet()) {
          if (fences.isLive(id)) {
            assertThat(held.put(id, fences.seqOf(id))).as("%s held by one subtask", id).isNull();
          }
        }
        for (String id : crowded) {
          if (!oracle.containsKey(id) && fences.seqOf(id) > 0) {
            assertThat(fences.seqOf(id)).as("%s's tombstone", id).isEqualTo(2);
          }
        }
        for (int p = 0; p < 500; p++) {
          double x = (p * 37 % 500) / 5.0;
          double y = (p * 91 % 500) / 5.0;
          answers.computeIfAbsent(x + " " + y, k -> new ArrayList<>()).addAll(fences.index().covering(x, y, null));
        }
      }
    }
    assertThat(held).hasSize(oracle.size());
    for (String id : oracle.keySet()) {
      assertThat(held.get(id)).as(id).isEqualTo(crowded.indexOf(id) >= 0 && crowded.indexOf(id) < 6 || id.matches("f1?[0-9]") ? 2L : 1L);
    }
    for (Map.Entry<String, List<String>> answer : answers.entrySet()) {
      String[] xy = answer.getKey().split(" ");
      org.locationtech.jts.geom.Point point = factory.createPoint(
          new org.locationtech.jts.geom.Coordinate(Double.parseDouble(xy[0]), Double.parseDouble(xy[1])));
      List<String> expected = oracle.entrySet().stream().filter(e -> e.getValue().covers(point)).map(Map.Entry::getKey).sorted().toList();
      assertThat(answer.getValue().stream().sorted().toList()).as("fences covering %s", answer.getKey()).isEqualTo(expected);
    }
  }

  /** A square of random size at a random place in [0, 100) x [0, 80) (latitudes stay below 90). */
  private static String square(SplittableRandom random) {
    double x = random.nextInt(90);
    double y = random.nextInt(70);
    double side = 1 + random.nextInt(10);
    return String.format(java.util.Locale.ROOT, "POLYGON ((%s %s, %s %s, %s %s, %s %s, %s %s))", x, y, x + side, y, x + side, y + side,
        x, y + side, x, y);
  }

  /**
   * A canonical savepoint of one hashmap subtask, written with snapshot compression while edits
   * still wait for the clock, restored into three RocksDB subtasks (the transition in which the
   * rescale stress test, with compression on, twice ended a restore with a bucket off by a fence):
   * together they hold every fence at its seq once the clock has passed the edits.
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aSavepointRestoredAtAnotherParallelismAndBackendHoldsEveryFence(boolean compressed) throws Exception {
    Map<String, Long> seqs = new HashMap<>();
    Map<String, Boolean> live = new HashMap<>();
    OperatorSubtaskState savepoint;
    try (var harness = harness(1, 0, "hashmap")) {
      harness.getExecutionConfig().setUseSnapshotCompression(compressed);
      harness.open();
      Source source = new Source(harness);
      source.sendAllBuckets();
      SplittableRandom random = new SplittableRandom(7);
      for (int i = 1; i <= 2_000; i++) {
        String id = "f" + random.nextInt(300);
        long seq = seqs.merge(id, 1L, Long::sum);
        boolean delete = live.getOrDefault(id, false) && random.nextInt(4) == 0;
        source.send(delete ? delete(id, seq, 10L * i) : upsert(id, seq, random.nextBoolean() ? SQUARE : FAR_SQUARE, false, 10L * i));
        live.put(id, !delete);
        if (i == 1_000) {
          harness.processBothWatermarks(new Watermark(10L * i));
        }
      }
      savepoint = harness.snapshotWithLocalState(1, 20_000, SavepointType.savepoint(SavepointFormatType.CANONICAL))
          .getJobManagerOwnedState();
    }
    Map<String, Long> held = new HashMap<>();
    for (int subtask = 0; subtask < 3; subtask++) {
      try (var harness = harness(3, subtask, "rocksdb")) {
        harness.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(savepoint, 128, 1, 3, subtask));
        harness.open();
        harness.processBothWatermarks(new Watermark(30_000));
        var fences = view(harness).fences();
        for (String id : seqs.keySet()) {
          if (fences.isLive(id)) {
            assertThat(held.put(id, fences.seqOf(id))).as("%s held by one subtask", id).isNull();
          }
        }
      }
    }
    Map<String, Long> expected = new HashMap<>();
    live.forEach((id, isLive) -> {
      if (isLive) {
        expected.put(id, seqs.get(id));
      }
    });
    assertThat(held).isEqualTo(expected);
  }

  // ---- helpers ----------------------------------------------------------------------------------

  /**
   * Plays the source of truth: sends each fence change, then the new fingerprint of its bucket at
   * the same commit time, as the migration's triggers and the change stream do.
   */
  static final class Source {
    final KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness;
    final Map<String, Long> live = new HashMap<>();

    Source(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) {
      this.harness = harness;
    }

    void send(FenceChange change) throws Exception {
      harness.processElement1(change, change.commitTime);
      if (change.delete) {
        live.remove(change.fenceId);
      } else {
        live.put(change.fenceId, change.seq);
      }
      sendBucket(FenceBuckets.of(change.fenceId), change.snapshot, change.commitTime);
    }

    /** Every bucket's fingerprint, as the initial snapshot of fence_bucket_stats reads them. */
    void sendAllBuckets() throws Exception {
      for (int b = 0; b < FenceBuckets.COUNT; b++) {
        sendBucket(b, true, 0);
      }
    }

    void sendBucket(int bucket, boolean snapshot, long commitTime) throws Exception {
      FenceChecksum fingerprint = new FenceChecksum();
      live.forEach((id, seq) -> {
        if (FenceBuckets.of(id) == bucket) {
          fingerprint.add(id, seq);
        }
      });
      FenceChange stats = new FenceChange();
      stats.kind = FenceChange.Kind.BUCKET_STATS;
      stats.bucket = bucket;
      stats.fenceCount = fingerprint.count();
      stats.checksum = fingerprint.checksum();
      stats.snapshot = snapshot;
      stats.commitTime = commitTime;
      stats.lsn = commitTime;
      harness.processElement1(stats, commitTime);
    }
  }

  /** Subtask {@code subtask} of two, restored from a snapshot taken at parallelism 1, and open. */
  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> restoredAsOneOfTwo(
      OperatorSubtaskState snapshot, int subtask, String backend) throws Exception {
    var harness = harness(2, subtask, backend);
    harness.initializeState(AbstractStreamOperatorTestHarness.repartitionOperatorState(snapshot, 128, 1, 2, subtask));
    harness.open();
    return harness;
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      int parallelism, int subtask) throws Exception {
    return harness(parallelism, subtask, "hashmap");
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      int parallelism, int subtask, String backend) throws Exception {
    return harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB), parallelism, subtask, backend);
  }

  /** A harness of {@code operator} as subtask {@code subtask} of {@code parallelism}, max parallelism 128. */
  static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      FenceIndexOperator operator, int parallelism, int subtask, String backend) throws Exception {
    var harness = new KeyedTwoInputStreamOperatorTestHarness<>(
        operator,
        (FenceChange change) -> change.kind == FenceChange.Kind.BUCKET_STATS ? FenceKey.ofBucket(change.bucket) : new FenceKey(change.fenceId), null, TypeInformation.of(FenceKey.class), 128, parallelism, subtask);
    if (backend.equals("rocksdb")) {
      harness.setStateBackend(new EmbeddedRocksDBStateBackend());
    }
    return harness;
  }

  /** What the test may see of the harness's operator as it is now. */
  static FenceIndexOperator.View view(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    return ((FenceIndexOperator) h.getOperator()).view();
  }

  static void watermark(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h, long t)
      throws Exception {
    h.processBothWatermarks(new Watermark(t));
  }

  static List<GeofenceTrigger> triggers(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    List<GeofenceTrigger> result = new ArrayList<>();
    ConcurrentLinkedQueue<Object> output = h.getOutput();
    for (Object o : output) {
      if (o instanceof StreamRecord) {
        result.add((GeofenceTrigger) ((StreamRecord<?>) o).getValue());
      }
    }
    return result;
  }

  static FenceChange upsert(String id, long seq, String wkt, boolean snapshot, long commitTime) throws Exception {
    FenceChange change = rawUpsert(id, seq, new WKBWriter().write(new WKTReader().read(wkt)));
    change.snapshot = snapshot;
    change.commitTime = commitTime;
    change.lsn = snapshot ? 0 : commitTime;
    return change;
  }

  private static FenceChange tenantUpsert(String id, long seq, String wkt, String tenant) throws Exception {
    FenceChange change = upsert(id, seq, wkt, true, 0);
    change.tenant = tenant;
    return change;
  }

  private static FenceChange rawUpsert(String id, long seq, byte[] wkb) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.FENCE;
    change.fenceId = id;
    change.seq = seq;
    change.geometryBytes = wkb;
    change.snapshot = true;
    return change;
  }

  static FenceChange delete(String id, long seq, long commitTime) {
    FenceChange change = new FenceChange();
    change.kind = FenceChange.Kind.FENCE;
    change.fenceId = id;
    change.seq = seq;
    change.delete = true;
    change.commitTime = commitTime;
    change.lsn = commitTime;
    return change;
  }

  static Location location(String object, long t, double lon, double lat) {
    return location(object, t, lon, lat, null);
  }

  static Location location(String object, long t, double lon, double lat, String tenant) {
    return new Location(object, t, lon, lat, tenant);
  }
}
