package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class RereadsTest {

  private static final long PATIENCE = 500;

  @Test
  void aBucketIsOverdueOncePastItsFingerprintByMoreThanThePatienceAndOncePerVersion() {
    Rereads rereads = new Rereads();
    rereads.fingerprint(5, 10, 1_000L);
    rereads.fingerprint(6, 3, 1_200L);
    int[] unmatched = {5, 6, 7}; // 7: no fingerprint streamed yet, so never overdue
    assertThat(rereads.overdue(unmatched, 1_500, PATIENCE, 0)).as("at the patience, not past it").isNull();
    Rereads.Overdue first = rereads.overdue(unmatched, 1_501, PATIENCE, 0);
    assertThat(first.buckets()).containsExactly(5);
    assertThat(first.longestMillis()).isEqualTo(501);
    Rereads.Overdue second = rereads.overdue(unmatched, 2_000, PATIENCE, 0);
    assertThat(second.buckets()).as("5 was read at its version already").containsExactly(6);
    assertThat(second.longestMillis()).isEqualTo(800);
    assertThat(rereads.overdue(unmatched, 9_000, PATIENCE, 0)).isNull();
    rereads.fingerprint(5, 11, 8_000L);
    assertThat(rereads.overdue(unmatched, 9_000, PATIENCE, 0).buckets()).as("a newer version").containsExactly(5);
    assertThat(rereads.count()).isEqualTo(3);
  }

  /** A read's fingerprint has no commit time: it is a version of its own, as old as the stream's last one. */
  @Test
  void aReadsFingerprintIsANewVersionAsOldAsTheStreamsLast() {
    Rereads rereads = new Rereads();
    int[] unmatched = {9};
    rereads.fingerprint(9, 4, null);
    assertThat(rereads.overdue(unmatched, 100_000, PATIENCE, 0)).as("no streamed fingerprint to measure from").isNull();
    rereads.fingerprint(9, 5, 1_000L);
    assertThat(rereads.overdue(unmatched, 2_000, PATIENCE, 0).buckets()).containsExactly(9);
    rereads.fingerprint(9, 6, null);
    assertThat(rereads.overdue(unmatched, 2_000, PATIENCE, 0).buckets()).containsExactly(9);
  }

  /** A re-read that found the source unreachable read nothing: its buckets are due again, at the same versions, after the retry. */
  @Test
  void aRereadTheSourceDidNotAnswerIsDueAgainAfterTheRetry() {
    Rereads rereads = new Rereads();
    rereads.fingerprint(1, 7, 0L);
    rereads.fingerprint(2, 7, 0L);
    assertThat(rereads.overdue(new int[] {1}, 1_000, PATIENCE, 10).buckets()).containsExactly(1);
    assertThat(rereads.overdue(new int[] {2}, 1_000, PATIENCE, 20).buckets()).containsExactly(2);
    rereads.unreachable(new int[] {2}, 2_020);
    int[] both = {1, 2};
    assertThat(rereads.overdue(both, 1_000, PATIENCE, 2_019)).as("before the retry").isNull();
    assertThat(rereads.overdue(both, 1_000, PATIENCE, 2_020).buckets()).as("1 was read; 2 was not").containsExactly(2);
  }
}
