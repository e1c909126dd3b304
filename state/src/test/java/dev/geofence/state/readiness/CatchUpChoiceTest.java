package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.BitSet;
import java.util.Random;
import org.junit.jupiter.api.Test;

class CatchUpChoiceTest {

  /** A subtask of two holding half of 1.2 M fences, as the benchmarks run. */
  private static final long FENCES = 600_000;

  @Test
  void aMinuteOldSavepointReplays() {
    // 40 edits/s for 60 s, half of them in this subtask's buckets.
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 1_200, FENCES, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.REPLAY);
    assertThat(d.replayMillis()).isLessThan(d.readMillis());
    assertThat(d.reason()).startsWith("replay is the cheapest");
  }

  @Test
  void anHourOldSavepointReadsWhereNoLocationOfTheDowntimeWillCome() {
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 72_000, FENCES, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.READ);
    // Calibrated on the replay measured at this size on 2026-12-06: 8.8 s.
    assertThat(d.replayMillis()).isBetween(8_000L, 9_500L);
    assertThat(d.readMillis()).isLessThan(d.replayMillis());
    assertThat(d.reason()).startsWith("read is the cheapest").contains(d.replayMillis() + " ms", d.readMillis() + " ms", d.loadMillis() + " ms");
  }

  @Test
  void aLocationSourceThatReplaysTheDowntimeKeepsAutoOnReplay() {
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 72_000, FENCES, FENCES, 2, true);
    assertThat(d.path()).isEqualTo(CatchUp.REPLAY);
    assertThat(d.readMillis()).isLessThan(d.replayMillis());
    assertThat(d.reason()).contains("though the read is the cheapest", "dead letters");
  }

  @Test
  void aForcedPathIsTakenWhateverTheEstimatesSay() {
    assertThat(CatchUpChoice.choose(CatchUp.READ, 10, FENCES, FENCES, 2, true).path()).isEqualTo(CatchUp.READ);
    assertThat(CatchUpChoice.choose(CatchUp.REPLAY, 1_000_000, FENCES, FENCES, 2, false).path()).isEqualTo(CatchUp.REPLAY);
    assertThat(CatchUpChoice.choose(CatchUp.READ, 10, FENCES, FENCES, 2, true).reason()).startsWith("read forced");
    assertThat(CatchUpChoice.choose(CatchUp.LOAD, 10, FENCES, FENCES, 2, true).path()).isEqualTo(CatchUp.LOAD);
    assertThat(CatchUpChoice.choose(CatchUp.LOAD, 10, FENCES, FENCES, 2, true).reason()).startsWith("load forced");
  }

  @Test
  void theReadCostsWhatChangedNotHowOften() {
    // However long the backlog, the read reads each fence at most once; the replay grows with it.
    CatchUpChoice.Decision day = CatchUpChoice.choose(CatchUp.AUTO, 24 * 72_000, FENCES, FENCES, 2, false);
    CatchUpChoice.Decision week = CatchUpChoice.choose(CatchUp.AUTO, 7 * 24 * 72_000, FENCES, FENCES, 2, false);
    long everyFenceRead = (long) Math.ceil(FENCES * (CatchUpChoice.KEY_MICROS + CatchUpChoice.LOAD_MICROS) / 1000);
    assertThat(week.readMillis()).isLessThanOrEqualTo(everyFenceRead).isLessThan(day.readMillis() * 11 / 10);
    assertThat(week.replayMillis()).isEqualTo(7 * day.replayMillis());
    for (long backlog : new long[] {0, 10, 1_000, 100_000, 10_000_000}) {
      for (int parallelism : new int[] {1, 2, 8}) {
        CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, backlog, FENCES, FENCES, parallelism, false);
        assertThat(d.readMillis()).as("backlog %d at parallelism %d", backlog, parallelism)
            .isLessThanOrEqualTo(everyFenceRead);
        long cheapest = Math.min(d.replayMillis(), Math.min(d.readMillis(), d.loadMillis()));
        assertThat(d.path()).isEqualTo(d.replayMillis() == cheapest ? CatchUp.REPLAY : d.readMillis() == cheapest ? CatchUp.READ
            : CatchUp.LOAD);
      }
    }
  }

  @Test
  void aSixHourOldSavepointReads() {
    // 864,000 edits at 40/s, 164,000 of this subtask's 600,000 fences changed (2026-12-06): the
    // read took 10.0 s per subtask and the load 22.8 s. Counting a changed fence per transaction
    // put the read at 21.8 s, near the load's 26.4, and chose the load from about 7.4 hours.
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 432_000, FENCES, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.READ);
    assertThat(d.readMillis()).isLessThan(d.loadMillis() * 2 / 3);
    // Twelve hours: the benchmark's edits change 328,000 of them, which a read takes in about 17 s.
    assertThat(CatchUpChoice.choose(CatchUp.AUTO, 864_000, FENCES, FENCES, 2, false).path()).isEqualTo(CatchUp.READ);
  }

  @Test
  void theChangedFencesAreAtMostWhatRandomEditsChange() {
    // The oracle: edits drawn at random, the distinct fences counted. Evenly spread, the count is
    // what changed() expects; favouring some fences (as real edits and the benchmark's do), fewer.
    Random random = new Random(37);
    for (int round = 0; round < 200; round++) {
      int fences = 1 + random.nextInt(20_000);
      int backlog = random.nextInt(4 * fences);
      BitSet even = new BitSet(fences);
      BitSet skewed = new BitSet(fences);
      int hot = 1 + random.nextInt(fences);
      for (int i = 0; i < backlog; i++) {
        even.set(random.nextInt(fences));
        skewed.set(random.nextInt(4) == 0 ? random.nextInt(fences) : random.nextInt(hot));
      }
      long expected = CatchUpChoice.changed(backlog, fences);
      assertThat(expected).as("%d edits of %d fences", backlog, fences).isLessThanOrEqualTo(Math.min(backlog, fences));
      // Within a few standard deviations (at most sqrt(fences)/2 each way) and rounding.
      double slack = 3 * Math.sqrt(fences) + 1;
      assertThat((double) even.cardinality()).as("%d edits of %d fences, evenly", backlog, fences)
          .isBetween(expected - slack, expected + slack);
      assertThat((double) skewed.cardinality()).as("%d edits of %d fences, %d of them hot", backlog, fences, hot)
          .isLessThanOrEqualTo(expected + slack);
    }
    assertThat(CatchUpChoice.changed(0, FENCES)).isZero();
    assertThat(CatchUpChoice.changed(1_000, 0)).isZero();
    assertThat(CatchUpChoice.changed(1, FENCES)).isEqualTo(1);
    assertThat(CatchUpChoice.changed(100 * FENCES, FENCES)).isEqualTo(FENCES);
  }

  @Test
  void aDayOldSavepointLoadsWhereNoLocationOfTheDowntimeWillCome() {
    // 40 edits/s for a day, half of them in this subtask's buckets: every fence changed, so a read
    // would read each whole, and the key pass before it is all it would cost beyond a load.
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 24 * 72_000, FENCES, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.LOAD);
    assertThat(d.loadMillis()).isLessThan(d.readMillis()).isLessThan(d.replayMillis());
    assertThat(d.reason()).startsWith("load is the cheapest").contains(d.loadMillis() + " ms");
    CatchUpChoice.Decision kafka = CatchUpChoice.choose(CatchUp.AUTO, 24 * 72_000, FENCES, FENCES, 2, true);
    assertThat(kafka.path()).isEqualTo(CatchUp.REPLAY);
    assertThat(kafka.reason()).contains("though the load is the cheapest", "a load would make");
  }

  @Test
  void theLoadCostsTheFencesAtTheSourceWhateverChanged() {
    CatchUpChoice.Decision few = CatchUpChoice.choose(CatchUp.AUTO, 10, FENCES, FENCES, 2, false);
    CatchUpChoice.Decision many = CatchUpChoice.choose(CatchUp.AUTO, 10_000_000, FENCES, FENCES, 2, false);
    assertThat(few.loadMillis()).isEqualTo(many.loadMillis()).isEqualTo((long) Math.ceil(FENCES * CatchUpChoice.LOAD_MICROS / 1000));
    // Fences created while the job was down are loaded too; fences it holds that are gone are not.
    assertThat(CatchUpChoice.choose(CatchUp.AUTO, 10, FENCES, 2 * FENCES, 2, false).loadMillis()).isEqualTo(2 * few.loadMillis());
  }
}
