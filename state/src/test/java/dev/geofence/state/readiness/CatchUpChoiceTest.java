package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CatchUpChoiceTest {

  /** A subtask of two holding half of 1.2 M fences, as the benchmarks run. */
  private static final long FENCES = 600_000;

  @Test
  void aMinuteOldSavepointReplays() {
    // 40 edits/s for 60 s, half of them in this subtask's buckets.
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 1_200, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.REPLAY);
    assertThat(d.replayMillis()).isLessThan(d.readMillis());
    assertThat(d.reason()).startsWith("replay is the cheaper");
  }

  @Test
  void anHourOldSavepointReadsWhereNoLocationOfTheDowntimeWillCome() {
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 72_000, FENCES, 2, false);
    assertThat(d.path()).isEqualTo(CatchUp.READ);
    // Calibrated on the replay measured at this size on 2026-12-06: 8.8 s.
    assertThat(d.replayMillis()).isBetween(8_000L, 9_500L);
    assertThat(d.readMillis()).isLessThan(d.replayMillis());
    assertThat(d.reason()).startsWith("read is the cheaper").contains(d.replayMillis() + " ms", d.readMillis() + " ms");
  }

  @Test
  void aLocationSourceThatReplaysTheDowntimeKeepsAutoOnReplay() {
    CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, 72_000, FENCES, 2, true);
    assertThat(d.path()).isEqualTo(CatchUp.REPLAY);
    assertThat(d.readMillis()).isLessThan(d.replayMillis());
    assertThat(d.reason()).contains("though the read is the cheaper", "dead letters");
  }

  @Test
  void aForcedPathIsTakenWhateverTheEstimatesSay() {
    assertThat(CatchUpChoice.choose(CatchUp.READ, 10, FENCES, 2, true).path()).isEqualTo(CatchUp.READ);
    assertThat(CatchUpChoice.choose(CatchUp.REPLAY, 1_000_000, FENCES, 2, false).path()).isEqualTo(CatchUp.REPLAY);
    assertThat(CatchUpChoice.choose(CatchUp.READ, 10, FENCES, 2, true).reason()).startsWith("read forced");
  }

  @Test
  void theReadCostsWhatChangedNotHowOften() {
    // However long the backlog, the read reads each fence at most once; the replay grows with it.
    CatchUpChoice.Decision day = CatchUpChoice.choose(CatchUp.AUTO, 24 * 72_000, FENCES, 2, false);
    CatchUpChoice.Decision week = CatchUpChoice.choose(CatchUp.AUTO, 7 * 24 * 72_000, FENCES, 2, false);
    assertThat(week.readMillis()).isEqualTo(day.readMillis());
    assertThat(week.replayMillis()).isEqualTo(7 * day.replayMillis());
    for (long backlog : new long[] {0, 10, 1_000, 100_000, 10_000_000}) {
      for (int parallelism : new int[] {1, 2, 8}) {
        CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, backlog, FENCES, parallelism, false);
        assertThat(d.readMillis()).as("backlog %d at parallelism %d", backlog, parallelism)
            .isLessThanOrEqualTo((long) Math.ceil(FENCES * (CatchUpChoice.KEY_MICROS + CatchUpChoice.LOAD_MICROS) / 1000));
        assertThat(d.path()).isEqualTo(d.readMillis() < d.replayMillis() ? CatchUp.READ : CatchUp.REPLAY);
      }
    }
  }
}
