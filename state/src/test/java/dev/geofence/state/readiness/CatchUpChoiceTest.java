package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

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
    assertThat(week.readMillis()).isEqualTo(day.readMillis());
    assertThat(week.replayMillis()).isEqualTo(7 * day.replayMillis());
    for (long backlog : new long[] {0, 10, 1_000, 100_000, 10_000_000}) {
      for (int parallelism : new int[] {1, 2, 8}) {
        CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, backlog, FENCES, FENCES, parallelism, false);
        assertThat(d.readMillis()).as("backlog %d at parallelism %d", backlog, parallelism)
            .isLessThanOrEqualTo((long) Math.ceil(FENCES * (CatchUpChoice.KEY_MICROS + CatchUpChoice.LOAD_MICROS) / 1000));
        long cheapest = Math.min(d.replayMillis(), Math.min(d.readMillis(), d.loadMillis()));
        assertThat(d.path()).isEqualTo(d.replayMillis() == cheapest ? CatchUp.REPLAY : d.readMillis() == cheapest ? CatchUp.READ
            : CatchUp.LOAD);
      }
    }
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
