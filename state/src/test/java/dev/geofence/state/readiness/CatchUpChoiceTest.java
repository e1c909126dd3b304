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
  void theReadNeverEstimatesBelowTheStreamPassingItsPosition() {
    // The stream's one reader still decodes every edit of the job until it passes the read.
    for (long backlog : new long[] {0, 10, 1_000, 100_000, 10_000_000}) {
      for (int parallelism : new int[] {1, 2, 8}) {
        CatchUpChoice.Decision d = CatchUpChoice.choose(CatchUp.AUTO, backlog, FENCES, parallelism, false);
        long stream = (long) Math.ceil(backlog * parallelism * CatchUpChoice.STREAM_MICROS / 1000);
        assertThat(d.readMillis()).as("backlog %d at parallelism %d", backlog, parallelism).isGreaterThanOrEqualTo(stream);
        assertThat(d.replayMillis()).isGreaterThanOrEqualTo(stream);
        assertThat(d.path()).isEqualTo(d.readMillis() < d.replayMillis() ? CatchUp.READ : CatchUp.REPLAY);
      }
    }
  }
}
