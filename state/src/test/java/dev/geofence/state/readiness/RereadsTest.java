package dev.geofence.state.readiness;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class RereadsTest {

  private static final long PATIENCE = 500;

  @Test
  void aBucketIsOverdueOncePastItsFingerprintByMoreThanThePatience() {
    Rereads rereads = new Rereads();
    rereads.streamed(5, 1_000L);
    rereads.streamed(6, 1_200L);
    int[] unmatched = {5, 6, 7}; // 7: nothing streamed of it yet, so never overdue
    assertThat(rereads.overdue(unmatched, 1_500, PATIENCE, 0)).as("at the patience, not past it").isNull();
    Rereads.Overdue first = rereads.overdue(unmatched, 1_501, PATIENCE, 0);
    assertThat(first.buckets()).containsExactly(5);
    assertThat(first.longestMillis()).isEqualTo(501);
    Rereads.Overdue second = rereads.overdue(unmatched, 2_000, PATIENCE, 0);
    assertThat(second.buckets()).as("5 is being read already").containsExactly(6);
    assertThat(second.longestMillis()).isEqualTo(800);
    assertThat(rereads.count()).isEqualTo(2);
    assertThat(rereads.retrying()).isTrue();
  }

  /** A bucket its re-read left mismatched is read again after 2 s, 4 s, 8 s, ... up to 5 min, for as long as it stays so. */
  @Test
  void aBucketThatStaysMismatchedIsReadAgainWithBackoffForAsLongAsItDoes() {
    Rereads rereads = new Rereads();
    rereads.streamed(3, 0L);
    int[] unmatched = {3};
    long now = 10_000;
    long waited = 0;
    for (int tried = 1; tried <= 12; tried++) {
      assertThat(rereads.overdue(unmatched, 60_000, PATIENCE, now).buckets()).as("try %d", tried).containsExactly(3);
      rereads.stillUnmatched(3);
      long wait = Math.min(Rereads.LONGEST_RETRY_MS, Rereads.FIRST_RETRY_MS << (tried - 1));
      assertThat(rereads.overdue(unmatched, 60_000, PATIENCE, now + wait - 1)).as("before the backoff of try %d", tried).isNull();
      now += wait;
      waited += wait;
    }
    assertThat(waited).as("2 + 4 + ... + 256 s, then 5 min each").isEqualTo(510_000 + 4 * 300_000);
    assertThat(rereads.count()).isEqualTo(12);
    assertThat(rereads.unmatchedAfterReread()).isEqualTo(12);
    assertThat(Rereads.backoff(Integer.MAX_VALUE)).isEqualTo(Rereads.LONGEST_RETRY_MS);
  }

  /** Once a bucket matches again, its next mismatch is read at once: the backoff was for the mismatch that ended. */
  @Test
  void aBucketThatMatchedAgainStartsAfresh() {
    Rereads rereads = new Rereads();
    rereads.streamed(4, 0L);
    assertThat(rereads.overdue(new int[] {4}, 10_000, PATIENCE, 0).buckets()).containsExactly(4);
    assertThat(rereads.overdue(new int[] {4}, 10_000, PATIENCE, 1)).as("within its backoff").isNull();
    assertThat(rereads.overdue(new int[0], 10_000, PATIENCE, 2)).isNull();
    assertThat(rereads.retrying()).as("it matches").isFalse();
    rereads.streamed(4, 20_000L);
    assertThat(rereads.overdue(new int[] {4}, 20_501, PATIENCE, 3).buckets()).as("a new mismatch").containsExactly(4);
  }

  /**
   * An edit applied on arrival leaves its bucket mismatched until its transaction's fingerprint
   * comes, and the clock may move between the two: measured from the edit, not from the bucket's
   * older fingerprint, the bucket is not overdue.
   */
  @Test
  void aMismatchIsMeasuredFromTheBucketsNewestChangeNotItsNewestFingerprint() {
    Rereads rereads = new Rereads();
    int[] unmatched = {9};
    rereads.streamed(9, 1_000L); // its fingerprint, long ago
    rereads.streamed(9, 5_000L); // an edit, its fingerprint still to come
    assertThat(rereads.overdue(unmatched, 4_999, PATIENCE, 0)).as("the clock is not past the edit").isNull();
    assertThat(rereads.overdue(unmatched, 5_500, PATIENCE, 0)).as("at the patience").isNull();
    rereads.streamed(9, 3_000L); // an older change, restored: the newest still counts
    assertThat(rereads.overdue(unmatched, 5_501, PATIENCE, 0).buckets()).containsExactly(9);
  }

  /** A re-read that found the source unreachable read nothing: its buckets are due again after their backoff. */
  @Test
  void aRereadTheSourceDidNotAnswerIsDueAgainAfterItsBackoff() {
    Rereads rereads = new Rereads();
    rereads.streamed(1, 0L);
    rereads.streamed(2, 0L);
    assertThat(rereads.overdue(new int[] {1}, 1_000, PATIENCE, 10).buckets()).containsExactly(1);
    assertThat(rereads.overdue(new int[] {1, 2}, 1_000, PATIENCE, 20).buckets()).containsExactly(2);
    rereads.stillUnmatched(2);
    int[] both = {1, 2};
    assertThat(rereads.overdue(both, 1_000, PATIENCE, 2_009)).as("before either backoff").isNull();
    assertThat(rereads.overdue(both, 1_000, PATIENCE, 2_019).buckets()).as("1's backoff has passed, 2's not").containsExactly(1);
    assertThat(rereads.overdue(both, 1_000, PATIENCE, 2_020).buckets()).containsExactly(2);
  }
}
