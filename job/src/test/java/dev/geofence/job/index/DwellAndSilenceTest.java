package dev.geofence.job.index;

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
import dev.geofence.job.operator.FenceKey;
import dev.geofence.state.checksum.FenceBuckets;
import dev.geofence.state.geom.GeometryFormat;
import dev.geofence.state.geom.GeometryReadOptions;
import dev.geofence.state.time.LocationTimePolicy;
import dev.geofence.state.time.StayRules;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.util.KeyedTwoInputStreamOperatorTestHarness;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * DWELL after the loitering delay and EXIT by silence (docs/design.md#dwell-and-silence) at the
 * operator: the boundaries of each rule, with the clock deciding only once the lateness has passed.
 */
class DwellAndSilenceTest {

  private static final String SQUARE = "POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0))";
  private static final String WIDER_SQUARE = "POLYGON ((-1 -1, 11 -1, 11 11, -1 11, -1 -1))";
  private static final String FAR_SQUARE = "POLYGON ((20 20, 30 20, 30 30, 20 30, 20 20))";
  private static final long LATENESS = 60_000;
  private static final long DELAY = 10_000;
  private static final long TIMEOUT = 30_000;

  @Test
  void aStayAsLongAsTheDelayDwellsOnceAndOneShorterDoesNot() throws Exception {
    try (var harness = harness(new StayRules(Duration.ofMillis(DELAY), Duration.ZERO), "hashmap")) {
      squareAt1000(harness);
      harness.processElement2(location("long", 2000, 5, 5), 2000);
      harness.processElement2(location("short", 2000, 5, 5), 2000);
      harness.processElement2(location("long", 5000, 5, 5), 5000);
      watermark(harness, 6000);
      harness.processElement2(location("short", 11_999, 50, 50), 11_999);
      harness.processElement2(location("long", 12_000, 50, 50), 12_000);
      watermark(harness, 12_000);
      assertThat(described(harness)).containsExactly(
          "ENTER location long a@1 t=2000", "ENTER location short a@1 t=2000",
          "EXIT location short a@1 t=11999", "DWELL loitering long a@1 t=12000", "EXIT location long a@1 t=12000");
      // Once per stay: nothing more when the clock passes the DWELL time by the lateness.
      watermark(harness, 12_000 + 2 * LATENESS);
      assertThat(described(harness)).hasSize(5);
    }
  }

  /**
   * A stay that ends before its delay DWELLs not; the next stay's delay starts at its own ENTER. A
   * location at or after the DWELL time decides it at once; without one, the clock decides it once it
   * is past the DWELL time by the lateness, and the watermark passed on waits for it.
   */
  @Test
  void anExitAndReEnterWithinTheDelayStartsTheDelayAgain() throws Exception {
    try (var harness = harness(new StayRules(Duration.ofMillis(DELAY), Duration.ZERO), "hashmap")) {
      squareAt1000(harness);
      for (String object : List.of("byClock", "byLocation")) {
        harness.processElement2(location(object, 2000, 5, 5), 2000);
        harness.processElement2(location(object, 5000, 50, 50), 5000);
        harness.processElement2(location(object, 6000, 5, 5), 6000);
        harness.processElement2(location(object, 15_000, 5, 5), 15_000);
      }
      harness.processElement2(location("byLocation", 16_000, 5, 5), 16_000);
      watermark(harness, 16_000 + LATENESS - 1);
      assertThat(described(harness)).filteredOn(t -> t.startsWith("DWELL")).containsExactly("DWELL loitering byLocation a@1 t=16000");
      assertThat(lastWatermark(harness)).as("byClock's DWELL at 16000 is still to come").isLessThan(16_000);
      watermark(harness, 16_000 + LATENESS);
      assertThat(described(harness)).filteredOn(t -> t.startsWith("DWELL"))
          .containsExactly("DWELL loitering byLocation a@1 t=16000", "DWELL loitering byClock a@1 t=16000");
      assertThat(lastWatermark(harness)).isEqualTo(16_000 + LATENESS);
    }
  }

  /**
   * A reshape that keeps the object inside leaves its stay open: it DWELLs with the version in force
   * at the DWELL time. A reshape that moves the fence away from under it EXITs it at its next
   * location, caused by the reshape; one that walks out of an unchanged fence EXITs by location.
   */
  @Test
  void aFenceReshapedUnderADwellingObject() throws Exception {
    try (var harness = harness(new StayRules(Duration.ofMillis(DELAY), Duration.ZERO), "hashmap")) {
      FenceIndexOperatorTest.Source source = squaresAAndB(harness);
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      harness.processElement2(location("o2", 2000, 5, 5), 2000);
      source.send(upsert("a", 2, WIDER_SQUARE, false, 4000));
      harness.processElement2(location("o1", 13_000, 5, 5), 13_000);
      source.send(upsert("a", 3, FAR_SQUARE, false, 14_000));
      harness.processElement2(location("o1", 15_000, 5, 5), 15_000);
      harness.processElement2(location("o2", 15_000, 50, 50), 15_000);
      watermark(harness, 15_000);
      assertThat(described(harness)).containsExactlyInAnyOrder(
          "ENTER location o1 a@1 t=2000", "ENTER location o1 b@1 t=2000", "ENTER location o2 a@1 t=2000",
          "ENTER location o2 b@1 t=2000",
          "DWELL loitering o1 a@2 t=12000", "DWELL loitering o1 b@1 t=12000",
          "DWELL loitering o2 a@2 t=12000", "DWELL loitering o2 b@1 t=12000",
          "EXIT fence-reshaped o1 a@3 t=15000", "EXIT location o2 a@3 t=15000", "EXIT location o2 b@1 t=15000");
    }
  }

  /** A delete after the DWELL time DWELLs the stay before it EXITs it; one before cancels the DWELL. */
  @Test
  void aDeleteDuringAStayEndsItAsAnExitWould() throws Exception {
    try (var harness = harness(new StayRules(Duration.ofMillis(DELAY), Duration.ZERO), "hashmap")) {
      FenceIndexOperatorTest.Source source = squaresAAndB(harness);
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      watermark(harness, 2000);
      source.send(delete("b", 2, 5000));
      source.send(delete("a", 2, 20_000));
      watermark(harness, 20_000);
      assertThat(described(harness)).containsExactly(
          "ENTER location o1 a@1 t=2000", "ENTER location o1 b@1 t=2000", "EXIT fence-deleted o1 b@2 t=5000",
          "DWELL loitering o1 a@1 t=12000", "EXIT fence-deleted o1 a@2 t=20000");
      watermark(harness, 20_000 + 2 * LATENESS);
      assertThat(described(harness)).hasSize(5);
    }
  }

  /**
   * An object silent for the timeout EXITs each fence it is inside, at its last location's time
   * plus the timeout: decided by its next location at once, else by the clock past that time by
   * the lateness. Its next location starts a fresh stay; an object that reports keeps its stay; a
   * silent object that never returns is forgotten.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void anObjectSilentForTheTimeoutExitsItsFences(String backend) throws Exception {
    try (var harness = harness(new StayRules(Duration.ZERO, Duration.ofMillis(TIMEOUT)), backend)) {
      FenceIndexOperatorTest.Source source = squaresAAndB(harness);
      harness.processElement2(location("gone", 2000, 5, 5), 2000);
      harness.processElement2(location("returns", 2000, 5, 5), 2000);
      harness.processElement2(location("late", 2000, 5, 5), 2000);
      for (long t = 2000; t <= 100_000; t += 20_000) {
        harness.processElement2(location("reports", t, 5, 5), t);
      }
      harness.processElement2(location("late", 40_000, 5, 5), 40_000);
      watermark(harness, 40_000);
      // "late" reported again after 38 s: silent since 32000, its stays ended then, a fresh one begins.
      assertThat(described(harness)).filteredOn(t -> t.contains(" late ")).containsExactly(
          "ENTER location late a@1 t=2000", "ENTER location late b@1 t=2000", "EXIT silence late a@1 t=32000",
          "EXIT silence late b@1 t=32000", "ENTER location late a@1 t=40000", "ENTER location late b@1 t=40000");
      watermark(harness, 32_000 + LATENESS - 1);
      assertThat(described(harness)).filteredOn(t -> t.contains(" gone ")).hasSize(2);
      watermark(harness, 32_000 + LATENESS);
      assertThat(described(harness)).filteredOn(t -> t.contains(" gone ")).containsExactly(
          "ENTER location gone a@1 t=2000", "ENTER location gone b@1 t=2000", "EXIT silence gone a@1 t=32000",
          "EXIT silence gone b@1 t=32000");
      harness.processElement2(location("returns", 95_000, 5, 5), 95_000);
      watermark(harness, 100_000);
      assertThat(described(harness)).filteredOn(t -> t.contains(" returns ")).containsExactly(
          "ENTER location returns a@1 t=2000", "ENTER location returns b@1 t=2000", "EXIT silence returns a@1 t=32000",
          "EXIT silence returns b@1 t=32000", "ENTER location returns a@1 t=95000",
          "ENTER location returns b@1 t=95000");
      assertThat(described(harness)).filteredOn(t -> t.contains(" reports ")).hasSize(2);
      GeofenceTrigger silence = triggers(harness).stream().filter(t -> t.objectId.equals("gone") && t.kind.name().equals("EXIT"))
          .findFirst().orElseThrow();
      assertThat(silence.lon).as("a silence has no position").isNaN();
      // Every one silent by now, and past the lateness after it: forgotten at the checkpoint.
      watermark(harness, 200_000);
      assertThat(FenceIndexOperatorTest.view(harness).objects()).isEqualTo(4);
      harness.snapshot(2, 200_000);
      assertThat(FenceIndexOperatorTest.view(harness).objects()).isZero();
    }
  }

  /**
   * A delete after an object's silence time, before the clock has decided the silence, ends that
   * stay by the silence and leaves the object's other stays to their own decision: a late location
   * then shows the object was not silent, whichever subtask holds them (before, the delete ended
   * every stay of the object on its own subtask alone).
   */
  @Test
  void aDeleteAfterTheSilenceTimeEndsThatStayAloneBySilence() throws Exception {
    try (var harness = harness(new StayRules(Duration.ZERO, Duration.ofMillis(TIMEOUT)), "hashmap")) {
      FenceIndexOperatorTest.Source source = squaresAAndB(harness);
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      watermark(harness, 2000);
      source.send(delete("a", 2, 40_000));
      watermark(harness, 41_000);
      assertThat(described(harness)).containsExactly(
          "ENTER location o1 a@1 t=2000", "ENTER location o1 b@1 t=2000", "EXIT silence o1 a@1 t=32000");
      harness.processElement2(location("o1", 20_000, 5, 5), 20_000);
      watermark(harness, 20_000 + TIMEOUT + LATENESS);
      assertThat(described(harness)).containsExactly(
          "ENTER location o1 a@1 t=2000", "ENTER location o1 b@1 t=2000", "EXIT silence o1 a@1 t=32000",
          "EXIT silence o1 b@1 t=50000");
    }
  }

  /**
   * Locations held while the index is not ready decide silence before the clock does: a restored
   * object inside a fence whose next location waits in the hold is not silent, however far the
   * clock moves before the index is ready.
   */
  @Test
  void silenceWhileHeldBeforeTheFirstReady() throws Exception {
    StayRules rules = new StayRules(Duration.ZERO, Duration.ofMillis(TIMEOUT));
    OperatorSubtaskState snapshot;
    try (var harness = harness(rules, "hashmap")) {
      squareAt1000(harness);
      harness.processElement2(location("o1", 5000, 5, 5), 5000);
      watermark(harness, 5000);
      snapshot = harness.snapshot(1, 5000);
    }
    try (var harness = harness(rules, "hashmap")) {
      harness.initializeState(snapshot);
      harness.open();
      // The source's fingerprint of a's bucket counts a version the index has not had: not ready.
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.live.put("a", 2L);
      source.sendBucket(FenceBuckets.of("a"), false, 1500);
      harness.processElement2(location("o1", 20_000, 5, 5), 20_000);
      watermark(harness, 200_000);
      assertThat(triggers(harness)).as("not ready: nothing decided").isEmpty();
      source.send(upsert("a", 2, SQUARE, false, 1500));
      watermark(harness, 200_001);
      assertThat(described(harness)).as("silent from 20000, the held location's time, not 5000").containsExactly(
          "EXIT silence o1 a@2 t=50000");
    }
  }

  /**
   * The same input gives the same triggers, ids and all, whether the job runs through or stops
   * with a savepoint in the middle of stays that have a DWELL and a silence pending.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aRestoreInTheMiddleOfStaysDecidesAsARunThrough(String backend) throws Exception {
    StayRules rules = new StayRules(Duration.ofMillis(DELAY), Duration.ofMillis(TIMEOUT));
    List<String> through;
    try (var harness = harness(rules, backend)) {
      firstHalf(harness);
      secondHalf(harness, FenceIndexOperatorTest.Source::new);
      through = ids(harness);
    }
    List<String> restored = idsAcrossARestore(rules, backend, DwellAndSilenceTest::firstHalf, 9000,
        DwellAndSilenceTest::secondHalf, Map.of("a", 1L, "b", 1L));
    assertThat(through).hasSizeGreaterThan(8);
    assertThat(restored).containsExactlyInAnyOrderElementsOf(through);
  }

  /**
   * A fence's own delay holds for its stays over the job's (docs/design.md#a-delay-per-fence): a
   * shorter one, 0 (never), none (the job's), a negative one taken as 0 with a dead letter. A stay
   * keeps the delay of the version in force at its ENTER when the delay changes under it, through a
   * restore too.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aFencesOwnDelayHoldsForItsStays(String backend) throws Exception {
    StayRules rules = new StayRules(Duration.ofMillis(DELAY), Duration.ZERO);
    List<String> through;
    try (var harness = harness(rules, backend)) {
      ownDelaysFirstHalf(harness);
      ownDelaysSecondHalf(harness, FenceIndexOperatorTest.Source::new);
      through = ids(harness);
      assertThat(described(harness)).filteredOn(t -> t.startsWith("DWELL")).containsExactlyInAnyOrder(
          "DWELL loitering o1 own@2 t=5000", "DWELL loitering o1 job@1 t=12000", "DWELL loitering o2 own@2 t=5000",
          "DWELL loitering o2 job@1 t=12000", "DWELL loitering o3 own@2 t=24500", "DWELL loitering o3 job@1 t=14500");
      List<DeadLetter> letters = new ArrayList<>();
      harness.getSideOutput(FenceIndexOperator.DEAD_LETTERS).forEach(r -> letters.add(r.getValue()));
      assertThat(letters).extracting(d -> d.key + " " + d.severity + " " + d.reason)
          .containsExactly("negative WARNING NEGATIVE_DWELL_DELAY");
    }
    List<String> restored = idsAcrossARestore(rules, backend, DwellAndSilenceTest::ownDelaysFirstHalf, 4600,
        DwellAndSilenceTest::ownDelaysSecondHalf, Map.of("own", 2L, "never", 1L, "job", 1L, "negative", 1L));
    assertThat(restored).containsExactlyInAnyOrderElementsOf(through);
  }

  @Test
  void aFencesOwnDelayDwellsWithTheJobsOff() throws Exception {
    try (var harness = harness(StayRules.OFF, "hashmap")) {
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.sendAllBuckets();
      source.send(withDelay(upsert("own", 1, SQUARE, false, 1000), 3000L));
      source.send(upsert("plain", 1, SQUARE, false, 1000));
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      watermark(harness, 5000 + LATENESS - 1);
      assertThat(described(harness)).filteredOn(t -> t.startsWith("DWELL")).isEmpty();
      watermark(harness, 5000 + LATENESS);
      assertThat(described(harness)).filteredOn(t -> t.startsWith("DWELL")).containsExactly("DWELL loitering o1 own@1 t=5000");
    }
  }

  /**
   * With the job's delay off, a stay in a fence whose own delay was removed after its ENTER still
   * DWELLs by it after a restore: the version of its ENTER is in the history, read before the
   * members, so the restore knows the stay may DWELL even though no fence has a delay now.
   */
  @ParameterizedTest
  @ValueSource(strings = {"hashmap", "rocksdb"})
  void aDelayRemovedDuringAStayStillDwellsItAfterARestoreWithTheJobsOff(String backend) throws Exception {
    OperatorSubtaskState snapshot;
    try (var harness = harness(StayRules.OFF, backend)) {
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.sendAllBuckets();
      source.send(withDelay(upsert("own", 1, SQUARE, false, 1000), 3000L));
      harness.processElement2(location("o1", 2000, 5, 5), 2000);
      source.send(upsert("own", 2, SQUARE, false, 2500));
      watermark(harness, 2600);
      snapshot = harness.snapshot(1, 2600);
    }
    try (var harness = harness(StayRules.OFF, backend)) {
      harness.initializeState(snapshot);
      harness.open();
      FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
      source.live.put("own", 2L);
      source.sendAllBuckets();
      watermark(harness, 5000 + LATENESS);
      assertThat(described(harness)).containsExactly("DWELL loitering o1 own@2 t=5000");
    }
  }

  /**
   * At 4600: o1 and o2 inside every fence since 2000, own's delay 3000 then; own's delay changed to
   * 20000 at 4000, after which o3 entered, at 4500.
   */
  private static void ownDelaysFirstHalf(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h)
      throws Exception {
    h.open();
    FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(h);
    source.sendAllBuckets();
    source.send(withDelay(upsert("own", 1, SQUARE, false, 1000), 3000L));
    source.send(withDelay(upsert("never", 1, SQUARE, false, 1000), 0L));
    source.send(upsert("job", 1, SQUARE, false, 1000));
    source.send(withDelay(upsert("negative", 1, SQUARE, false, 1000), -5000L));
    h.processElement2(location("o1", 2000, 5, 5), 2000);
    h.processElement2(location("o2", 2000, 5, 5), 2000);
    source.send(withDelay(upsert("own", 2, SQUARE, false, 4000), 20_000L));
    h.processElement2(location("o3", 4500, 5, 5), 4500);
    watermark(h, 4600);
  }

  private static void ownDelaysSecondHalf(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h,
      SourceOf source) throws Exception {
    source.of(h);
    h.processElement2(location("o2", 6000, 5, 5), 6000);
    h.processElement2(location("o1", 30_000, 5, 5), 30_000);
    h.processElement2(location("o2", 30_000, 50, 50), 30_000);
    watermark(h, 30_000 + LATENESS);
  }

  private static FenceChange withDelay(FenceChange change, Long dwellDelay) {
    change.dwellDelay = dwellDelay;
    return change;
  }

  /** Stays open at 9000: o1 with its DWELL due at 12000, o2 silent since 8000, o3 reporting. */
  private static void firstHalf(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness)
      throws Exception {
    squaresAAndB(harness);
    harness.processElement2(location("o1", 2000, 5, 5), 2000);
    harness.processElement2(location("o2", 2000, 5, 5), 2000);
    harness.processElement2(location("o2", 8000, 5, 5), 8000);
    harness.processElement2(location("o3", 3000, 5, 5), 3000);
    watermark(harness, 9000);
  }

  private static void secondHalf(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness,
      SourceOf source) throws Exception {
    FenceIndexOperatorTest.Source fences = source.of(harness);
    harness.processElement2(location("o3", 20_000, 5, 5), 20_000);
    fences.send(delete("b", 2, 25_000));
    harness.processElement2(location("o1", 30_000, 50, 50), 30_000);
    harness.processElement2(location("o3", 45_000, 5, 5), 45_000);
    watermark(harness, 38_000 + LATENESS + 1);
  }

  /**
   * The triggers' ids of {@code first}, then a savepoint at {@code at}, a restore whose source holds
   * {@code live} (fence to seq, every bucket read), and {@code second}.
   */
  private static List<String> idsAcrossARestore(StayRules rules, String backend, FirstHalf first, long at, SecondHalf second,
      Map<String, Long> live) throws Exception {
    OperatorSubtaskState snapshot;
    List<String> ids;
    try (var harness = harness(rules, backend)) {
      first.run(harness);
      snapshot = harness.snapshot(1, at);
      ids = new ArrayList<>(ids(harness));
    }
    try (var harness = harness(rules, backend)) {
      harness.initializeState(snapshot);
      harness.open();
      second.run(harness, h -> {
        FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(h);
        source.live.putAll(live);
        source.sendAllBuckets();
        return source;
      });
      ids.addAll(ids(harness));
    }
    return ids;
  }

  private interface FirstHalf {
    void run(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) throws Exception;
  }

  private interface SecondHalf {
    void run(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness, SourceOf source)
        throws Exception;
  }

  private interface SourceOf {
    FenceIndexOperatorTest.Source of(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h)
        throws Exception;
  }

  private static List<String> ids(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) {
    return triggers(harness).stream().map(t -> t.triggerId + " " + describe(t)).toList();
  }

  /** Fence a, the square, created at 1000, with every bucket read: ready. */
  private static FenceIndexOperatorTest.Source squareAt1000(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) throws Exception {
    harness.open();
    FenceIndexOperatorTest.Source source = new FenceIndexOperatorTest.Source(harness);
    source.sendAllBuckets();
    source.send(upsert("a", 1, SQUARE, false, 1000));
    return source;
  }

  /** Fences a and b, the same square, created at 1000, ready. */
  private static FenceIndexOperatorTest.Source squaresAAndB(
      KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness) throws Exception {
    FenceIndexOperatorTest.Source source = squareAt1000(harness);
    source.send(upsert("b", 1, SQUARE, false, 1000));
    return source;
  }

  private static List<String> described(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    return triggers(h).stream().map(DwellAndSilenceTest::describe).toList();
  }

  private static String describe(GeofenceTrigger t) {
    return t.kind + " " + t.cause.label() + " " + t.objectId + " " + t.fenceId + "@" + t.fenceSeq + " t=" + t.eventTime;
  }

  private static long lastWatermark(KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> h) {
    long last = Long.MIN_VALUE;
    for (Object o : h.getOutput()) {
      if (o instanceof Watermark mark) {
        last = mark.getTimestamp();
      }
    }
    return last;
  }

  private static KeyedTwoInputStreamOperatorTestHarness<FenceKey, FenceChange, Location, GeofenceTrigger> harness(
      StayRules rules, String backend) throws Exception {
    return FenceIndexOperatorTest.harness(new FenceIndexOperator(GeometryReadOptions.defaults(), GeometryFormat.WKB, null, null,
        new LocationTimePolicy(Duration.ofMillis(LATENESS), Duration.ofMinutes(1))).withStays(rules), 1, 0, backend);
  }
}
